// Reductions: bias gradients (one block per channel) and the numerics check.
#include "common.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

__global__ void bias_gradient_kernel(const float* dz, float* db, int n, int c, int hw) {
  const int ch = blockIdx.x;
  float sum = 0.f;
  const size_t items = static_cast<size_t>(n) * hw;
  for (size_t i = threadIdx.x; i < items; i += blockDim.x)
    sum += dz[((i / hw) * c + ch) * hw + i % hw];
  sum = block_sum(sum);
  if (threadIdx.x == 0) db[ch] = sum;
}

__global__ void nonfinite_kernel(const float* data, size_t n, int* flag) {
  NNGRAPH_GRID_LOOP(i, n) if (!isfinite(data[i])) *flag = 1;
}

}  // namespace

void bias_gradient(cudaStream_t s, const float* dz, float* db, int n, int c, int hw) {
  bias_gradient_kernel<<<c, kThreads, 0, s>>>(dz, db, n, c, hw);
  check_launch("bias_gradient");
}

void any_nonfinite(cudaStream_t s, const float* data, size_t count, int* flag) {
  cudaMemsetAsync(flag, 0, sizeof(int), s);
  nonfinite_kernel<<<blocks_for(count), kThreads, 0, s>>>(data, count, flag);
  check_launch("check_numerics");
}

}  // namespace nngraph::cuda
