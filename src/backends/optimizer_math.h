#pragma once
// Per-parameter optimizer math shared by every backend (host and, under nvcc, device): the
// gradient's preprocessing, each optimizer's update, and float16 graphs' loss scaling.
#include "backends/math.h"
#include "nngraph/optimizer.h"

namespace nngraph::math {

// The gradient after rescale, clipping and regularization.
struct Preprocess {
  float rescale = 1.f, lo = -INFINITY, hi = INFINITY, l1 = 0.f, l2 = 0.f;
  Preprocess() = default;
  explicit Preprocess(const OptimizerDescriptor& d)
      : rescale(d.gradient_rescale),
        lo(d.apply_gradient_clipping ? d.gradient_clip_min : -INFINITY),
        hi(d.apply_gradient_clipping ? d.gradient_clip_max : INFINITY),
        l1(d.regularization == Regularization::L1 ? d.regularization_scale : 0.f),
        l2(d.regularization == Regularization::L2 ? d.regularization_scale : 0.f) {}
  NNGRAPH_HD float operator()(float g, float w) const {
    g *= rescale;
    g = g < lo ? lo : (g > hi ? hi : g);  // comparisons vectorize where fminf/fmaxf may not
    return g + l2 * w + l1 * ((w > 0.f ? 1.f : 0.f) - (w < 0.f ? 1.f : 0.f));
  }
};

// Step-dependent constants, computed once per tensor update.
struct UpdateConstants {
  Preprocess pre;
  float lr = 0.f, mu = 0.f, nesterov = 0.f, b1 = 0.f, b2 = 0.f, eps = 0.f, rho = 0.f, step_size = 0.f, inv_sqrt_c2 = 0.f;
  float shrink = 1.f;      // decoupled weight decay's factor, 1 − lr·weight_decay
  int lookahead = 0;       // 0: none; 1: the slow weights follow; 2: and this step syncs
  float slow_keep = 0.f;   // 1 − lookahead_alpha
  float average = 0.f;     // ema_decay (0: no average)
  UpdateConstants() = default;  // kernel parameter arrays
  explicit UpdateConstants(const OptimizerStep& s)
      : pre(s.d), lr(s.d.learning_rate), mu(s.momentum), nesterov(s.nesterov ? 1.f : 0.f), b1(s.beta1),
        b2(s.beta2), eps(s.epsilon), rho(s.decay), shrink(1.f - s.d.learning_rate * s.d.weight_decay),
        slow_keep(1.f - s.d.lookahead_alpha), average(s.d.ema_decay) {
    at_step(s.step);
    if (s.d.lookahead_steps > 0) lookahead = s.step % s.d.lookahead_steps == 0 ? 2 : 1;
  }
  // Adam: lr·(m/c1)/(√(v/c2) + ε) = (lr/c1)·m/(√v·(1/√c2) + ε)
  NNGRAPH_HD void at_step(int64_t step) {
    const float c1 = 1.f - powf(b1, static_cast<float>(step));
    const float c2 = 1.f - powf(b2, static_cast<float>(step));
    step_size = lr / c1;
    inv_sqrt_c2 = 1.f / sqrtf(c2);
  }
};

// A float16 graph's dynamic loss scaling, in device memory (torch.amp.GradScaler's rule,
// without a host round trip): the loss gradient is multiplied by `scale`; a check of the
// weight gradients sets `found`; the optimizers then skip the step or divide by the scale;
// the update kernel moves the scale and clears `found`.
struct LossScaleState {
  float scale = 1.f;
  int32_t good = 0;      // clean steps since the scale last changed
  int32_t found = 0;     // this step's weight gradients hold a NaN or inf
  int64_t skipped = 0;   // steps skipped so far (Adam's step count leaves them out)
  float report[2] = {};  // of the latest step: the scale it used, 1 if it was skipped
};

// The step after `s`'s check: skipped and backed off, or counted and perhaps grown.
NNGRAPH_HD inline void advance_loss_scale(LossScaleState& s, float growth, float backoff, int interval) {
  s.report[0] = s.scale;
  s.report[1] = s.found ? 1.f : 0.f;
  if (s.found) {
    s.scale *= backoff;
    s.good = 0;
    ++s.skipped;
  } else if (++s.good >= interval) {
    const float grown = s.scale * growth;
    if (grown <= 3.0e38f) s.scale = grown;  // stays finite
    s.good = 0;
  }
  s.found = 0;
}

// One parameter's update; the kind is a template argument so loops over it vectorize. `slow`
// is lookahead's state: the slow weight less the fast one, so it starts at zero; `avg` the
// average's, the average less the weight (a = w + avg: a' = decay·a + (1 − decay)·w').
template <OptimizerKind K, bool Slot, bool AmsGrad = false>
NNGRAPH_HD inline void update(const UpdateConstants& k, float& w, float gradient, float* s0, float* s1, float* s2,
                              float* slow, float* avg) {
  const float g = k.pre(gradient, w), before = w;
  w *= k.shrink;
  if constexpr (K == OptimizerKind::SGD) {
    if constexpr (!Slot) {
      w -= k.lr * g;
    } else {
      *s0 = k.mu * *s0 + g;
      w -= k.lr * (k.nesterov * (g + k.mu * *s0) + (1.f - k.nesterov) * *s0);
    }
  } else if constexpr (K == OptimizerKind::Adam) {
    *s0 = k.b1 * *s0 + (1.f - k.b1) * g;
    *s1 = k.b2 * *s1 + (1.f - k.b2) * g * g;
    float v = *s1;
    if constexpr (AmsGrad) v = *s2 = *s2 > *s1 ? *s2 : *s1;
    w -= k.step_size * *s0 / (sqrtf(v) * k.inv_sqrt_c2 + k.eps);
  } else {
    *s0 = k.rho * *s0 + (1.f - k.rho) * g * g;
    w -= k.lr * g / (sqrtf(*s0) + k.eps);
  }
  if (k.lookahead) {
    float d = *slow - (w - before);
    if (k.lookahead == 2) {  // slow += alpha·(fast − slow); fast = slow
      w += k.slow_keep * d;
      d = 0.f;
    }
    *slow = d;
  }
  if (k.average > 0.f) *avg = k.average * (*avg + before - w);
}

// Calls fn.template operator()<K, Slot, AmsGrad>() for the step's optimizer (host side).
template <class F>
inline void dispatch_update(const OptimizerStep& s, F&& fn) {
  switch (s.kind) {
    case OptimizerKind::SGD:
      if (s.momentum > 0.f)
        fn.template operator()<OptimizerKind::SGD, true, false>();
      else
        fn.template operator()<OptimizerKind::SGD, false, false>();
      break;
    case OptimizerKind::Adam:
      if (s.amsgrad)
        fn.template operator()<OptimizerKind::Adam, true, true>();
      else
        fn.template operator()<OptimizerKind::Adam, true, false>();
      break;
    case OptimizerKind::RMSProp: fn.template operator()<OptimizerKind::RMSProp, true, false>(); break;
  }
}

}  // namespace nngraph::math
