#pragma once
// The second moments of images' patches (what a whitening convolution's weights come from):
// the kernel behind nngraph::patch_moments.
#include <vector>

#include "backends/kernel.h"

namespace nngraph {

// Σ p·pᵀ over every kh×kw patch p (stride 1, no padding) of every float32 image of `images`,
// p's D = C·kh·kw values in (channel, row, column) order: D×D sums, row-major, on the host.
struct PatchMomentsKernel : KernelOf<std::vector<double>(Backend&, const Tensor& images, int kh, int kw)> {
  static constexpr const char* name = "patch_moments";
};

// The most values a patch may hold (the cuda kernel's per-thread sums).
constexpr int kMaxPatchValues = 64;

}  // namespace nngraph
