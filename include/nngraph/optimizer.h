#pragma once
// Optimizers (MPSNNOptimizer*): hyper-parameters live here; the per-parameter state
// (momentum, velocity, time step) belongs to the data source that owns the weights.
#include <cstdint>
#include <memory>
#include <vector>

#include "nngraph/device.h"
#include "nngraph/dtype.h"

namespace nngraph {

namespace math {
struct LossScaleState;
}

enum class Regularization { None, L1, L2 };

// g ← clamp(gradient_rescale·g) (when clipping), then + scale·w (L2) or + scale·sign(w) (L1).
// The built-in optimizers also take decoupled weight decay (w ← w·(1 − lr·weight_decay) before
// the rule, as AdamW and SGDW), lookahead (every lookahead_steps-th update moves the slow
// weights lookahead_alpha of the way to the fast ones and restarts the fast ones from there)
// and an exponential moving average of the weights: after each update a ← ema_decay·a +
// (1 − ema_decay)·w, starting from the weights (ArrayDataSource::swap_average reads it).
struct OptimizerDescriptor {
  float learning_rate = 1e-3f;
  float gradient_rescale = 1.f;
  bool apply_gradient_clipping = false;
  float gradient_clip_min = 0.f, gradient_clip_max = 0.f;
  Regularization regularization = Regularization::None;
  float regularization_scale = 0.f;
  float weight_decay = 0.f;
  int lookahead_steps = 0;  // 0: no lookahead
  float lookahead_alpha = 0.5f;
  float ema_decay = 0.f;  // 0: no average
  void validate() const;
};

enum class OptimizerKind { SGD, Adam, RMSProp };

// Everything a backend's fused update kernel needs for one parameter tensor.
struct OptimizerStep {
  OptimizerKind kind;
  OptimizerDescriptor d;
  float momentum = 0.f;
  bool nesterov = false;
  float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f, decay = 0.9f;
  bool amsgrad = false;
  int64_t step = 1;  // 1 on the first update
  // A float16 graph's loss scaling (device memory), else null: the update is skipped where it
  // found a NaN or inf, the gradient divided by its scale, and its skipped steps left out of
  // Adam's step count.
  const math::LossScaleState* scaling = nullptr;
};

// The state vectors the step's rule keeps per tensor; lookahead's and then the average's come
// after them.
inline int rule_slot_count(const OptimizerStep& s) {
  switch (s.kind) {
    case OptimizerKind::SGD: return s.momentum > 0.f ? 1 : 0;
    case OptimizerKind::Adam: return s.amsgrad ? 3 : 2;
    case OptimizerKind::RMSProp: return 1;
  }
  return 0;
}
inline int lookahead_slot(const OptimizerStep& s) { return s.d.lookahead_steps > 0 ? rule_slot_count(s) : -1; }
inline int average_slot(const OptimizerStep& s) {
  return s.d.ema_decay > 0.f ? rule_slot_count(s) + (s.d.lookahead_steps > 0 ? 1 : 0) : -1;
}
constexpr int kMaxSlots = 5;  // Adam with amsgrad, lookahead and an average

// One parameter tensor of a batched update: its values, gradient, state vectors (null when
// unused; the rule's, then lookahead's, then the average's) and the step count of the data
// source it belongs to.
// The values and state are float32 whatever the graph computes in (they are the master
// copies); a half graph's gradient is in its storage dtype, and the update writes the graph's
// half copy too.
struct TensorUpdate {
  float* values;
  const void* gradient;
  float* slots[kMaxSlots];
  size_t count;
  int64_t step;
  DType gradient_dtype = DType::Float32;
  void* copy = nullptr;  // the values again, in copy_dtype
  DType copy_dtype = DType::Float32;
  // A channels-last filter copy (KRSC): OIHW value (o, i, tap) of O × copy_inputs × copy_taps
  // goes to (o, tap, i). 0: the copy is in the values' order.
  int copy_inputs = 0, copy_taps = 0;
  // The gradient lies in the copy's order too (a channels-last convolution's, KRSC as its
  // kernels compute it).
  bool gradient_in_copy_order = false;
};

class Optimizer {
 public:
  explicit Optimizer(OptimizerDescriptor d) : descriptor(d) { descriptor.validate(); }
  virtual ~Optimizer() = default;
  OptimizerDescriptor descriptor;  // learning_rate may change between steps
  // State vectors kept per parameter tensor, each as long as the tensor, zero at start.
  virtual int slot_count() const = 0;
  // values ← update(values, gradient, slots); step counts updates from 1.
  virtual void apply(const Device& device, float* values, const float* gradient,
                     const std::vector<float*>& slots, size_t count, int64_t step) = 0;
};

// Dynamic loss scaling of a float16 training graph (torch.amp.GradScaler's rule): the loss
// gradient is multiplied by the scale, which starts at `initial`; a step whose weight
// gradients hold a NaN or inf updates nothing and multiplies the scale by `backoff`; after
// `growth_interval` clean steps in a row it is multiplied by `growth`. All on the device,
// inside a captured step. bfloat16 and float32 graphs do not scale.
struct LossScaling {
  bool enabled = true;
  float initial = 65536.f, growth = 2.f, backoff = 0.5f;
  int growth_interval = 2000;
  void validate() const;
  static LossScaling off() {
    LossScaling s;
    s.enabled = false;
    return s;
  }
};

// Built-in optimizers run one backend kernel per tensor, on the device.
class BuiltinOptimizer : public Optimizer {
 public:
  explicit BuiltinOptimizer(OptimizerStep params);
  int slot_count() const override;
  void apply(const Device& device, float* values, const float* gradient,
             const std::vector<float*>& slots, size_t count, int64_t step) override;
  // Every tensor in one backend call (one kernel launch on cuda), with the hyper-parameters
  // `d` (the descriptor as it was when the step was encoded).
  void apply_all(const Device& device, const std::vector<TensorUpdate>& tensors, const OptimizerDescriptor& d,
                 const math::LossScaleState* scaling = nullptr);
  OptimizerStep& params() { return params_; }

 private:
  OptimizerStep params_;
};

// v ← μ·v + g; w ← w − lr·(nesterov ? g + μ·v : v)   (μ = 0: plain SGD, no state)
std::shared_ptr<BuiltinOptimizer> make_sgd(OptimizerDescriptor d, float momentum, bool nesterov);
// Adam with bias correction; amsgrad keeps the running maximum of v.
std::shared_ptr<BuiltinOptimizer> make_adam(OptimizerDescriptor d, float beta1, float beta2,
                                            float epsilon, bool amsgrad);
// s ← ρ·s + (1−ρ)·g²; w ← w − lr·g / (sqrt(s) + ε)
std::shared_ptr<BuiltinOptimizer> make_rmsprop(OptimizerDescriptor d, float decay, float epsilon);

}  // namespace nngraph
