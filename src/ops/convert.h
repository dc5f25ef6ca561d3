#pragma once
// Kernels of the image↔matrix converters and the recurrent layers' time-major sequences:
// strided row copies and three-axis permutations.
#include "backends/kernel.h"

namespace nngraph {

// dst[r·dst_ld + c] = src[r·src_ld + c] for rows × columns floats; add: += instead.
struct CopyRowsKernel : KernelOf<void(Backend&, float* dst, int dst_ld, const float* src, int src_ld, int rows,
                                      int columns, bool add)> {
  static constexpr const char* name = "copy_rows";
};
// out = in with its three axes (d0, d1, d2) reordered: out axis k is in axis perm[k].
struct PermuteKernel : KernelOf<void(Backend&, const float* in, float* out, const int* dims, const int* perm)> {
  static constexpr const char* name = "permute";
};

}  // namespace nngraph
