// Optimizer updates: the per-parameter rule from backends/math.h, one loop per kind (a
// template argument) so each loop vectorizes; the update is memory-bound over every parameter.
#include "backends/cpu/cpu_backend.h"
#include "backends/math.h"

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

}  // namespace

void CpuBackend::optimizer_step(const OptimizerStep& s, float* w, const float* gradient,
                                const std::vector<float*>& slots, size_t count) {
  const math::UpdateConstants k(s);
  std::vector<float> dummy(1);
  auto slot = [&](size_t i) { return i < slots.size() ? slots[i] : dummy.data(); };
  pool_.parallel_for(count, [&](size_t b, size_t e) {
    // A dummy slot advances with i: give it the count's room only if it is ever used.
    math::dispatch_update(s, Loop{k, w, slot(0), slot(1), slot(2), gradient, b, e});
  });
}

}  // namespace nngraph
