// Fully connected layers on cuda, products through cuBLAS (or our tensor-core kernels where
// quicker), and the bias and neuron epilogue as a node of its own.
#include <functional>
#include <memory>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/epilogue.h"
#include "kernels.cuh"
#include "ops/conv.h"

namespace nngraph {
namespace {

void fully_connected(Backend& backend, const Tensor& in, const Tensor& w, const Tensor& bs,
                     const NeuronDescriptor& neuron, const Tensor& out, bool tf32, bool half) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const float* bias = bs.data_as<const float>();
  const int n = in.batch(), k = static_cast<int>(in.shape().count()), o = out.shape().c;
  cuda::with_storage(in.dtype(), [&](auto z) {
    using T = decltype(z);
    b.gemm(in.dtype(), false, true, n, o, k, in.data_as<const T>(), k, w.data_as<const T>(), k, out.data_as<T>(), o,
           tf32, 1.f, 0.f, {}, half);
    add_bias_neuron<T>(b, out, bias, neuron);
  });
}

void fully_connected_gradient(Backend& backend, const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& y,
                              const NeuronDescriptor& neuron, const Tensor& dx, const Tensor& dwt, const Tensor& dbt,
                              bool tf32, bool half) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  float* db = dbt.data_as<float>();
  const int n = x.batch(), k = static_cast<int>(x.shape().count()), o = dy.shape().c;
  cuda::with_storage(dy.dtype(), [&](auto z) {
    using T = decltype(z);
    std::shared_ptr<Buffer> scratch;
    const T* dz = output_gradient<T>(b, dy, y, neuron, db, &scratch);
    const DType dt = dy.dtype();
    auto weight_gradient = [&] {
      b.gemm(dt, true, false, o, k, n, dz, o, x.data_as<const T>(), k, dwt.data_as<T>(), k, tf32, 1.f, 0.f, {}, half);
    };
    auto input_gradient = [&] {
      b.gemm(dt, false, false, n, k, o, dz, o, w.data_as<const T>(), k, dx.data_as<T>(), k, tf32, 1.f, 0.f, {}, half);
    };
    b.side_by_side(dx ? input_gradient : std::function<void()>(), dwt ? weight_gradient : std::function<void()>(),
                   static_cast<double>(n) * k * o, 0, 0);
  });
}

void bias_neuron(Backend& backend, const Tensor& bias, const NeuronDescriptor& neuron, const Tensor& y) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::with_storage(y.dtype(),
                     [&](auto z) { add_bias_neuron<decltype(z)>(b, y, bias.data_as<const float>(), neuron); });
}

void bias_neuron_gradient(Backend& backend, const Tensor& dy, const Tensor& y, const NeuronDescriptor& neuron,
                          const Tensor& dz, const Tensor& db) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::with_storage(dy.dtype(), [&](auto z) {
    using T = decltype(z);
    derivative_and_bias<T>(b, dy, y, neuron, dz.data_as<T>(), db.data_as<float>());
  });
}

NNGRAPH_KERNEL(BiasNeuronKernel, CUDA, bias_neuron);
NNGRAPH_KERNEL(BiasNeuronGradientKernel, CUDA, bias_neuron_gradient);
NNGRAPH_KERNEL(FullyConnectedKernel, CUDA, fully_connected);
NNGRAPH_KERNEL(FullyConnectedGradientKernel, CUDA, fully_connected_gradient);

}  // namespace
}  // namespace nngraph
