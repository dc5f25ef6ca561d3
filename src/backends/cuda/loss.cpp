// Losses on cuda: our kernels (shaders/cuda/loss.cu).
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/loss.h"

namespace nngraph {
namespace {

void loss(Backend& backend, const LossDescriptor& d, double scale, const float* loss_scale, const Tensor& x, const Tensor& labels,
          const Tensor& weights, const Tensor& gradient, const Tensor& losses) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const auto& s = x.shape();
  cuda::with_storage(x.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::loss(b.stream(), d, scale, loss_scale, x.data_as<const T>(), labels.data_as<const float>(),
               weights.data_as<const float>(), gradient.data_as<T>(), losses.data_as<float>(), x.batch(), s.c,
               s.h * s.w);
  });
}

NNGRAPH_KERNEL(LossKernel, CUDA, loss);

}  // namespace
}  // namespace nngraph
