// Optimizer updates: the per-parameter rule from backends/math.h, one loop per kind (a
// template argument) so each loop vectorizes; the update is memory-bound over every parameter.
#include "backends/cpu/cpu_backend.h"
#include "backends/math.h"
#include "ops/optimizer.h"

namespace nngraph {
namespace {

// Slots a kind does not use point at a dummy and are never read.
struct Loop {
  math::UpdateConstants k;
  float *w, *s0, *s1, *s2;
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
    for (size_t i = b; i < e; ++i) math::update<K, Slot, AmsGrad>(c, wr[i], gr[i], a + i, v + i, m + i);
  }
};

// One tensor after the other, each split over the pool.
void optimizer(Backend& backend, const OptimizerStep& s, const std::vector<TensorUpdate>& tensors) {
  std::vector<float> dummy(1);
  for (const TensorUpdate& t : tensors) {
    OptimizerStep one = s;
    one.step = t.step;
    const math::UpdateConstants k(one);
    auto slot = [&](size_t i) { return t.slots[i] ? t.slots[i] : dummy.data(); };
    pool_of(backend).parallel_for(t.count, [&](size_t b, size_t e) {
      math::dispatch_update(one, Loop{k, t.values, slot(0), slot(1), slot(2), t.gradient, b, e});
    });
  }
}

NNGRAPH_KERNEL(OptimizerKernel, CPU, optimizer);

}  // namespace
}  // namespace nngraph
