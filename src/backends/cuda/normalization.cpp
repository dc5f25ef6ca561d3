// Batch normalization on cuda: our kernels in shaders/cuda/normalization.cu, which fold a
// following neuron into the normalizing pass.
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/normalization.h"

namespace nngraph {
namespace {

struct Planes {
  int n, c, hw;
  explicit Planes(const Tensor& x) : n(x.batch()), c(x.shape().c), hw(x.shape().h * x.shape().w) {}
  // An operand's values and the distance between its rows: rows of pixels (hw 1) may lie
  // further apart than c (a view of a concatenation's part); planes are dense.
  template <class T>
  std::pair<T*, int> rows_of(const Tensor& t) const {
    if (hw == 1) return {t.rows_as<T>(), static_cast<int>(t.strides()[0])};
    return {t.data_as<T>(), c};
  }
  std::shared_ptr<Buffer> partial(CudaBackend& b) const {
    return b.allocate(sizeof(float) * cuda::batch_norm_partial_floats(n, c, hw));
  }
};

void batch_normalization(Backend& backend, float epsilon, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& mean, const Tensor& variance, const Tensor& batch, bool replay,
                         const Tensor& addend, const NeuronDescriptor& neuron, const Tensor& y) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const Planes p(x);
  const auto partial = batch && !replay ? p.partial(b) : nullptr;  // none: the statistics are there
  cuda::with_storage(x.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::batch_norm_forward(b.stream(), x.data_as<const T>(), gamma.data_as<const float>(),
                             beta.data_as<const float>(), mean.data_as<const float>(),
                             variance.data_as<const float>(), batch ? batch.data_as<float>() : nullptr,
                             partial ? static_cast<float*>(partial->data()) : nullptr, epsilon,
                             addend ? addend.data_as<const T>() : nullptr, neuron, p.rows_of<T>(y).first,
                             p.rows_of<T>(y).second, p.n, p.c, p.hw);
  });
}

void batch_normalization_gradient(Backend& backend, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                  const Tensor& beta, const Tensor& batch, const NeuronDescriptor& neuron,
                                  const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const Planes p(x);
  const auto partial = p.partial(b);
  float* stats = batch.data_as<float>();
  cuda::with_storage(x.dtype(), [&](auto z) {
    using T = decltype(z);
    const auto [dy_values, dy_ld] = p.rows_of<const T>(dy);
    const auto [dx_values, dx_ld] = dx ? p.rows_of<T>(dx) : std::pair<T*, int>{nullptr, p.c};
    cuda::batch_norm_gradient(b.stream(), x.data_as<const T>(), dy_values, gamma.data_as<const float>(),
                              beta.data_as<const float>(), stats, neuron, static_cast<float*>(partial->data()),
                              dx_values, dgamma ? dgamma.data_as<float>() : stats + 3 * p.c,
                              dbeta ? dbeta.data_as<float>() : stats + 4 * p.c, dy_ld, dx_ld, p.n, p.c, p.hw);
  });
}

void batch_normalization_statistics(Backend& backend, const std::vector<RunningStatistics>& nodes) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  std::vector<cuda::StatisticsMove> moves;
  for (const RunningStatistics& n : nodes)
    moves.push_back({n.batch.data_as<const float>(), n.mean.data_as<float>(), n.variance.data_as<float>(),
                     static_cast<int>(n.mean.count()), n.momentum, n.unbias});
  cuda::batch_norm_statistics(b.stream(), moves.data(), moves.size());
}

void batch_normalization_fold(Backend& backend, float epsilon, const Tensor& weights, const Tensor& bias,
                              const Tensor& gamma, const Tensor& beta, const Tensor& mean, const Tensor& variance,
                              const Tensor& folded_weights, const Tensor& folded_bias) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::batch_norm_fold(b.stream(), epsilon, weights.data_as<const float>(), bias ? bias.data_as<const float>() : nullptr,
                        gamma.data_as<const float>(), beta.data_as<const float>(), mean.data_as<const float>(),
                        variance.data_as<const float>(), folded_weights.data_as<float>(), folded_bias.data_as<float>(),
                        static_cast<int>(gamma.count()), weights.count() / gamma.count());
}

NNGRAPH_KERNEL(BatchNormalizationKernel, CUDA, batch_normalization);
NNGRAPH_KERNEL(BatchNormalizationFoldKernel, CUDA, batch_normalization_fold);
NNGRAPH_KERNEL(BatchNormalizationGradientKernel, CUDA, batch_normalization_gradient);
NNGRAPH_KERNEL(BatchNormalizationStatisticsKernel, CUDA, batch_normalization_statistics);

}  // namespace
}  // namespace nngraph
