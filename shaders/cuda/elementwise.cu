// Conversions, bias + neuron epilogues, neuron gradients, dropout, row windows.
#include <cuda_fp16.h>

#include "backends/math.h"
#include "common.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

__global__ void f32_to_f16_kernel(const float* in, __half* out, size_t n) {
  NNGRAPH_GRID_LOOP(i, n) out[i] = __float2half_rn(in[i]);
}
__global__ void f16_to_f32_kernel(const __half* in, float* out, size_t n) {
  NNGRAPH_GRID_LOOP(i, n) out[i] = __half2float(in[i]);
}
template <class I, class F>
__global__ void bias_neuron_kernel(float* x, I n, unsigned channels, unsigned hw, const float* bias, F neuron) {
  NNGRAPH_GRID_LOOP_T(I, i, n) {
    const float b = bias ? bias[(i / hw) % channels] : 0.f;
    x[i] = neuron(x[i] + b);
  }
}
__global__ void neuron_kernel(const float* in, float* out, size_t n, NeuronDescriptor nd) {
  NNGRAPH_GRID_LOOP(i, n) out[i] = math::neuron(nd, in[i]);
}
template <class D>
__global__ void neuron_gradient_kernel(const float* v, const float* dy, float* dx, size_t n, D derivative) {
  NNGRAPH_GRID_LOOP(i, n) dx[i] = dy[i] * derivative(v[i]);
}
__global__ void dropout_kernel(const float* in, float* out, size_t n, float keep, uint64_t seed, const uint64_t* step) {
  const uint64_t key = math::dropout_key(seed, *step);
  const float scale = 1.f / keep;
  NNGRAPH_GRID_LOOP(i, n) out[i] = math::dropout_keep(key, i, keep) ? in[i] * scale : 0.f;
}
// Over x's elements (n, ch, y, col): col = j·kw + k lies in window j of its row; j ≥ wo is the
// tail no window reaches.
template <class I>
__global__ void windows_kernel(const float* from, float* to, I total, unsigned c, unsigned h, unsigned w,
                               unsigned wo, unsigned kw, bool gather) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const unsigned col = i % w, y = (i / w) % h, ch = (i / w / h) % c;
    const I n = i / w / h / c;
    const unsigned j = col / kw, k = col % kw;
    const I p = (((n * h + y) * wo + j) * c + ch) * kw + k;
    if (gather) {
      if (j < wo) to[p] = from[i];
    } else {
      to[i] = j < wo ? from[p] : 0.f;
    }
  }
}

}  // namespace

void f32_to_f16(cudaStream_t s, const float* in, void* out, size_t n) {
  f32_to_f16_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, static_cast<__half*>(out), n);
  check_launch("convert");
}
void f16_to_f32(cudaStream_t s, const void* in, float* out, size_t n) {
  f16_to_f32_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const __half*>(in), out, n);
  check_launch("convert");
}
void bias_neuron(cudaStream_t s, float* x, size_t n, int channels, int hw, const float* bias, const NeuronDescriptor& nd) {
  if (!bias && nd.type == NeuronType::None) return;
  with_index_type(n, [&](auto i) {
    with_neuron(nd, [&](auto neuron) {
      bias_neuron_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, decltype(i)(n), channels, hw, bias, neuron);
    });
  });
  check_launch("bias_neuron");
}
void neuron(cudaStream_t s, const float* in, float* out, size_t n, const NeuronDescriptor& nd) {
  neuron_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, out, n, nd);
  check_launch("neuron");
}
void neuron_gradient(cudaStream_t s, const float* v, const float* dy, float* dx, size_t n, const NeuronDescriptor& nd) {
  with_derivative(nd, [&](auto derivative) {
    neuron_gradient_kernel<<<blocks_for(n), kThreads, 0, s>>>(v, dy, dx, n, derivative);
  });
  check_launch("neuron_gradient");
}
void dropout(cudaStream_t s, const float* in, float* out, size_t n, float keep, uint64_t seed, const uint64_t* step) {
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
void launch_windows(cudaStream_t s, const float* from, float* to, int n, int c, int h, int w, int wo, int kw,
                    bool gather) {
  const size_t total = static_cast<size_t>(n) * c * h * w;
  with_index_type(total, [&](auto i) {
    windows_kernel<<<blocks_for(total), kThreads, 0, s>>>(from, to, decltype(i)(total), c, h, w, wo, kw, gather);
  });
  check_launch("convolution windows");
}
}  // namespace

void gather_windows(cudaStream_t s, const float* x, float* p, int n, int c, int h, int w, int wo, int kw) {
  launch_windows(s, x, p, n, c, h, w, wo, kw, true);
}
void scatter_windows(cudaStream_t s, const float* p, float* x, int n, int c, int h, int w, int wo, int kw) {
  launch_windows(s, p, x, n, c, h, w, wo, kw, false);
}

}  // namespace nngraph::cuda
