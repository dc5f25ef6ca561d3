// Loss values and their gradient, one image per task; the terms come from backends/math.h.
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "ops/loss.h"
#include "backends/math.h"

namespace nngraph {
namespace {

void loss(Backend& backend, const LossDescriptor& d, double scale, const float* loss_scale, const Tensor& xi, const Tensor& li, const Tensor& wi,
                      const Tensor& gi, const Tensor& lossi) {
  const int c = xi.shape().c;
  const size_t hw = static_cast<size_t>(xi.shape().h) * xi.shape().w, per = c * hw;
  pool_of(backend).parallel_for(static_cast<size_t>(xi.batch()), [&](size_t b, size_t e) {
    for (size_t n = b; n < e; ++n) {
      const float* x = xi.data_as<float>() + n * per;
      const float* lab = li.data_as<float>() + n * per;
      float* g = gi.data_as<float>() + n * per;
      const double w = static_cast<double>(d.weight) * wi.data_as<float>()[n];
      const double gs = w * scale * (loss_scale ? *loss_scale : 1.f);
      double total = 0;
      switch (d.type) {
        case LossType::SoftMaxCrossEntropy:
        case LossType::CategoricalCrossEntropy:
        case LossType::KullbackLeiblerDivergence:
          for (size_t p = 0; p < hw; ++p) total += math::loss_channels(d, x + p, lab + p, hw, c, gs, g + p);
          break;
        case LossType::CosineDistance: {
          double dot = 0, xx = 0, ll = 0;
          for (size_t i = 0; i < per; ++i) dot += x[i] * lab[i], xx += x[i] * x[i], ll += lab[i] * lab[i];
          const double nx = std::sqrt(xx), nl = std::sqrt(ll), den = std::max(nx * nl, static_cast<double>(d.epsilon));
          total = 1.0 - dot / den;
          for (size_t i = 0; i < per; ++i)
            g[i] = static_cast<float>(gs * -(lab[i] / den - (xx > 0 ? dot * x[i] / (xx * den) : 0.0)));
          break;
        }
        default:
          for (size_t i = 0; i < per; ++i) {
            double dg;
            total += math::loss_element(d, x[i], math::smoothed(d, lab[i], c), &dg);
            g[i] = static_cast<float>(gs * dg);
          }
      }
      lossi.data_as<float>()[n] = static_cast<float>(w * total);
    }
  });
}

NNGRAPH_KERNEL(LossKernel, CPU, loss);

}  // namespace
}  // namespace nngraph
