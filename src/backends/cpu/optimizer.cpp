// Optimizer updates: one loop per kind in float, with loop-invariant choices hoisted, so each
// loop vectorizes (the update is memory-bound over every parameter every step).
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend.h"

namespace nngraph {
namespace {

// The gradient after rescale, clipping and regularization.
struct Preprocess {
  float rescale, lo, hi, l1, l2;
  explicit Preprocess(const OptimizerDescriptor& d)
      : rescale(d.gradient_rescale),
        lo(d.apply_gradient_clipping ? d.gradient_clip_min : -INFINITY),
        hi(d.apply_gradient_clipping ? d.gradient_clip_max : INFINITY),
        l1(d.regularization == Regularization::L1 ? d.regularization_scale : 0.f),
        l2(d.regularization == Regularization::L2 ? d.regularization_scale : 0.f) {}
  float operator()(float g, float w) const {
    g = std::min(std::max(g * rescale, lo), hi);
    return g + l2 * w + l1 * static_cast<float>((w > 0.f) - (w < 0.f));
  }
};

}  // namespace

void CpuBackend::optimizer_step(const OptimizerStep& s, float* w_, const float* gradient_,
                                const std::vector<float*>& slots, size_t count) {
  float* __restrict w = w_;
  const float* __restrict gradient = gradient_;
  const Preprocess pre(s.d);
  const float lr = s.d.learning_rate;
  pool_.parallel_for(count, [&](size_t b, size_t e) {
    switch (s.kind) {
      case OptimizerKind::SGD:
        if (s.momentum <= 0.f) {
          for (size_t i = b; i < e; ++i) w[i] -= lr * pre(gradient[i], w[i]);
        } else {
          float* __restrict v = slots[0];
          const float mu = s.momentum, nest = s.nesterov ? 1.f : 0.f;
          for (size_t i = b; i < e; ++i) {
            const float g = pre(gradient[i], w[i]);
            v[i] = mu * v[i] + g;
            w[i] -= lr * (nest * (g + mu * v[i]) + (1.f - nest) * v[i]);
          }
        }
        break;
      case OptimizerKind::Adam: {
        // lr·(m/c1)/(√(v/c2) + ε) = (lr/c1)·m/(√v·(1/√c2) + ε)
        const float c1 = 1.f - std::pow(s.beta1, static_cast<float>(s.step));
        const float c2 = 1.f - std::pow(s.beta2, static_cast<float>(s.step));
        const float step = lr / c1, inv_sqrt_c2 = 1.f / std::sqrt(c2);
        const float b1 = s.beta1, b2 = s.beta2, eps = s.epsilon;
        float* __restrict m = slots[0];
        float* __restrict v = slots[1];
        if (s.amsgrad) {
          float* __restrict vmax = slots[2];
          for (size_t i = b; i < e; ++i) {
            const float g = pre(gradient[i], w[i]);
            m[i] = b1 * m[i] + (1.f - b1) * g;
            v[i] = b2 * v[i] + (1.f - b2) * g * g;
            vmax[i] = std::max(vmax[i], v[i]);
            w[i] -= step * m[i] / (std::sqrt(vmax[i]) * inv_sqrt_c2 + eps);
          }
        } else {
          for (size_t i = b; i < e; ++i) {
            const float g = pre(gradient[i], w[i]);
            m[i] = b1 * m[i] + (1.f - b1) * g;
            v[i] = b2 * v[i] + (1.f - b2) * g * g;
            w[i] -= step * m[i] / (std::sqrt(v[i]) * inv_sqrt_c2 + eps);
          }
        }
        break;
      }
      case OptimizerKind::RMSProp: {
        float* __restrict sq = slots[0];
        const float rho = s.decay, eps = s.epsilon;
        for (size_t i = b; i < e; ++i) {
          const float g = pre(gradient[i], w[i]);
          sq[i] = rho * sq[i] + (1.f - rho) * g * g;
          w[i] -= lr * g / (std::sqrt(sq[i]) + eps);
        }
        break;
      }
    }
  });
}

}  // namespace nngraph
