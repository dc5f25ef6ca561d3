#pragma once
// The device side of a float16 graph's dynamic loss scaling (math::LossScaleState).
#include <vector>

#include "backends/kernel.h"
#include "backends/optimizer_math.h"

namespace nngraph {

// state->found = whether any of the tensors holds a NaN or inf, without waiting.
struct LossScaleCheckKernel
    : KernelOf<void(Backend&, const std::vector<Tensor>& gradients, math::LossScaleState* state)> {
  static constexpr const char* name = "loss_scale_check";
};
// math::advance_loss_scale under `rule`, in queue order.
struct LossScaleUpdateKernel : KernelOf<void(Backend&, math::LossScaleState* state, const LossScaling& rule)> {
  static constexpr const char* name = "loss_scale_update";
};

}  // namespace nngraph
