#include "nngraph/optimizer.h"

#include <cmath>

#include "backends/backend.h"
#include "ops/optimizer.h"
#include "nngraph/error.h"

namespace nngraph {

void OptimizerDescriptor::validate() const {
  if (!(learning_rate >= 0.f) || !std::isfinite(learning_rate))
    fail("[optimizer] learning_rate must be finite and >= 0, got ", learning_rate);
  if (apply_gradient_clipping && !(gradient_clip_min <= gradient_clip_max))
    fail("[optimizer] gradient_clip_min (", gradient_clip_min, ") exceeds gradient_clip_max (", gradient_clip_max, ")");
  if (!(regularization_scale >= 0.f) || !std::isfinite(regularization_scale))
    fail("[optimizer] regularization_scale must be finite and >= 0, got ", regularization_scale);
  if (!std::isfinite(gradient_rescale)) fail("[optimizer] gradient_rescale must be finite, got ", gradient_rescale);
  if (apply_gradient_clipping && (std::isnan(gradient_clip_min) || std::isnan(gradient_clip_max)))
    fail("[optimizer] gradient_clip_min and gradient_clip_max must not be NaN");
  if (!(weight_decay >= 0.f) || !std::isfinite(weight_decay))
    fail("[optimizer] weight_decay must be finite and >= 0, got ", weight_decay);
  if (lookahead_steps < 0) fail("[optimizer] lookahead_steps must be >= 0, got ", lookahead_steps);
  if (!(lookahead_alpha >= 0.f && lookahead_alpha <= 1.f))
    fail("[optimizer] lookahead_alpha must be in [0, 1], got ", lookahead_alpha);
  if (!(ema_decay >= 0.f && ema_decay < 1.f)) fail("[optimizer] ema_decay must be in [0, 1), got ", ema_decay);
}

void LossScaling::validate() const {
  if (!(initial > 0.f) || !std::isfinite(initial)) fail("[loss scaling] initial must be finite and > 0, got ", initial);
  if (!(growth >= 1.f) || !std::isfinite(growth)) fail("[loss scaling] growth must be finite and >= 1, got ", growth);
  if (!(backoff > 0.f && backoff < 1.f)) fail("[loss scaling] backoff must be in (0, 1), got ", backoff);
  if (growth_interval < 1) fail("[loss scaling] growth_interval must be >= 1, got ", growth_interval);
}

BuiltinOptimizer::BuiltinOptimizer(OptimizerStep params) : Optimizer(params.d), params_(params) {
  auto unit = [](float v) { return v >= 0.f && v < 1.f; };  // false for NaN
  if (!unit(params.momentum)) fail("[sgd] momentum must be in [0, 1), got ", params.momentum);
  if (!unit(params.beta1) || !unit(params.beta2))
    fail("[adam] beta1 and beta2 must be in [0, 1), got ", params.beta1, " and ", params.beta2);
  if (!unit(params.decay)) fail("[rmsprop] decay must be in [0, 1), got ", params.decay);
  if (!(params.epsilon > 0.f) || !std::isfinite(params.epsilon))
    fail("[optimizer] epsilon must be finite and > 0, got ", params.epsilon);
}

int BuiltinOptimizer::slot_count() const {
  return rule_slot_count(params_) + (descriptor.lookahead_steps > 0 ? 1 : 0) + (descriptor.ema_decay > 0.f ? 1 : 0);
}

void BuiltinOptimizer::apply(const Device& device, float* values, const float* gradient,
                             const std::vector<float*>& slots, size_t count, int64_t step) {
  OptimizerStep s = params_;
  s.d = descriptor;  // picks up learning-rate changes
  s.d.validate();
  s.step = step;
  TensorUpdate t{values, gradient, {}, count, step};
  for (size_t i = 0; i < slots.size() && i < kMaxSlots; ++i) t.slots[i] = slots[i];
  dispatch<OptimizerKernel>(backend_for(device), s, std::vector<TensorUpdate>{t});
}

void BuiltinOptimizer::apply_all(const Device& device, const std::vector<TensorUpdate>& tensors,
                                 const OptimizerDescriptor& d, const math::LossScaleState* scaling) {
  OptimizerStep s = params_;
  s.d = d;
  s.scaling = scaling;
  s.d.validate();
  dispatch<OptimizerKernel>(backend_for(device), s, tensors);
}

std::shared_ptr<BuiltinOptimizer> make_sgd(OptimizerDescriptor d, float momentum, bool nesterov) {
  OptimizerStep s{OptimizerKind::SGD, d};
  s.momentum = momentum;
  s.nesterov = nesterov;
  if (nesterov && momentum <= 0.f) fail("[sgd] nesterov needs momentum > 0");
  return std::make_shared<BuiltinOptimizer>(s);
}

std::shared_ptr<BuiltinOptimizer> make_adam(OptimizerDescriptor d, float beta1, float beta2, float epsilon,
                                            bool amsgrad) {
  OptimizerStep s{OptimizerKind::Adam, d};
  s.beta1 = beta1;
  s.beta2 = beta2;
  s.epsilon = epsilon;
  s.amsgrad = amsgrad;
  return std::make_shared<BuiltinOptimizer>(s);
}

std::shared_ptr<BuiltinOptimizer> make_rmsprop(OptimizerDescriptor d, float decay, float epsilon) {
  OptimizerStep s{OptimizerKind::RMSProp, d};
  s.decay = decay;
  s.epsilon = epsilon;
  return std::make_shared<BuiltinOptimizer>(s);
}

}  // namespace nngraph
