#pragma once
// What batch normalization's two-stage kernels (normalization.cu) and its kernels over rows
// held on chip (normalization_resident.cu) share: the per-channel coefficients in the batch
// state, the neuron's derivative the gradient takes dy through, and the second stage's sums.
#include <type_traits>

#include "common.cuh"
#include "ops/normalization.h"

namespace nngraph::cuda {

// f'(v), the derivative of the neuron the forward pass applied to its normalized v: from its
// output neuron(v) where it can be, else from v itself (GELU, swish).
template <class N, class D>
struct Through {
  N neuron;
  D derivative;
  bool from_output = true;
  Through() = default;
  explicit Through(const NeuronDescriptor& nd)
      : neuron{nd}, derivative{nd}, from_output(math::derivative_from_output(nd)) {}
  static constexpr bool kNone = std::is_same_v<D, NoDerivative>;
  // Worth storing g for the input gradient rather than evaluating it again (ReLU's is a compare).
  static constexpr bool kCostly = !kNone && !std::is_same_v<D, ReLUDerivative>;
  __device__ float operator()(float v) const { return derivative(from_output ? neuron(v) : v); }
};
// GELU's derivative is of its input, the normalized v itself.
struct GELUThrough : GELUDerivative {
  static constexpr bool kNone = false, kCostly = true;
};
template <class F>
void with_through(const NeuronDescriptor& nd, F&& f) {
  with_functor<Through<NoNeuron, NoDerivative>, Through<ReLUNeuron, ReLUDerivative>, GELUThrough,
               Through<AnyNeuron, AnyDerivative>>(nd, f);
}

// Where the passes' per-channel coefficients lie in the batch state (after what every backend
// keeps there): y = x·scale + shift; dx = scale·passed + slope·(x − mean) + offset.
enum Coefficient { kScale = 5, kShift, kSlope, kOffset };
static_assert(kOffset < kBatchNormStatistics, "the batch state holds every coefficient");

// Stage 2: channel ch's two sums over the chunks, in double, by the whole block (one thread
// per channel waited on a thousand loads in a row).
__device__ inline double2 channel_totals(const float* partial, int chunks, int c, int ch) {
  double a = 0, b = 0;
  for (int k = threadIdx.x; k < chunks; k += blockDim.x) {
    a += partial[2 * (static_cast<size_t>(k) * c + ch)];
    b += partial[2 * (static_cast<size_t>(k) * c + ch) + 1];
  }
  a = block_sum(a);
  return {a, block_sum(b)};
}

// Stage 2, forward, by a whole block: channel ch's mean, 1/sqrt(var + eps) and var from the
// sums of x − shift (shift: the channel's first value) and their squares, and its scale and shift.
template <class T>
__device__ void channel_moments(const T* x, const float* partial, int chunks, int c, int hw, double count,
                                float epsilon, const float* gamma, const float* beta, float* stats, int ch) {
  const double2 t = channel_totals(partial, chunks, c, ch);
  if (threadIdx.x != 0) return;
  const double a = t.x, b = t.y;
  const double d = a / count;  // mean − shift
  const double var = fmax(b / count - d * d, 0.0);
  const float mean = static_cast<float>(ld(x[static_cast<size_t>(ch) * hw]) + d);
  const float inv = static_cast<float>(1.0 / sqrt(var + epsilon));
  stats[ch] = mean;
  stats[c + ch] = inv;
  stats[2 * c + ch] = static_cast<float>(var);
  const float scale = gamma[ch] * inv;
  stats[kScale * c + ch] = scale;
  stats[kShift * c + ch] = beta[ch] - mean * scale;
}

// Stage 2, backward, by a whole block: dgamma = Σdy·(x − mean)·inv, dbeta = Σdy, and the input
// gradient's coefficients (input_gradient_kernel's formula, M = 1/inv_count).
__device__ inline void channel_gradient(const float* partial, int chunks, int c, float* stats, float* dgamma,
                                        float* dbeta, float inv_count, int ch) {
  const double2 t = channel_totals(partial, chunks, c, ch);
  if (threadIdx.x != 0) return;
  const float db = static_cast<float>(t.x), dg = static_cast<float>(t.y * stats[c + ch]);
  dbeta[ch] = db;
  dgamma[ch] = dg;
  const float scale = stats[kScale * c + ch];
  stats[kSlope * c + ch] = -scale * stats[c + ch] * dg * inv_count;
  stats[kOffset * c + ch] = -scale * db * inv_count;
}

// Training passes over rows of c channels held on chip (normalization_resident.cu), where the
// rows fit a co-resident grid at most resident_chunks_bound() chunks tall (partial: 2·c floats a
// chunk): batch_norm_forward's and batch_norm_gradient's work in one launch. False, having done
// nothing, where they do not fit.
inline int resident_chunks_bound() { return 2 * multiprocessors(); }
template <class T, class F>
bool resident_forward(cudaStream_t s, const T* x, const float* gamma, const float* beta, float* stats, float* partial,
                      float epsilon, const T* addend, const F& neuron, T* y, int y_ld, int n, int c);
template <class T, class P>
bool resident_gradient(cudaStream_t s, const T* x, const T* dy, float* stats, const P& through, float* partial, T* dx,
                       float* dgamma, float* dbeta, int dy_ld, int dx_ld, int n, int c);

}  // namespace nngraph::cuda
