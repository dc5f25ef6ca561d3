#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "ops/neuron.h"
#include "backends/math.h"

namespace nngraph {
namespace {

// The switch sits outside the loop so each case vectorizes.
template <class F>
void map(float* x, size_t count, const float* bias, F f) {
  if (bias) {
    const float b = *bias;
    for (size_t i = 0; i < count; ++i) x[i] = f(x[i] + b);
  } else {
    for (size_t i = 0; i < count; ++i) x[i] = f(x[i]);
  }
}

}  // namespace

void bias_neuron(float* x, size_t count, const float* bias, const NeuronDescriptor& nd) {
  const float a = nd.a, b = nd.b;
  switch (nd.type) {
    case NeuronType::None: map(x, count, bias, [](float v) { return v; }); break;
    case NeuronType::ReLU: map(x, count, bias, [](float v) { return math::relu(v); }); break;
    case NeuronType::LeakyReLU: map(x, count, bias, [a](float v) { return math::leaky_relu(a, v); }); break;
    case NeuronType::Linear: map(x, count, bias, [a, b](float v) { return math::linear(a, b, v); }); break;
    case NeuronType::HardSigmoid: map(x, count, bias, [a, b](float v) { return math::hard_sigmoid(a, b, v); }); break;
    default: map(x, count, bias, [&nd](float v) { return math::neuron(nd, v); }); break;
  }
}

namespace {

void neuron(Backend& backend, const NeuronDescriptor& nd, const Tensor& in, const Tensor& out) {
  const float* src = in.data_as<float>();
  float* dst = out.data_as<float>();
  pool_of(backend).parallel_for(in.count(), [&](size_t b, size_t e) {
    if (dst != src) std::copy(src + b, src + e, dst + b);
    bias_neuron(dst + b, e - b, nullptr, nd);
  });
}

}  // namespace

void neuron_derivative(const float* dy, const float* v, float* dz, size_t count, const NeuronDescriptor& nd) {
  switch (nd.type) {
    case NeuronType::None: std::copy(dy, dy + count, dz); break;
    case NeuronType::ReLU:
      for (size_t i = 0; i < count; ++i) dz[i] = v[i] > 0.f ? dy[i] : 0.f;
      break;
    default:
      for (size_t i = 0; i < count; ++i) dz[i] = dy[i] * math::neuron_derivative(nd, v[i]);
      break;
  }
}

namespace {

void neuron_gradient(Backend& backend, const NeuronDescriptor& nd, const Tensor& v, const Tensor& dy, const Tensor& dx) {
  const float* g = dy.data_as<float>();
  const float* val = v.data_as<float>();
  float* out = dx.data_as<float>();
  pool_of(backend).parallel_for(dy.count(), [&](size_t b, size_t e) {
    neuron_derivative(g + b, val + b, out + b, e - b, nd);
  });
}

NNGRAPH_KERNEL(NeuronKernel, CPU, neuron);
NNGRAPH_KERNEL(NeuronGradientKernel, CPU, neuron_gradient);

}  // namespace
}  // namespace nngraph
