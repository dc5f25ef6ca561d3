#include "nngraph/optimizer.h"

#include "backends/backend.h"
#include "nngraph/error.h"

namespace nngraph {

void OptimizerDescriptor::validate() const {
  if (!(learning_rate >= 0.f)) fail("[optimizer] learning_rate must be >= 0, got ", learning_rate);
  if (apply_gradient_clipping && !(gradient_clip_min <= gradient_clip_max))
    fail("[optimizer] gradient_clip_min (", gradient_clip_min, ") exceeds gradient_clip_max (", gradient_clip_max, ")");
  if (regularization_scale < 0.f) fail("[optimizer] regularization_scale must be >= 0");
}

BuiltinOptimizer::BuiltinOptimizer(OptimizerStep params) : Optimizer(params.d), params_(params) {
  if (params.momentum < 0.f || params.momentum >= 1.f) fail("[sgd] momentum must be in [0, 1), got ", params.momentum);
  if (params.beta1 < 0.f || params.beta1 >= 1.f || params.beta2 < 0.f || params.beta2 >= 1.f)
    fail("[adam] beta1 and beta2 must be in [0, 1)");
  if (params.decay < 0.f || params.decay >= 1.f) fail("[rmsprop] decay must be in [0, 1), got ", params.decay);
  if (!(params.epsilon > 0.f)) fail("[optimizer] epsilon must be > 0");
}

int BuiltinOptimizer::slot_count() const {
  switch (params_.kind) {
    case OptimizerKind::SGD: return params_.momentum > 0.f ? 1 : 0;
    case OptimizerKind::Adam: return params_.amsgrad ? 3 : 2;
    case OptimizerKind::RMSProp: return 1;
  }
  return 0;
}

void BuiltinOptimizer::apply(const Device& device, float* values, const float* gradient,
                             const std::vector<float*>& slots, size_t count, int64_t step) {
  OptimizerStep s = params_;
  s.d = descriptor;  // picks up learning-rate changes
  s.d.validate();
  s.step = step;
  backend_for(device).optimizer_step(s, values, gradient, slots, count);
}

void BuiltinOptimizer::apply_all(const Device& device, const std::vector<TensorUpdate>& tensors) {
  OptimizerStep s = params_;
  s.d = descriptor;
  s.d.validate();
  backend_for(device).optimizer_steps(s, tensors);
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
