// Patch moments on cuda: each block loads chunks of kChunk patches into shared memory (a
// thread per (value, patch), patches fastest, so neighbouring threads read neighbouring
// pixels) and each thread sums the products of its entries of the D×D matrix over the
// chunk, then over the block's chunks, in float32; the host sums the blocks in float64.
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "common.cuh"
#include "ops/patch_moments.h"

namespace nngraph {
namespace cuda {
namespace {

constexpr int kChunk = 128;
constexpr int kEntries = (kMaxPatchValues * kMaxPatchValues + kThreads - 1) / kThreads;  // per thread

__global__ void patch_moments_kernel(const float* x, ImageShape s, int kh, int kw, long long patches, float* partial) {
  extern __shared__ float chunk[];  // D rows of kChunk patches
  const int d = s.c * kh * kw, dd = d * d, oh = s.h - kh + 1, ow = s.w - kw + 1;
  float sums[kEntries] = {};
  for (long long base = static_cast<long long>(blockIdx.x) * kChunk; base < patches;
       base += static_cast<long long>(gridDim.x) * kChunk) {
    for (int i = threadIdx.x; i < d * kChunk; i += blockDim.x) {
      const int row = i / kChunk, at = i % kChunk;
      const long long q = base + at;
      float v = 0.f;  // patches past the last count nothing
      if (q < patches) {
        const int xx = static_cast<int>(q % ow), y = static_cast<int>(q / ow % oh);
        const long long n = q / (static_cast<long long>(ow) * oh);
        const int c = row / (kh * kw), dy = row / kw % kh, dx = row % kw;
        v = x[((n * s.c + c) * s.h + y + dy) * s.w + xx + dx];
      }
      chunk[i] = v;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kEntries; ++k) {
      const int e = threadIdx.x + k * blockDim.x;
      if (e >= dd) break;
      const float* a = chunk + (e / d) * kChunk;
      const float* b = chunk + (e % d) * kChunk;
      float s = 0.f;
      for (int p = 0; p < kChunk; ++p) s += a[p] * b[p];
      sums[k] += s;
    }
    __syncthreads();
  }
#pragma unroll
  for (int k = 0; k < kEntries; ++k) {
    const int e = threadIdx.x + k * blockDim.x;
    if (e < dd) partial[static_cast<size_t>(blockIdx.x) * dd + e] = sums[k];
  }
}

}  // namespace
}  // namespace cuda

namespace {

std::vector<double> patch_moments(Backend& backend, const Tensor& images, int kh, int kw) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const ImageShape& s = images.shape();
  const int d = s.c * kh * kw;
  const long long patches = static_cast<long long>(images.batch()) * (s.h - kh + 1) * (s.w - kw + 1);
  const long long chunks = (patches + cuda::kChunk - 1) / cuda::kChunk;
  const int blocks = static_cast<int>(std::min<long long>(chunks, 4LL * b.multiprocessors()));
  const size_t dd = static_cast<size_t>(d) * d;
  const auto partial = b.allocate(blocks * dd * sizeof(float));
  cuda::patch_moments_kernel<<<blocks, cuda::kThreads, d * cuda::kChunk * sizeof(float), b.stream()>>>(
      images.data_as<const float>(), s, kh, kw, patches, static_cast<float*>(partial->data()));
  cuda::check_launch("patch_moments");
  std::vector<float> host(blocks * dd);
  b.copy_to_host(host.data(), partial->data(), host.size() * sizeof(float));
  std::vector<double> out(dd, 0.0);
  for (int k = 0; k < blocks; ++k)
    for (size_t e = 0; e < dd; ++e) out[e] += host[k * dd + e];
  return out;
}

NNGRAPH_KERNEL(PatchMomentsKernel, CUDA, patch_moments);

}  // namespace
}  // namespace nngraph
