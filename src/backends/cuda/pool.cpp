// Pooling on cuda: our kernels (shaders/cuda/pool.cu).
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/pool.h"

namespace nngraph {
namespace {

void pooling(Backend& backend, PoolingMode mode, const PoolGeometry& g, const Tensor& in, const Tensor& out) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const auto& is = in.shape();
  cuda::with_storage(in.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::pooling(b.stream(), mode, g, in.data_as<const T>(), out.data_as<T>(), in.batch() * is.c, is.h, is.w,
                  out.shape().h, out.shape().w);
  });
}

void pooling_gradient(Backend& backend, PoolingMode mode, const PoolGeometry& g, const Tensor& x, const Tensor& dy,
                      const Tensor& dx, const NeuronDescriptor& neuron) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const auto& is = x.shape();
  cuda::with_storage(x.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::pooling_gradient(b.stream(), mode, g, x.data_as<const T>(), dy.data_as<const T>(), dx.data_as<T>(),
                           x.batch() * is.c, is.h, is.w, dy.shape().h, dy.shape().w, neuron);
  });
}

NNGRAPH_KERNEL(PoolingKernel, CUDA, pooling);
NNGRAPH_KERNEL(PoolingGradientKernel, CUDA, pooling_gradient);

}  // namespace
}  // namespace nngraph
