// Optimizer updates: the per-parameter rule from backends/optimizer_math.h, one loop per kind (a
// template argument) so each loop vectorizes; the update is memory-bound over every parameter.
#include <algorithm>

#include "backends/cpu/cpu_backend.h"
#include "backends/optimizer_math.h"
#include "ops/optimizer.h"

namespace nngraph {
namespace {

// Slots a kind does not use point at a dummy and are never read.
struct Loop {
  math::UpdateConstants k;
  float *w, *s0, *s1, *s2, *slow, *avg;
  const float* g;
  size_t b, e;
  template <OptimizerKind K, bool Slot, bool AmsGrad>
  void operator()() const {
    const math::UpdateConstants c = k;
    float* __restrict wr = w;
    const float* __restrict gr = g;
    float* __restrict a = s0;
    float* __restrict v = s1;
    float* __restrict m = s2;
    float* __restrict l = slow;
    float* __restrict r = avg;
    for (size_t i = b; i < e; ++i) math::update<K, Slot, AmsGrad>(c, wr[i], gr[i], a + i, v + i, m + i, l + i, r + i);
  }
};

// All tensors' values as one range split over the pool: small tensors (biases, batch-norm
// parameters) would otherwise each wake every thread for a few values.
void optimizer(Backend& backend, const OptimizerStep& s, const std::vector<TensorUpdate>& tensors) {
  if (s.scaling) fail<Unsupported>("[optimizer] the cpu backend computes in float32, without loss scaling");
  std::vector<float> dummy(1);
  std::vector<size_t> start(tensors.size() + 1, 0);
  for (size_t i = 0; i < tensors.size(); ++i) start[i + 1] = start[i] + tensors[i].count;
  pool_of(backend).parallel_for(start.back(), [&](size_t b, size_t e) {
    for (size_t i = std::upper_bound(start.begin(), start.end(), b) - start.begin() - 1; i < tensors.size() && start[i] < e;
         ++i) {
      const TensorUpdate& t = tensors[i];
      if (t.gradient_dtype != DType::Float32 || t.copy)
        fail<Unsupported>("[optimizer] the cpu backend updates float32 gradients only");
      OptimizerStep one = s;
      one.step = t.step;
      auto slot = [&](int j) { return j >= 0 && t.slots[j] ? t.slots[j] : dummy.data(); };
      const size_t lo = std::max(b, start[i]) - start[i], hi = std::min(e, start[i + 1]) - start[i];
      math::dispatch_update(one, Loop{math::UpdateConstants(one), t.values, slot(0), slot(1), slot(2),
                                      slot(lookahead_slot(s)), slot(average_slot(s)),
                                      static_cast<const float*>(t.gradient), lo, hi});
    }
  });
}

NNGRAPH_KERNEL(OptimizerKernel, CPU, optimizer);

}  // namespace
}  // namespace nngraph
