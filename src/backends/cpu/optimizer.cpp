#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend.h"

namespace nngraph {

void CpuBackend::optimizer_step(const OptimizerStep& s, float* w, const float* gradient,
                                const std::vector<float*>& slots, size_t count) {
  const auto& d = s.d;
  const float lr = d.learning_rate;
  const double c1 = 1.0 - std::pow(static_cast<double>(s.beta1), static_cast<double>(s.step));
  const double c2 = 1.0 - std::pow(static_cast<double>(s.beta2), static_cast<double>(s.step));
  pool_.parallel_for(count, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      float g = gradient[i] * d.gradient_rescale;
      if (d.apply_gradient_clipping) g = std::min(std::max(g, d.gradient_clip_min), d.gradient_clip_max);
      if (d.regularization == Regularization::L2) g += d.regularization_scale * w[i];
      if (d.regularization == Regularization::L1)
        g += d.regularization_scale * static_cast<float>((w[i] > 0) - (w[i] < 0));
      switch (s.kind) {
        case OptimizerKind::SGD:
          if (s.momentum > 0.f) {
            float& v = slots[0][i];
            v = s.momentum * v + g;
            w[i] -= lr * (s.nesterov ? g + s.momentum * v : v);
          } else {
            w[i] -= lr * g;
          }
          break;
        case OptimizerKind::Adam: {
          float& m = slots[0][i];
          float& v = slots[1][i];
          m = s.beta1 * m + (1.f - s.beta1) * g;
          v = s.beta2 * v + (1.f - s.beta2) * g * g;
          float vv = v;
          if (s.amsgrad) vv = slots[2][i] = std::max(slots[2][i], v);
          const double mh = m / c1, vh = vv / c2;
          w[i] -= static_cast<float>(lr * mh / (std::sqrt(vh) + s.epsilon));
          break;
        }
        case OptimizerKind::RMSProp: {
          float& sq = slots[0][i];
          sq = s.decay * sq + (1.f - s.decay) * g * g;
          w[i] -= lr * g / (std::sqrt(sq) + s.epsilon);
          break;
        }
      }
    }
  });
}

}  // namespace nngraph
