#pragma once
// The epilogues the cuda convolutions and products share: bias and neuron applied to a result
// in place, and the output gradient through the neuron with the bias gradient.
#include <memory>

#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"

namespace nngraph {

// dz = dy ⊙ neuron'(y) (dy itself without y or a neuron), stored where dz is given (only with
// y and a neuron), and where db is the bias gradient Σ dz per channel, in one pass over dy (a
// channels-last dy as rows of pixels).
template <class T>
void derivative_and_bias(CudaBackend& b, const Tensor& dy_image, const Tensor& y, const NeuronDescriptor& neuron,
                         T* dz, float* db) {
  const Tensor dy = dy_image.pixels();
  const int n = dy.batch(), c = dy.shape().c, hw = dy.shape().h * dy.shape().w;
  const T* yv = y && neuron.type != NeuronType::None ? y.dense_as<const T>() : nullptr;
  if (db) {
    auto partial = b.allocate(static_cast<size_t>(c) * cuda::bias_gradient_chunks(n, c, hw) * sizeof(float));
    cuda::bias_gradient(b.stream(), dy.data_as<const T>(), yv, dz, neuron, db, n, c, hw,
                        static_cast<float*>(partial->data()));
  } else if (dz) {
    cuda::neuron_gradient(b.stream(), yv, dy.data_as<const T>(), dz, dy.count(), neuron);
  }
}

// dz in a scratch buffer (dy itself when there is no neuron), and db where given.
template <class T>
const T* output_gradient(CudaBackend& b, const Tensor& dy, const Tensor& y, const NeuronDescriptor& neuron, float* db,
                         std::shared_ptr<Buffer>* scratch) {
  T* dz = nullptr;
  if (y && neuron.type != NeuronType::None) {
    *scratch = b.allocate(dy.bytes());
    dz = static_cast<T*>((*scratch)->data());
  }
  derivative_and_bias(b, dy, y, neuron, dz, db);
  return dz ? dz : dy.dense_as<const T>();
}

// out = neuron(out + bias) in place, in either layout (a bias per channel of its pixels).
template <class T>
void add_bias_neuron(CudaBackend& b, const Tensor& out, const float* bias, const NeuronDescriptor& neuron) {
  const Tensor y = out.pixels();
  cuda::bias_neuron(b.stream(), y.data_as<T>(), y.count(), y.shape().c, y.shape().h * y.shape().w, bias, neuron);
}

}  // namespace nngraph
