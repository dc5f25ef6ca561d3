// Softmax on cuda: our kernels (shaders/cuda/softmax.cu).
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/softmax.h"

namespace nngraph {
namespace {

void softmax(Backend& backend, bool log, const Tensor& in, const Tensor& out) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const auto& s = in.shape();
  cuda::with_storage(in.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::softmax(b.stream(), log, in.data_as<const T>(), out.data_as<T>(), in.batch(), s.c, s.h * s.w);
  });
}

void softmax_gradient(Backend& backend, bool log, const Tensor& y, const Tensor& dy, const Tensor& dx) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const auto& s = y.shape();
  cuda::with_storage(y.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::softmax_gradient(b.stream(), log, y.data_as<const T>(), dy.data_as<const T>(), dx.data_as<T>(), y.batch(),
                           s.c, s.h * s.w);
  });
}

NNGRAPH_KERNEL(SoftMaxKernel, CUDA, softmax);
NNGRAPH_KERNEL(SoftMaxGradientKernel, CUDA, softmax_gradient);

}  // namespace
}  // namespace nngraph
