// Losses: one block per image (a warp per image for classifier scores); the terms come
// from backends/math.h, sums are per block (deterministic), in double.
#include "backends/math.h"
#include "common.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

constexpr int kLossThreads = 128;

// Losses whose terms couple a pixel's channels (a softmax or a distribution over them).
__host__ __device__ bool over_channels(LossType t) {
  return t == LossType::SoftMaxCrossEntropy || t == LossType::CategoricalCrossEntropy ||
         t == LossType::KullbackLeiblerDivergence;
}

template <class T>
__global__ void loss_kernel(LossDescriptor d, double scale, const float* loss_scale, const T* xs, const float* labels, const float* weights,
                            T* grads, float* losses, int c, int hw) {
  const size_t per = static_cast<size_t>(c) * hw;
  const size_t off = blockIdx.x * per;
  const T* x = xs + off;
  const float* lab = labels + off;
  T* g = grads + off;
  const double w = static_cast<double>(d.weight) * weights[blockIdx.x];
  const double gs = w * scale * (loss_scale ? *loss_scale : 1.f);
  double total = 0;
  if (over_channels(d.type)) {
    for (int p = threadIdx.x; p < hw; p += blockDim.x) total += math::loss_channels(d, x + p, lab + p, hw, c, gs, g + p);
    total = block_sum(total);
  } else if (d.type == LossType::CosineDistance) {
    double dot = 0, xx = 0, ll = 0;
    for (size_t i = threadIdx.x; i < per; i += blockDim.x)
      dot += ld(x[i]) * lab[i], xx += ld(x[i]) * ld(x[i]), ll += lab[i] * lab[i];
    dot = block_sum(dot);
    xx = block_sum(xx);
    ll = block_sum(ll);
    const double den = fmax(sqrt(xx) * sqrt(ll), static_cast<double>(d.epsilon));
    total = 1.0 - dot / den;
    for (size_t i = threadIdx.x; i < per; i += blockDim.x)
      g[i] = st<T>(static_cast<float>(gs * -(lab[i] / den - (xx > 0 ? dot * ld(x[i]) / (xx * den) : 0.0))));
  } else {
    for (size_t i = threadIdx.x; i < per; i += blockDim.x) {
      double dg;
      total += math::loss_element(d, ld(x[i]), math::smoothed(d, lab[i], c), &dg);
      g[i] = st<T>(static_cast<float>(gs * dg));
    }
    total = block_sum(total);
  }
  if (threadIdx.x == 0) losses[blockIdx.x] = static_cast<float>(w * total);
}

// One pixel per image (a classifier's scores): a warp per image, a lane per channel, the
// same terms summed across the warp.
template <class T>
__global__ void row_loss_kernel(LossDescriptor d, double scale, const float* loss_scale, const T* xs, const float* labels, const float* weights,
                                T* grads, float* losses, int n, int c) {
  const int img = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x & 31;
  if (img >= n) return;  // the whole warp
  const size_t off = static_cast<size_t>(img) * c;
  const T* x = xs + off;
  const float* lab = labels + off;
  const double w = static_cast<double>(d.weight) * weights[img];
  const double gs = w * scale * (loss_scale ? *loss_scale : 1.f);
  double lse = 0, lsum = 0;
  if (d.type == LossType::SoftMaxCrossEntropy) {
    double mx = -INFINITY, z = 0;
    for (int ch = lane; ch < c; ch += 32) mx = fmax(mx, static_cast<double>(ld(x[ch])));
    for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    for (int ch = lane; ch < c; ch += 32) z += exp(ld(x[ch]) - mx), lsum += math::smoothed(d, lab[ch], c);
    lse = mx + log(warp_sum(z));
    lsum = warp_sum(lsum);
  }
  double total = 0;
  for (int ch = lane; ch < c; ch += 32)
    total += math::channel_term(d, ld(x[ch]), math::smoothed(d, lab[ch], c), lse, lsum, gs, grads + off + ch);
  total = warp_sum(total);
  if (lane == 0) losses[img] = static_cast<float>(w * total);
}

}  // namespace

template <class T>
void loss(cudaStream_t s, const LossDescriptor& d, double scale, const float* loss_scale, const T* x, const float* labels, const float* weights,
          T* gradient, float* losses, int n, int c, int hw) {
  if (over_channels(d.type) && hw == 1)
    row_loss_kernel<<<(n * 32 + kLossThreads - 1) / kLossThreads, kLossThreads, 0, s>>>(
        d, scale, loss_scale, x, labels, weights, gradient, losses, n, c);
  else
    loss_kernel<<<n, kLossThreads, 0, s>>>(d, scale, loss_scale, x, labels, weights, gradient, losses, c, hw);
  check_launch("loss");
}

#define INSTANTIATE(T)                                                                                          \
  template void loss(cudaStream_t, const LossDescriptor&, double, const float*, const T*, const float*, const float*, T*, float*, \
                     int, int, int);
NNGRAPH_STORAGE_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace nngraph::cuda
