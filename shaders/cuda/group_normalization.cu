// Group, instance and layer normalization: a block per statistic (image, group or position)
// sums its values twice (mean, then squared deviations) and normalizes them; the gradient's
// block sums gamma·dy and gamma·dy·x̂ the same way; gamma's and beta's gradients take a block
// per channel. Statistics over the channels of each position of NCHW images (layer
// normalization over C) take tiles of 32 positions by 8 rows of threads instead, so that a
// warp reads 32 neighbouring values where a block per position read values hw apart.
// Registered here as the cuda kernels of ops/group_normalization.h.

#include "backends/cuda/cuda_backend.h"
#include "common.cuh"
#include "kernels.cuh"
#include "ops/group_normalization.h"

namespace nngraph {
namespace {

using cuda::block_sum;
using cuda::column_sum;
using cuda::kTileRows;
using cuda::kThreads;
using cuda::ld;
using cuda::st;

// Images (x, y, dy, dx) in T; gamma, beta, statistics and parameter gradients in float32.
template <class T>
__global__ void normalize_kernel(math::NormSpan s, float eps, const T* x, const float* gamma, const float* beta,
                                 float* stats, T* y) {
  const int per = s.stats(), count = s.count(), stride = s.stride();
  const int n = blockIdx.x / per, a = blockIdx.x % per;
  const size_t base = s.first(n, a);
  float sum = 0.f;
  for (int j = threadIdx.x; j < count; j += blockDim.x) sum += ld(x[base + static_cast<size_t>(j) * stride]);
  const float mean = block_sum(sum) / count;
  float sq = 0.f;
  for (int j = threadIdx.x; j < count; j += blockDim.x) {
    const float d = ld(x[base + static_cast<size_t>(j) * stride]) - mean;
    sq += d * d;
  }
  const float inv = rsqrtf(block_sum(sq) / count + eps);
  if (stats && threadIdx.x == 0) stats[2 * blockIdx.x] = mean, stats[2 * blockIdx.x + 1] = inv;
  if (!y) return;  // a gradient pass wants the statistics alone
  for (int j = threadIdx.x; j < count; j += blockDim.x) {
    const size_t at = base + static_cast<size_t>(j) * stride;
    const int c = s.channel(a, j);
    y[at] = st<T>(gamma[c] * (ld(x[at]) - mean) * inv + beta[c]);
  }
}

template <class T>
__global__ void input_gradient_kernel(math::NormSpan s, const T* x, const T* dy, const float* gamma, const float* stats,
                                      T* dx) {
  const int per = s.stats(), count = s.count(), stride = s.stride();
  const int a = blockIdx.x % per;
  const size_t base = s.first(blockIdx.x / per, a);
  const float mean = stats[2 * blockIdx.x], inv = stats[2 * blockIdx.x + 1];
  float s1 = 0.f, s2 = 0.f;
  for (int j = threadIdx.x; j < count; j += blockDim.x) {
    const size_t at = base + static_cast<size_t>(j) * stride;
    const float v = gamma[s.channel(a, j)] * ld(dy[at]);
    s1 += v;
    s2 += v * (ld(x[at]) - mean) * inv;
  }
  const float m1 = block_sum(s1) / count, m2 = block_sum(s2) / count;
  for (int j = threadIdx.x; j < count; j += blockDim.x) {
    const size_t at = base + static_cast<size_t>(j) * stride;
    dx[at] = st<T>(inv * (gamma[s.channel(a, j)] * ld(dy[at]) - m1 - (ld(x[at]) - mean) * inv * m2));
  }
}

// Tile t: its image and this thread's position (common.cuh's pixel tiles), and the position's
// first value.
struct TilePosition : cuda::PixelTile {
  size_t base;
  __device__ TilePosition(const math::NormSpan& s, size_t t)
      : PixelTile(t, s.hw), base(s.first(static_cast<int>(image), in ? p : 0)) {}
};

template <class T>
__global__ void normalize_positions_kernel(math::NormSpan s, size_t tiles, float eps, const T* x, const float* gamma,
                                           const float* beta, float* stats, T* y) {
  __shared__ float share[kTileRows][32];
  const int c = s.channels, hw = s.hw;
  for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const TilePosition at(s, t);
    float sum = 0.f;
    if (at.in)
      for (int ch = threadIdx.y; ch < c; ch += kTileRows) sum += ld(x[at.base + static_cast<size_t>(ch) * hw]);
    const float mean = column_sum(sum, share) / c;
    float sq = 0.f;
    if (at.in)
      for (int ch = threadIdx.y; ch < c; ch += kTileRows) {
        const float d = ld(x[at.base + static_cast<size_t>(ch) * hw]) - mean;
        sq += d * d;
      }
    const float inv = rsqrtf(column_sum(sq, share) / c + eps);
    if (!at.in) continue;
    const size_t k = at.image * hw + at.p;
    if (stats && threadIdx.y == 0) stats[2 * k] = mean, stats[2 * k + 1] = inv;
    if (!y) continue;
    for (int ch = threadIdx.y; ch < c; ch += kTileRows) {
      const size_t i = at.base + static_cast<size_t>(ch) * hw;
      y[i] = st<T>(gamma[ch] * (ld(x[i]) - mean) * inv + beta[ch]);
    }
  }
}

template <class T>
__global__ void input_gradient_positions_kernel(math::NormSpan s, size_t tiles, const T* x, const T* dy,
                                                const float* gamma, const float* stats, T* dx) {
  __shared__ float share[kTileRows][32];
  const int c = s.channels, hw = s.hw;
  for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const TilePosition at(s, t);
    const size_t k = at.image * hw + at.p;
    const float mean = at.in ? stats[2 * k] : 0.f, inv = at.in ? stats[2 * k + 1] : 0.f;
    float s1 = 0.f, s2 = 0.f;
    if (at.in)
      for (int ch = threadIdx.y; ch < c; ch += kTileRows) {
        const size_t i = at.base + static_cast<size_t>(ch) * hw;
        const float v = gamma[ch] * ld(dy[i]);
        s1 += v;
        s2 += v * (ld(x[i]) - mean) * inv;
      }
    const float m1 = column_sum(s1, share) / c, m2 = column_sum(s2, share) / c;
    if (!at.in) continue;
    for (int ch = threadIdx.y; ch < c; ch += kTileRows) {
      const size_t i = at.base + static_cast<size_t>(ch) * hw;
      dx[i] = st<T>(inv * (gamma[ch] * ld(dy[i]) - m1 - (ld(x[i]) - mean) * inv * m2));
    }
  }
}

