// Losses: one block per image (a thread per image for classifier scores); the terms come
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

__global__ void loss_kernel(LossDescriptor d, double scale, const float* xs, const float* labels, const float* weights,
                            float* grads, float* losses, int c, int hw) {
  const size_t per = static_cast<size_t>(c) * hw;
  const size_t off = blockIdx.x * per;
  const float* x = xs + off;
  const float* lab = labels + off;
  float* g = grads + off;
  const double w = static_cast<double>(d.weight) * weights[blockIdx.x];
  const double gs = w * scale;
  double total = 0;
  if (over_channels(d.type)) {
    for (int p = threadIdx.x; p < hw; p += blockDim.x) total += math::loss_channels(d, x + p, lab + p, hw, c, gs, g + p);
    total = block_sum(total);
  } else if (d.type == LossType::CosineDistance) {
    double dot = 0, xx = 0, ll = 0;
    for (size_t i = threadIdx.x; i < per; i += blockDim.x) dot += x[i] * lab[i], xx += x[i] * x[i], ll += lab[i] * lab[i];
    dot = block_sum(dot);
    xx = block_sum(xx);
    ll = block_sum(ll);
    const double den = fmax(sqrt(xx) * sqrt(ll), static_cast<double>(d.epsilon));
    total = 1.0 - dot / den;
    for (size_t i = threadIdx.x; i < per; i += blockDim.x)
      g[i] = static_cast<float>(gs * -(lab[i] / den - (xx > 0 ? dot * x[i] / (xx * den) : 0.0)));
  } else {
    for (size_t i = threadIdx.x; i < per; i += blockDim.x) {
      double dg;
      total += math::loss_element(d, x[i], math::smoothed(d, lab[i], c), &dg);
      g[i] = static_cast<float>(gs * dg);
    }
    total = block_sum(total);
  }
  if (threadIdx.x == 0) losses[blockIdx.x] = static_cast<float>(w * total);
}

// One pixel per image (a classifier's scores): a thread per image, same terms, no block sums.
__global__ void row_loss_kernel(LossDescriptor d, double scale, const float* xs, const float* labels,
                                const float* weights, float* grads, float* losses, int n, int c) {
  const int img = blockIdx.x * blockDim.x + threadIdx.x;
  if (img >= n) return;
  const size_t off = static_cast<size_t>(img) * c;
  const double w = static_cast<double>(d.weight) * weights[img];
  losses[img] = static_cast<float>(w * math::loss_channels(d, xs + off, labels + off, 1, c, w * scale, grads + off));
}

}  // namespace

void loss(cudaStream_t s, const LossDescriptor& d, double scale, const float* x, const float* labels,
          const float* weights, float* gradient, float* losses, int n, int c, int hw) {
  if (over_channels(d.type) && hw == 1)
    row_loss_kernel<<<(n + kLossThreads - 1) / kLossThreads, kLossThreads, 0, s>>>(d, scale, x, labels, weights,
                                                                                   gradient, losses, n, c);
  else
    loss_kernel<<<n, kLossThreads, 0, s>>>(d, scale, x, labels, weights, gradient, losses, c, hw);
  check_launch("loss");
}

}  // namespace nngraph::cuda
