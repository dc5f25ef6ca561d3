// Optimizer updates: the per-parameter rule from backends/optimizer_math.h over many tensors
// at once.
#include "backends/optimizer_math.h"
#include "common.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

constexpr int kMaxTensors = 16;

// Passed by value (about 2 KB of kernel parameters): block b works on the tensor t with
// first_block[t] <= b < first_block[t + 1].
struct MultiUpdate {
  math::UpdateConstants k[kMaxTensors];
  float* w[kMaxTensors];
  const void* g[kMaxTensors];
  void* copy[kMaxTensors];          // a copy of w (ParameterCopies'), written with it (else null)
  DType g_dtype[kMaxTensors], copy_dtype[kMaxTensors];
  int copy_inputs[kMaxTensors], copy_taps[kMaxTensors];  // a channels-last filter copy (TensorUpdate's)
  bool g_krsc[kMaxTensors];  // the gradient in that copy's order
  float* s0[kMaxTensors];
  float* s1[kMaxTensors];
  float* s2[kMaxTensors];
  float* slow[kMaxTensors];  // lookahead's state (unused without it)
  float* avg[kMaxTensors];   // the average's state (unused without it)
  size_t count[kMaxTensors];
  int64_t step[kMaxTensors];
  unsigned first_block[kMaxTensors + 1];
  int n;
  const math::LossScaleState* scaling;  // a float16 graph's, else null
};
static_assert(sizeof(MultiUpdate) <= 4096, "kernel parameters are limited to 4 KB");

// Four parameters at a time where every array of the tensor is 16-byte aligned: wide loads
// bring the bandwidth-bound update closer to the memory's speed. Slots the rule does not use
// alias the values and are neither loaded nor stored.
template <OptimizerKind K, bool Slot, bool AmsGrad>
__device__ void update_four(const math::UpdateConstants& k, float4* w, const float4* g, float4* s0, float4* s1,
                            float4* s2, float4* slow, float4* avg) {
  constexpr bool use0 = Slot, use1 = K == OptimizerKind::Adam, use2 = AmsGrad;
  const bool use3 = k.lookahead != 0, use4 = k.average > 0.f;
  float4 vw = *w, a = use0 ? *s0 : float4{}, b = use1 ? *s1 : float4{}, c = use2 ? *s2 : float4{};
  float4 d = use3 ? *slow : float4{}, e = use4 ? *avg : float4{};
  const float4 vg = *g;
  math::update<K, Slot, AmsGrad>(k, vw.x, vg.x, &a.x, &b.x, &c.x, &d.x, &e.x);
  math::update<K, Slot, AmsGrad>(k, vw.y, vg.y, &a.y, &b.y, &c.y, &d.y, &e.y);
  math::update<K, Slot, AmsGrad>(k, vw.z, vg.z, &a.z, &b.z, &c.z, &d.z, &e.z);
  math::update<K, Slot, AmsGrad>(k, vw.w, vg.w, &a.w, &b.w, &c.w, &d.w, &e.w);
  *w = vw;
  if (use0) *s0 = a;
  if (use1) *s1 = b;
  if (use2) *s2 = c;
  if (use3) *slow = d;
  if (use4) *avg = e;
}

// Where OIHW value i of an O × inputs × taps filter lies in its KRSC copy (O × taps × inputs).
// In 32 bits where i fits (every filter but a huge one): this runs for every value of every
// filter, and a 64-bit division costs several 32-bit ones.
__device__ inline size_t krsc_index(size_t i, int inputs, int taps) {
  if (i <= 0xffffffffu) {
    const unsigned u = static_cast<unsigned>(i), per = static_cast<unsigned>(inputs) * taps, o = u / per;
    const unsigned r = u - o * per, in = r / taps;
    return (static_cast<size_t>(o) * taps + (r - in * taps)) * inputs + in;
  }
  const size_t per = static_cast<size_t>(inputs) * taps, o = i / per, r = i % per;
  return (o * taps + r % taps) * inputs + r / taps;
}

// Values one at a time: a half gradient read, the copy written (KRSC where taps is not 0), the
// gradient read in the copy's order where g_krsc.
template <OptimizerKind K, bool Slot, bool AmsGrad, class G, class C>
__device__ void update_each(const math::UpdateConstants& k, float* w, const G* g, bool g_krsc, float* s0, float* s1,
                            float* s2, float* slow, float* avg, C* copy, int inputs, int taps, size_t first,
                            size_t stride, size_t count) {
  for (size_t i = first; i < count; i += stride) {
    const size_t in_copy = taps > 1 ? krsc_index(i, inputs, taps) : i;  // one tap: the same order
    math::update<K, Slot, AmsGrad>(k, w[i], ld(g[g_krsc ? in_copy : i]), s0 + i, s1 + i, s2 + i, slow + i, avg + i);
    if (copy) copy[in_copy] = st<C>(w[i]);
  }
}

template <OptimizerKind K, bool Slot, bool AmsGrad, class G>
__device__ void update_typed(const MultiUpdate& m, const math::UpdateConstants& k, int t, size_t first,
                             size_t stride) {
  const G* g = static_cast<const G*>(m.g[t]);
  const int inputs = m.copy_inputs[t], taps = m.copy_taps[t];
  if (m.copy_dtype[t] == DType::BFloat16)
    update_each<K, Slot, AmsGrad>(k, m.w[t], g, m.g_krsc[t], m.s0[t], m.s1[t], m.s2[t], m.slow[t], m.avg[t],
                                  static_cast<__nv_bfloat16*>(m.copy[t]), inputs, taps, first, stride, m.count[t]);
  else if (m.copy_dtype[t] == DType::Float32)  // a float32 graph's KRSC filter
    update_each<K, Slot, AmsGrad>(k, m.w[t], g, m.g_krsc[t], m.s0[t], m.s1[t], m.s2[t], m.slow[t], m.avg[t],
                                  static_cast<float*>(m.copy[t]), inputs, taps, first, stride, m.count[t]);
  else
    update_each<K, Slot, AmsGrad>(k, m.w[t], g, m.g_krsc[t], m.s0[t], m.s1[t], m.s2[t], m.slow[t], m.avg[t],
                                  static_cast<__half*>(m.copy[t]), inputs, taps, first, stride, m.count[t]);
}

