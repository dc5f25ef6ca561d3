#pragma once
// The built-in optimizers' update kernel.
#include <vector>

#include "backends/kernel.h"
#include "nngraph/optimizer.h"

namespace nngraph {

// Many tensors under one rule, each with its own step count (one launch on cuda).
struct OptimizerKernel : KernelOf<void(Backend&, const OptimizerStep&, const std::vector<TensorUpdate>&)> {
  static constexpr const char* name = "optimizer";
};

}  // namespace nngraph
