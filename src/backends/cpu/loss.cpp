// Loss values and their gradient, one image per task; sums in double.
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend.h"

namespace nngraph {
namespace {

// Elementwise losses: value and d/dx for prediction x and (smoothed) label l.
struct Elementwise {
  const LossDescriptor& d;
  double value(double x, double l, double* grad) const {
    const double e = d.epsilon;
    switch (d.type) {
      case LossType::SigmoidCrossEntropy:
        *grad = 1.0 / (1.0 + std::exp(-x)) - l;
        return std::max(x, 0.0) - x * l + std::log1p(std::exp(-std::fabs(x)));
      case LossType::MeanSquaredError:
        *grad = 2.0 * (x - l);
        return (x - l) * (x - l);
      case LossType::MeanAbsoluteError:
        *grad = x > l ? 1.0 : (x < l ? -1.0 : 0.0);
        return std::fabs(x - l);
      case LossType::Huber: {
        const double r = x - l, a = std::fabs(r);
        if (a <= d.delta) {
          *grad = r;
          return 0.5 * r * r;
        }
        *grad = r > 0 ? d.delta : -d.delta;
        return d.delta * (a - 0.5 * d.delta);
      }
      case LossType::Hinge: {
        const double m = 1.0 - l * x;
        *grad = m > 0 ? -l : 0.0;
        return std::max(m, 0.0);
      }
      case LossType::Log:
        *grad = -(l / (x + e) - (1.0 - l) / (1.0 - x + e));
        return -(l * std::log(x + e) + (1.0 - l) * std::log(1.0 - x + e));
      default: *grad = 0; return 0;
    }
  }
};

}  // namespace

void CpuBackend::loss(const LossDescriptor& d, double scale, const Image& xi, const Image& li, const Image& wi,
                      const Image& gi, const Image& lossi) {
  const int c = xi.shape().c;
  const size_t hw = static_cast<size_t>(xi.shape().h) * xi.shape().w, per = c * hw;
  const double smooth = d.label_smoothing;
  const double smooth_to = d.type == LossType::SigmoidCrossEntropy ? 0.5 : 1.0 / c;
  pool_.parallel_for(static_cast<size_t>(xi.batch()), [&](size_t b, size_t e) {
    for (size_t n = b; n < e; ++n) {
      const float* x = xi.data_as<float>() + n * per;
      const float* lab = li.data_as<float>() + n * per;
      float* g = gi.data_as<float>() + n * per;
      const double w = static_cast<double>(d.weight) * wi.data_as<float>()[n];
      const double gs = w * scale;
      auto label = [&](size_t i) { return smooth > 0 ? lab[i] * (1 - smooth) + smooth * smooth_to : lab[i]; };
      double total = 0;
      switch (d.type) {
        case LossType::SoftMaxCrossEntropy:
        case LossType::CategoricalCrossEntropy:
        case LossType::KullbackLeiblerDivergence:
          for (size_t p = 0; p < hw; ++p) {
            if (d.type == LossType::SoftMaxCrossEntropy) {
              double mx = -INFINITY, z = 0, lsum = 0;
              for (int ch = 0; ch < c; ++ch) mx = std::max(mx, static_cast<double>(x[ch * hw + p]));
              for (int ch = 0; ch < c; ++ch) z += std::exp(x[ch * hw + p] - mx);
              const double lse = mx + std::log(z);
              for (int ch = 0; ch < c; ++ch) lsum += label(ch * hw + p);
              for (int ch = 0; ch < c; ++ch) {
                const size_t i = ch * hw + p;
                total -= label(i) * (x[i] - lse);
                g[i] = static_cast<float>(gs * (std::exp(x[i] - lse) * lsum - label(i)));
              }
            } else {
              for (int ch = 0; ch < c; ++ch) {
                const size_t i = ch * hw + p;
                const double q = std::max(static_cast<double>(x[i]), static_cast<double>(d.epsilon)), l = label(i);
                if (d.type == LossType::CategoricalCrossEntropy)
                  total -= l * std::log(q);
                else if (l > 0)
                  total += l * (std::log(l) - std::log(q));
                g[i] = static_cast<float>(gs * -l / q);
              }
            }
          }
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
        default: {
          const Elementwise f{d};
          for (size_t i = 0; i < per; ++i) {
            double dg;
            total += f.value(x[i], label(i), &dg);
            g[i] = static_cast<float>(gs * dg);
          }
        }
      }
      lossi.data_as<float>()[n] = static_cast<float>(w * total);
    }
  });
}

}  // namespace nngraph
