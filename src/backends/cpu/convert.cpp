// Strided row copies and three-axis permutations, on the host.
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "ops/convert.h"

namespace nngraph {
namespace {

void copy_rows(Backend&, float* dst, int dst_ld, const float* src, int src_ld, int rows, int columns, bool add) {
  for (int r = 0; r < rows; ++r) {
    float* d = dst + size_t(r) * dst_ld;
    const float* s = src + size_t(r) * src_ld;
    if (add)
      for (int c = 0; c < columns; ++c) d[c] += s[c];
    else
      std::memcpy(d, s, columns * sizeof(float));
  }
}

void permute(Backend&, const float* in, float* out, const int* dims, const int* perm) {
  size_t stride[3] = {size_t(dims[1]) * dims[2], size_t(dims[2]), 1};
  const int o0 = dims[perm[0]], o1 = dims[perm[1]], o2 = dims[perm[2]];
  const size_t s0 = stride[perm[0]], s1 = stride[perm[1]], s2 = stride[perm[2]];
  for (int a = 0; a < o0; ++a)
    for (int b = 0; b < o1; ++b) {
      const float* src = in + a * s0 + b * s1;
      float* dst = out + (size_t(a) * o1 + b) * o2;
      for (int c = 0; c < o2; ++c) dst[c] = src[c * s2];
    }
}

NNGRAPH_KERNEL(CopyRowsKernel, CPU, copy_rows);
NNGRAPH_KERNEL(PermuteKernel, CPU, permute);

}  // namespace
}  // namespace nngraph