template <OptimizerKind K, bool Slot, bool AmsGrad>
__global__ void multi_update_kernel(MultiUpdate m) {
  int t = 0;
  while (t + 1 < m.n && blockIdx.x >= m.first_block[t + 1]) ++t;
  const size_t local = blockIdx.x - m.first_block[t], blocks = m.first_block[t + 1] - m.first_block[t];
  const size_t first = local * blockDim.x + threadIdx.x, stride = blocks * blockDim.x;
  math::UpdateConstants k = m.k[t];
  if (m.scaling) {  // a skipped step changes nothing; the others see the unscaled gradient
    if (m.scaling->found) return;
    k.pre.rescale /= m.scaling->scale;
    if (m.scaling->skipped) k.at_step(m.step[t] - m.scaling->skipped);
  }
  if (m.copy[t] || m.g_dtype[t] != DType::Float32) {  // a half gradient, or a copy to write
    if (m.g_dtype[t] == DType::BFloat16)
      update_typed<K, Slot, AmsGrad, __nv_bfloat16>(m, k, t, first, stride);
    else if (m.g_dtype[t] == DType::Float16)
      update_typed<K, Slot, AmsGrad, __half>(m, k, t, first, stride);
    else
      update_typed<K, Slot, AmsGrad, float>(m, k, t, first, stride);
    return;
  }
  float* w = m.w[t];
  const float* g = static_cast<const float*>(m.g[t]);
  float *s0 = m.s0[t], *s1 = m.s1[t], *s2 = m.s2[t], *slow = m.slow[t], *avg = m.avg[t];
  size_t start = 0;
  const auto bits = reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(g) |
                    reinterpret_cast<uintptr_t>(s0) | reinterpret_cast<uintptr_t>(s1) |
                    reinterpret_cast<uintptr_t>(s2) | reinterpret_cast<uintptr_t>(slow) |
                    reinterpret_cast<uintptr_t>(avg);
  if (bits % 16 == 0) {
    const size_t fours = m.count[t] / 4;
    for (size_t i = first; i < fours; i += stride)
      update_four<K, Slot, AmsGrad>(k, reinterpret_cast<float4*>(w) + i, reinterpret_cast<const float4*>(g) + i,
                                    reinterpret_cast<float4*>(s0) + i, reinterpret_cast<float4*>(s1) + i,
                                    reinterpret_cast<float4*>(s2) + i, reinterpret_cast<float4*>(slow) + i,
                                    reinterpret_cast<float4*>(avg) + i);
    start = fours * 4;
  }
  for (size_t i = start + first; i < m.count[t]; i += stride)
    math::update<K, Slot, AmsGrad>(k, w[i], g[i], s0 + i, s1 + i, s2 + i, slow + i, avg + i);
}

struct LaunchMulti {
  const StepLaunch& l;
  const MultiUpdate& m;
  template <OptimizerKind K, bool Slot, bool AmsGrad>
  void operator()() const {
    launch_step(l, multi_update_kernel<K, Slot, AmsGrad>, m.first_block[m.n], kThreads, m);
  }
};

}  // namespace

void optimizer_steps(const StepLaunch& l, const OptimizerStep& step, const TensorUpdate* tensors, size_t n) {
  for (size_t start = 0; start < n; start += kMaxTensors) {
    MultiUpdate m{};
    m.n = static_cast<int>(std::min<size_t>(kMaxTensors, n - start));
    m.scaling = step.scaling;
    for (int i = 0; i < m.n; ++i) {
      const TensorUpdate& t = tensors[start + i];
      OptimizerStep one = step;
      one.step = t.step;
      m.k[i] = math::UpdateConstants(one);
      m.step[i] = t.step;
      m.w[i] = t.values;
      m.g[i] = t.gradient;
      m.g_dtype[i] = t.gradient_dtype;
      m.copy[i] = t.copy;
      m.copy_dtype[i] = t.copy_dtype;
      m.copy_inputs[i] = t.copy_inputs;
      m.copy_taps[i] = t.copy_taps;
      m.g_krsc[i] = t.gradient_in_copy_order;
      // Slots a rule does not use point at the values and are never read.
      m.s0[i] = t.slots[0] ? t.slots[0] : t.values;
      m.s1[i] = t.slots[1] ? t.slots[1] : t.values;
      m.s2[i] = t.slots[2] ? t.slots[2] : t.values;
      const int look = lookahead_slot(step), average = average_slot(step);
      m.slow[i] = look >= 0 && t.slots[look] ? t.slots[look] : t.values;
      m.avg[i] = average >= 0 && t.slots[average] ? t.slots[average] : t.values;
      m.count[i] = t.count;
      m.first_block[i + 1] = m.first_block[i] + std::min<unsigned>(blocks_for((t.count + 3) / 4), 2048);
    }
    math::dispatch_update(step, LaunchMulti{l, m});
    check_launch("optimizer");
  }
}

}  // namespace nngraph::cuda
