// Conversions, bias + neuron epilogues, neuron gradients, dropout, row windows.
#include "backends/math.h"
#include "common.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

template <class From, class To>
__global__ void cast_kernel(const From* in, To* out, size_t n) {
  NNGRAPH_GRID_LOOP(i, n) out[i] = st<To>(ld(in[i]));
}
// V values a thread: a pack of one pixel's channels (hw = 1, channels whole packs) or of one
// channel's pixels (hw whole packs).
template <int V, class T, class I, class F>
__global__ void bias_neuron_kernel(T* x, I items, unsigned channels, unsigned hw, const float* bias, F neuron) {
  NNGRAPH_GRID_LOOP_T(I, p, items) {
    const I i = p * V;
    float v[V];
    load_values<V>(x + i, v);
    const unsigned c = hw == 1 ? static_cast<unsigned>(i % channels) : static_cast<unsigned>(i / hw % channels);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = neuron(v[k] + (bias ? bias[hw == 1 ? c + k : c] : 0.f));
    store_values<V>(x + i, v);
  }
}
template <class N>
struct ApplyNeuron {
  N neuron;
  __device__ float operator()(float v, float) const { return neuron(v); }
};
template <class D>
struct ChainRule {  // (v, dy) → dy · f'(v)
  D derivative;
  __device__ float operator()(float v, float dy) const { return dy * derivative(v); }
};
template <class T>
__global__ void dropout_kernel(const T* in, T* out, size_t n, float keep, uint64_t seed, const uint64_t* step) {
  const uint64_t key = math::dropout_key(seed, *step);
  const float scale = 1.f / keep;
  NNGRAPH_GRID_LOOP(i, n) out[i] = st<T>(math::dropout_keep(key, i, keep) ? ld(in[i]) * scale : 0.f);
}
// Over x's elements (n, ch, y, col): col = j·kw + k lies in window j of its row; j ≥ wo is the
// tail no window reaches.
template <class T, class I>
__global__ void windows_kernel(const T* from, T* to, I total, unsigned c, unsigned h, unsigned w,
                               unsigned wo, unsigned kw, bool gather) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const unsigned col = i % w, y = (i / w) % h, ch = (i / w / h) % c;
    const I n = i / w / h / c;
    const unsigned j = col / kw, k = col % kw;
    const I p = (((n * h + y) * wo + j) * c + ch) * kw + k;
    if (gather) {
      if (j < wo) to[p] = from[i];
    } else {
      to[i] = j < wo ? from[p] : st<T>(0.f);
    }
  }
}

}  // namespace

void cast(cudaStream_t s, const void* in, DType from, void* out, DType to, size_t n) {
  with_storage(from, [&](auto f) {
    with_storage(to, [&](auto t) {
      using From = decltype(f);
      using To = decltype(t);
      cast_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const From*>(in), static_cast<To*>(out), n);
    });
  });
  check_launch("convert");
}
template <class T>
void bias_neuron(cudaStream_t s, T* x, size_t n, int channels, int hw, const float* bias, const NeuronDescriptor& nd) {
  if (!bias && nd.type == NeuronType::None) return;
  constexpr int V = kPack<T>;
  const bool whole = n % V == 0 && packed(x) && (hw == 1 ? channels % V == 0 : hw % V == 0);
  with_index_type(n, [&](auto i) {
    using I = decltype(i);
    with_neuron(nd, [&](auto neuron) {
      if (whole)
        bias_neuron_kernel<V><<<blocks_for(n / V), kThreads, 0, s>>>(x, I(n / V), channels, hw, bias, neuron);
      else
        bias_neuron_kernel<1><<<blocks_for(n), kThreads, 0, s>>>(x, I(n), channels, hw, bias, neuron);
    });
  });
  check_launch("bias_neuron");
}
template <class T>
void neuron(cudaStream_t s, const T* in, T* out, size_t n, const NeuronDescriptor& nd) {
  with_neuron(nd, [&](auto f) {
    map_values(s, in, static_cast<const T*>(nullptr), out, n, ApplyNeuron<decltype(f)>{f});
  });
  check_launch("neuron");
}
template <class T>
void neuron_gradient(cudaStream_t s, const T* v, const T* dy, T* dx, size_t n, const NeuronDescriptor& nd) {
  with_derivative(nd, [&](auto derivative) {
    map_values(s, v, dy, dx, n, ChainRule<decltype(derivative)>{derivative});
  });
  check_launch("neuron_gradient");
}
template <class T>
void dropout(cudaStream_t s, const T* in, T* out, size_t n, float keep, uint64_t seed, const uint64_t* step) {
  dropout_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, out, n, keep, seed, step);
  check_launch("dropout");
}

__global__ void store_kernel(uint64_t* counter, uint64_t value) { *counter = value; }

void store(const StepLaunch& l, uint64_t* counter, uint64_t value) {
  launch_step(l, store_kernel, 1, 1, counter, value);
  check_launch("store");
}
__global__ void hold_kernel(uint64_t ns) {
  uint64_t start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - start < ns);
}

void hold(cudaStream_t s, int microseconds) {
  hold_kernel<<<1, 1, 0, s>>>(static_cast<uint64_t>(microseconds) * 1000);
  check_launch("hold");
}


namespace {
template <class T>
void launch_windows(cudaStream_t s, const T* from, T* to, int n, int c, int h, int w, int wo, int kw,
                    bool gather) {
  const size_t total = static_cast<size_t>(n) * c * h * w;
  with_index_type(total, [&](auto i) {
    windows_kernel<<<blocks_for(total), kThreads, 0, s>>>(from, to, decltype(i)(total), c, h, w, wo, kw, gather);
  });
  check_launch("convolution windows");
}
}  // namespace

template <class T>
void gather_windows(cudaStream_t s, const T* x, T* p, int n, int c, int h, int w, int wo, int kw) {
  launch_windows(s, x, p, n, c, h, w, wo, kw, true);
}
template <class T>
void scatter_windows(cudaStream_t s, const T* p, T* x, int n, int c, int h, int w, int wo, int kw) {
  launch_windows(s, p, x, n, c, h, w, wo, kw, false);
}

#define INSTANTIATE(T)                                                                                          \
  template void bias_neuron(cudaStream_t, T*, size_t, int, int, const float*, const NeuronDescriptor&);       \
  template void neuron(cudaStream_t, const T*, T*, size_t, const NeuronDescriptor&);                          \
  template void neuron_gradient(cudaStream_t, const T*, const T*, T*, size_t, const NeuronDescriptor&);       \
  template void dropout(cudaStream_t, const T*, T*, size_t, float, uint64_t, const uint64_t*);                \
  template void gather_windows(cudaStream_t, const T*, T*, int, int, int, int, int, int);                     \
  template void scatter_windows(cudaStream_t, const T*, T*, int, int, int, int, int, int);
NNGRAPH_STORAGE_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace nngraph::cuda
