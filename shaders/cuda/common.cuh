#pragma once
// Shared launch helpers for the .cu files.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

namespace nngraph::cuda {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over `count` items (bounded: the loop covers the rest).
inline unsigned blocks_for(size_t count) {
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>((count + kThreads - 1) / kThreads, 65535 * 8)));
}

// Grid-stride loop with index type I: kernels whose per-element index math divides run with
// unsigned indices where every index they form fits (fits_32), as 64-bit division per
// element costs several times a 32-bit one and bounds such kernels.
#define NNGRAPH_GRID_LOOP_T(I, i, count) \
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < (count); i += I(gridDim.x) * blockDim.x)
#define NNGRAPH_GRID_LOOP(i, count) NNGRAPH_GRID_LOOP_T(size_t, i, count)
inline bool fits_32(size_t largest_index) { return largest_index <= 0x7fffffffu; }  // i + stride stays below 2³²

// Calls launch(I{}) with I = unsigned where every index up to `largest` fits, else size_t.
template <class F>
void with_index_type(size_t largest, F&& launch) {
  if (fits_32(largest))
    launch(0u);
  else
    launch(size_t{0});
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the sum.
template <class T>
__device__ T block_sum(T v) {
  __shared__ T partial[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  T total = 0;
  for (int i = 0; i < static_cast<int>(blockDim.x + 31) / 32; ++i) total += partial[i];
  return total;
}

}  // namespace nngraph::cuda
