// Neurons on cuda: our elementwise kernels (shaders/cuda/elementwise.cu).
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/neuron.h"

namespace nngraph {
namespace {

void neuron(Backend& backend, const NeuronDescriptor& nd, const Tensor& in, const Tensor& out) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::with_storage(in.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::neuron(b.stream(), in.data_as<const T>(), out.data_as<T>(), in.count(), nd);
  });
}

void neuron_gradient(Backend& backend, const NeuronDescriptor& nd, const Tensor& v, const Tensor& dy, const Tensor& dx) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::with_storage(dy.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::neuron_gradient(b.stream(), v.data_as<const T>(), dy.data_as<const T>(), dx.data_as<T>(), dy.count(), nd);
  });
}

NNGRAPH_KERNEL(NeuronKernel, CUDA, neuron);
NNGRAPH_KERNEL(NeuronGradientKernel, CUDA, neuron_gradient);

}  // namespace
}  // namespace nngraph
