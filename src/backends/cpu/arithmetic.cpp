// Arithmetic of two images with broadcasting (the formulas are backends/math.h's), and sums
// of several.
#include <algorithm>

#include "backends/cpu/cpu_backend.h"
#include "backends/math.h"
#include "ops/arithmetic.h"

namespace nngraph {
namespace {

math::Broadcast broadcast(const Tensor& t) {
  return math::Broadcast(t.batch(), t.shape().c, t.shape().h, t.shape().w);
}

void arithmetic(Backend& backend, ArithmeticOp op, const Tensor& a, const Tensor& b, const NeuronDescriptor& neuron,
                const Tensor& through, const Tensor& out) {
  const float* x = a.data_as<const float>();
  const float* y = b.data_as<const float>();
  const float* v = through ? through.data_as<const float>() : nullptr;
  float* z = out.data_as<float>();
  // z[0, n) at `at`: its neuron, or the neuron's derivative at v times it.
  auto finish = [&](float* zs, size_t at, size_t n) {
    if (v)
      neuron_derivative(zs, v + at, zs, n, neuron);
    else if (neuron.type != NeuronType::None)
      bias_neuron(zs, n, nullptr, neuron);
  };
  if (a.count() == out.count() && b.count() == out.count()) {
    pool_of(backend).parallel_for(out.count(), [&](size_t s, size_t e) {
      for (size_t i = s; i < e; ++i) z[i] = math::arithmetic(op, x[i], y[i]);
      finish(z + s, s, e - s);
    });
    return;
  }
  const math::Broadcast ba = broadcast(a), bb = broadcast(b);
  const ImageShape& o = out.shape();
  pool_of(backend).parallel_for(static_cast<size_t>(out.batch()) * o.c, [&](size_t s, size_t e) {
    for (size_t plane = s; plane < e; ++plane) {
      const int n = static_cast<int>(plane / o.c), c = static_cast<int>(plane % o.c);
      float* zp = z + plane * o.h * o.w;
      for (int h = 0; h < o.h; ++h)
        for (int w = 0; w < o.w; ++w)
          zp[h * o.w + w] = math::arithmetic(op, x[ba.at(n, c, h, w)], y[bb.at(n, c, h, w)]);
      finish(zp, plane * o.h * o.w, static_cast<size_t>(o.h) * o.w);
    }
  });
}

// Each dx element sums dy ⊙ ∂ over the result positions that read it.
void arithmetic_gradient(Backend& backend, ArithmeticOp op, int operand, const Tensor& a, const Tensor& b,
                         const Tensor& dy, const Tensor& dx) {
  const float* x = a.data_as<const float>();
  const float* y = b.data_as<const float>();
  const float* g = dy.data_as<const float>();
  float* out = dx.data_as<float>();
  const math::Broadcast ba = broadcast(a), bb = broadcast(b);
  const ImageShape& o = dy.shape();
  const ImageShape& d = dx.shape();
  const int dn = dx.batch(), on = dy.batch();
  // Along an axis the operand broadcasts, every result index; else the operand's own.
  auto range = [](int own, int extent, int index) { return own == 1 && extent > 1 ? std::pair{0, extent} : std::pair{index, index + 1}; };
  pool_of(backend).parallel_for(dx.count(), [&](size_t s, size_t e) {
    for (size_t i = s; i < e; ++i) {
      const int w0 = static_cast<int>(i % d.w), h0 = static_cast<int>(i / d.w % d.h);
      const int c0 = static_cast<int>(i / (static_cast<size_t>(d.w) * d.h) % d.c);
      const int n0 = static_cast<int>(i / d.count());
      const auto [na, nb] = range(dn, on, n0);
      const auto [ca, cb] = range(d.c, o.c, c0);
      const auto [ha, hb] = range(d.h, o.h, h0);
      const auto [wa, wb] = range(d.w, o.w, w0);
      double sum = 0;
      for (int n = na; n < nb; ++n)
        for (int c = ca; c < cb; ++c)
          for (int h = ha; h < hb; ++h)
            for (int w = wa; w < wb; ++w) {
              const size_t j = ((static_cast<size_t>(n) * o.c + c) * o.h + h) * o.w + w;
              sum += g[j] * math::arithmetic_partial(op, operand, x[ba.at(n, c, h, w)], y[bb.at(n, c, h, w)]);
            }
      out[i] = static_cast<float>(sum);
    }
  });
}

// y = Σ sources (· f'(through)), a block of values at a time so that y's block stays in cache
// while each source is added.
void sum(Backend& backend, const std::vector<Tensor>& sources, const NeuronDescriptor& neuron, const Tensor& through,
         const Tensor& out) {
  std::vector<const float*> in;
  for (const Tensor& t : sources) in.push_back(t.data_as<const float>());
  const float* v = through ? through.data_as<const float>() : nullptr;
  float* y = out.data_as<float>();
  constexpr size_t kBlock = 2048;
  pool_of(backend).parallel_for(out.count(), [&](size_t s, size_t e) {
    for (size_t b = s; b < e; b += kBlock) {
      const size_t end = std::min(e, b + kBlock);
      for (size_t i = b; i < end; ++i) y[i] = in[0][i] + in[1][i];
      for (size_t k = 2; k < in.size(); ++k)
        for (size_t i = b; i < end; ++i) y[i] += in[k][i];
      if (v) neuron_derivative(y + b, v + b, y + b, end - b, neuron);
    }
  });
}

NNGRAPH_KERNEL(ArithmeticKernel, CPU, arithmetic);
NNGRAPH_KERNEL(ArithmeticGradientKernel, CPU, arithmetic_gradient);
NNGRAPH_KERNEL(SumKernel, CPU, sum);

}  // namespace
}  // namespace nngraph
