// Optimizer updates: the per-parameter rule from backends/math.h over one tensor.
#include "backends/math.h"
#include "common.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

template <OptimizerKind K, bool Slot, bool AmsGrad>
__global__ void update_kernel(math::UpdateConstants k, float* w, const float* g, float* s0, float* s1, float* s2,
                              size_t n) {
  NNGRAPH_GRID_LOOP(i, n) math::update<K, Slot, AmsGrad>(k, w[i], g[i], s0 + i, s1 + i, s2 + i);
}

// Host side of math::dispatch_update: launches the kernel for the chosen rule.
struct Launch {
  cudaStream_t s;
  math::UpdateConstants k;
  float *w, *s0, *s1, *s2;
  const float* g;
  size_t n;
  template <OptimizerKind K, bool Slot, bool AmsGrad>
  void operator()() const {
    update_kernel<K, Slot, AmsGrad><<<blocks_for(n), kThreads, 0, s>>>(k, w, g, s0, s1, s2, n);
  }
};

}  // namespace

void optimizer_step(cudaStream_t s, const OptimizerStep& step, float* w, const float* g, float* s0, float* s1,
                    float* s2, size_t count) {
  // Slots a rule does not use point at w and are never read.
  math::dispatch_update(step, Launch{s, math::UpdateConstants(step), w, s0 ? s0 : w, s1 ? s1 : w, s2 ? s2 : w, g, count});
  check_launch("optimizer");
}

}  // namespace nngraph::cuda
