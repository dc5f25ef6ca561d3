// Optimizer updates: the per-parameter rule from backends/math.h over many tensors at once.
#include "backends/math.h"
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
  const float* g[kMaxTensors];
  float* s0[kMaxTensors];
  float* s1[kMaxTensors];
  float* s2[kMaxTensors];
  size_t count[kMaxTensors];
  unsigned first_block[kMaxTensors + 1];
  int n;
};

template <OptimizerKind K, bool Slot, bool AmsGrad>
__global__ void multi_update_kernel(MultiUpdate m) {
  int t = 0;
  while (t + 1 < m.n && blockIdx.x >= m.first_block[t + 1]) ++t;
  const size_t local = blockIdx.x - m.first_block[t], blocks = m.first_block[t + 1] - m.first_block[t];
  float* w = m.w[t];
  const float* g = m.g[t];
  float *s0 = m.s0[t], *s1 = m.s1[t], *s2 = m.s2[t];
  for (size_t i = local * blockDim.x + threadIdx.x; i < m.count[t]; i += blocks * blockDim.x)
    math::update<K, Slot, AmsGrad>(m.k[t], w[i], g[i], s0 + i, s1 + i, s2 + i);
}

struct LaunchMulti {
  cudaStream_t s;
  const MultiUpdate& m;
  template <OptimizerKind K, bool Slot, bool AmsGrad>
  void operator()() const {
    multi_update_kernel<K, Slot, AmsGrad><<<m.first_block[m.n], kThreads, 0, s>>>(m);
  }
};

}  // namespace

void optimizer_steps(cudaStream_t s, const OptimizerStep& step, const TensorUpdate* tensors, size_t n) {
  for (size_t start = 0; start < n; start += kMaxTensors) {
    MultiUpdate m{};
    m.n = static_cast<int>(std::min<size_t>(kMaxTensors, n - start));
    for (int i = 0; i < m.n; ++i) {
      const TensorUpdate& t = tensors[start + i];
      OptimizerStep one = step;
      one.step = t.step;
      m.k[i] = math::UpdateConstants(one);
      m.w[i] = t.values;
      m.g[i] = t.gradient;
      // Slots a rule does not use point at the values and are never read.
      m.s0[i] = t.slots[0] ? t.slots[0] : t.values;
      m.s1[i] = t.slots[1] ? t.slots[1] : t.values;
      m.s2[i] = t.slots[2] ? t.slots[2] : t.values;
      m.count[i] = t.count;
      m.first_block[i + 1] = m.first_block[i] + std::min<unsigned>(blocks_for(t.count), 2048);
    }
    math::dispatch_update(step, LaunchMulti{s, m});
    check_launch("optimizer");
  }
}

}  // namespace nngraph::cuda
