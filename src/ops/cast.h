#pragma once
// Whole-tensor utilities the engine itself runs: dtype casts and the finite check.
#include "backends/kernel.h"

namespace nngraph {

// y = x in y's dtype and layout (same shape): a cast, a permutation between NCHW and NHWC,
// or both.
struct CastKernel : KernelOf<void(Backend&, const Tensor& x, const Tensor& y)> {
  static constexpr const char* name = "cast";
};
// Whether every value is finite (check_numerics); waits for the device.
struct AllFiniteKernel : KernelOf<bool(Backend&, const Tensor& x)> {
  static constexpr const char* name = "check_numerics";
};

}  // namespace nngraph
