#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "ops/neuron.h"
#include "backends/math.h"

namespace nngraph {
namespace {

// The switch sits outside the loop so each case vectorizes.
template <class F>
void map(float* x, size_t count, const float* bias, const float* addend, F f) {
  const float b = bias ? *bias : 0.f;
  if (addend) {
    for (size_t i = 0; i < count; ++i) x[i] = f(x[i] + b + addend[i]);
  } else if (bias) {
    for (size_t i = 0; i < count; ++i) x[i] = f(x[i] + b);
  } else {
    for (size_t i = 0; i < count; ++i) x[i] = f(x[i]);
  }
}

}  // namespace

// One loop per neuron type, each with its formula inlined, so each vectorizes where it can.
void bias_neuron(float* x, size_t count, const float* bias, const NeuronDescriptor& nd, const float* addend) {
  const float a = nd.a, b = nd.b, c = nd.c;
  switch (nd.type) {
#define NNGRAPH_NEURON_LOOP(type, name, da, db, dc)                                            \
  case NeuronType::type:                                                                    \
    map(x, count, bias, addend, [a, b, c](float v) { return math::neurons::type::f(a, b, c, v); }); \
    break;
    NNGRAPH_NEURONS(NNGRAPH_NEURON_LOOP)
#undef NNGRAPH_NEURON_LOOP
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
