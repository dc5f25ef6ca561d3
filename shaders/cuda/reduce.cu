// Reductions: bias gradients (one block per channel) and the numerics check.
#include "common.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

// Stage 1: block (chunk, channel) sums its images' pixels of that channel.
__global__ void bias_partial_kernel(const float* dz, float* partial, int n, int c, int hw, int chunks) {
  const int chunk = blockIdx.x, ch = blockIdx.y;
  const int n0 = static_cast<int>(static_cast<long>(n) * chunk / chunks);
  const int n1 = static_cast<int>(static_cast<long>(n) * (chunk + 1) / chunks);
  float sum = 0.f;
  for (int img = n0; img < n1; ++img) {
    const float* plane = dz + (static_cast<size_t>(img) * c + ch) * hw;
    for (int p = threadIdx.x; p < hw; p += blockDim.x) sum += plane[p];
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) partial[static_cast<size_t>(ch) * chunks + chunk] = sum;
}

// Stage 2: one thread per channel adds its chunks in order (deterministic).
__global__ void bias_total_kernel(const float* partial, float* db, int c, int chunks) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  float sum = 0.f;
  for (int k = 0; k < chunks; ++k) sum += partial[static_cast<size_t>(ch) * chunks + k];
  db[ch] = sum;
}

// One pixel per plane (fully connected): a thread per channel walks the rows, coalesced.
__global__ void column_sum_kernel(const float* dz, float* db, int n, int c) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  float sum = 0.f;
  for (int r = 0; r < n; ++r) sum += dz[static_cast<size_t>(r) * c + ch];
  db[ch] = sum;
}

__global__ void nonfinite_kernel(const float* data, size_t n, int* flag) {
  NNGRAPH_GRID_LOOP(i, n) if (!isfinite(data[i])) *flag = 1;
}

}  // namespace

void bias_gradient(cudaStream_t s, const float* dz, float* db, int n, int c, int hw, float* partial) {
  if (hw == 1) {
    column_sum_kernel<<<(c + kThreads - 1) / kThreads, kThreads, 0, s>>>(dz, db, n, c);
    check_launch("bias_gradient");
    return;
  }
  const int chunks = bias_gradient_chunks(n, c);
  const int threads = hw >= kThreads ? kThreads : 32;
  bias_partial_kernel<<<dim3(chunks, c), threads, 0, s>>>(dz, partial, n, c, hw, chunks);
  bias_total_kernel<<<(c + kThreads - 1) / kThreads, kThreads, 0, s>>>(partial, db, c, chunks);
  check_launch("bias_gradient");
}

int bias_gradient_chunks(int n, int c) {
  // About four blocks per multiprocessor in all, at most one chunk per image.
  return std::max(1, std::min(n, 512 / std::max(1, c) + 1));
}

void any_nonfinite(cudaStream_t s, const float* data, size_t count, int* flag) {
  cudaMemsetAsync(flag, 0, sizeof(int), s);
  nonfinite_kernel<<<blocks_for(count), kThreads, 0, s>>>(data, count, flag);
  check_launch("check_numerics");
}

}  // namespace nngraph::cuda