// Whether the statistics go by tiles of positions.
bool by_tiles(const math::NormSpan& s) { return s.per_position && s.hw > 1; }

template <class T>
__global__ void parameter_gradient_kernel(math::NormSpan s, int images, const T* x, const T* dy, const float* stats,
                                          float* dgamma, float* dbeta) {
  const int c = blockIdx.x, per = s.stats();
  const size_t total = static_cast<size_t>(images) * s.hw;
  float sg = 0.f, sb = 0.f;
  for (size_t i = threadIdx.x; i < total; i += blockDim.x) {
    const int n = static_cast<int>(i / s.hw), p = static_cast<int>(i % s.hw);
    const size_t at = (static_cast<size_t>(n) * s.channels + c) * s.hw + p;
    const size_t k = static_cast<size_t>(n) * per + s.stat_of(c, p);
    const float g = ld(dy[at]);
    sg += g * (ld(x[at]) - stats[2 * k]) * stats[2 * k + 1];
    sb += g;
  }
  sg = block_sum(sg);
  sb = block_sum(sb);
  if (threadIdx.x != 0) return;
  if (dgamma) dgamma[c] = sg;
  if (dbeta) dbeta[c] = sb;
}

void group_normalization(Backend& backend, const math::NormSpan& s, float eps, const Tensor& x, const Tensor& gamma,
                         const Tensor& beta, const Tensor& stats, const Tensor& y) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::with_storage(x.dtype(), [&](auto z) {
    using T = decltype(z);
    const size_t tiles = cuda::pixel_tiles(x.batch(), s.hw);
    if (by_tiles(s))
      normalize_positions_kernel<<<cuda::tile_blocks(tiles), cuda::tile_threads(), 0, b.stream()>>>(
          s, tiles, eps, x.data_as<const T>(), gamma.data_as<const float>(), beta.data_as<const float>(),
          stats.data_as<float>(), y.data_as<T>());
    else
      normalize_kernel<<<x.batch() * s.stats(), kThreads, 0, b.stream()>>>(
          s, eps, x.data_as<const T>(), gamma.data_as<const float>(), beta.data_as<const float>(),
          stats.data_as<float>(), y.data_as<T>());
  });
  cuda::check_launch("group_normalization");
}

void group_normalization_gradient(Backend& backend, const math::NormSpan& s, const Tensor& x, const Tensor& dy,
                                  const Tensor& gamma, const Tensor& stats, const Tensor& dx, const Tensor& dgamma,
                                  const Tensor& dbeta) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::with_storage(x.dtype(), [&](auto z) {
    using T = decltype(z);
    const size_t tiles = cuda::pixel_tiles(x.batch(), s.hw);
    if (dx && by_tiles(s))
      input_gradient_positions_kernel<<<cuda::tile_blocks(tiles), cuda::tile_threads(), 0, b.stream()>>>(
          s, tiles, x.data_as<const T>(), dy.data_as<const T>(), gamma.data_as<const float>(),
          stats.data_as<const float>(), dx.data_as<T>());
    else if (dx)
      input_gradient_kernel<<<x.batch() * s.stats(), kThreads, 0, b.stream()>>>(
          s, x.data_as<const T>(), dy.data_as<const T>(), gamma.data_as<const float>(), stats.data_as<const float>(),
          dx.data_as<T>());
    if (dgamma || dbeta)
      parameter_gradient_kernel<<<s.channels, kThreads, 0, b.stream()>>>(
          s, x.batch(), x.data_as<const T>(), dy.data_as<const T>(), stats.data_as<const float>(),
          dgamma.data_as<float>(), dbeta.data_as<float>());
  });
  cuda::check_launch("group_normalization_gradient");
}

NNGRAPH_KERNEL(GroupNormalizationKernel, CUDA, group_normalization);
NNGRAPH_KERNEL(GroupNormalizationGradientKernel, CUDA, group_normalization_gradient);

}  // namespace
}  // namespace nngraph
