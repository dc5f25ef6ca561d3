// Arithmetic of two images with broadcasting, and its gradients (the formulas are
// backends/math.h's), and sums of several: the cuda kernels of ops/arithmetic.h.
#include "backends/cuda/cuda_backend.h"
#include "backends/math.h"
#include "common.cuh"
#include "ops/arithmetic.h"

namespace nngraph {
namespace {

using cuda::blocks_for;
using cuda::kThreads;

math::Broadcast broadcast(const Tensor& t) { return math::Broadcast(t.batch(), t.shape().c, t.shape().h, t.shape().w); }

// The result's N×C×H×W, to turn a flat index into coordinates.
struct Extent {
  int n, c, h, w;
};
Extent extent_of(const Tensor& t) { return {t.batch(), t.shape().c, t.shape().h, t.shape().w}; }

using cuda::ld;
using cuda::st;

template <class N>
struct Apply {  // neuron(a op b)
  ArithmeticOp op;
  N neuron;
  static constexpr bool kThrough = false;
  __device__ float operator()(float a, float b, float = 0.f) const { return neuron(math::arithmetic(op, a, b)); }
};
template <class D>
struct Through {  // (a op b)·f'(v): a neuron's gradient taken in the sum of its output's gradients
  ArithmeticOp op;
  D derivative;
  static constexpr bool kThrough = true;
  __device__ float operator()(float a, float b, float v) const { return math::arithmetic(op, a, b) * derivative(v); }
};

// y = f(a, b, v), each V values at a time.
template <int V, class T, class F>
__global__ void through_kernel(F f, const T* a, const T* b, const T* v, T* y, size_t items) {
  NNGRAPH_GRID_LOOP(i, items) {
    float x[V], u[V], w[V];
    cuda::load_values<V>(a + i * V, x);
    cuda::load_values<V>(b + i * V, u);
    cuda::load_values<V>(v + i * V, w);
#pragma unroll
    for (int k = 0; k < V; ++k) x[k] = f(x[k], u[k], w[k]);
    cuda::store_values<V>(y + i * V, x);
  }
}

// v (null, or of y's shape) is the third argument of apply.
template <class T, class F>
__global__ void broadcast_kernel(F apply, const T* a, math::Broadcast ba, const T* b, math::Broadcast bb, const T* v,
                                 T* y, Extent e, size_t count) {
  NNGRAPH_GRID_LOOP(i, count) {
    const int x = static_cast<int>(i % e.w), r = static_cast<int>(i / e.w % e.h);
    const int c = static_cast<int>(i / (static_cast<size_t>(e.w) * e.h) % e.c);
    const int n = static_cast<int>(i / (static_cast<size_t>(e.w) * e.h * e.c));
    y[i] = st<T>(apply(ld(a[ba.at(n, c, r, x)]), ld(b[bb.at(n, c, r, x)]), v ? ld(v[i]) : 0.f));
  }
}

// One block per dx element: its threads sum dy ⊙ ∂ over the result positions that read it.
// `span` holds, per axis, how many result indices map to one operand index (1 or the extent).
template <class T>
__global__ void gradient_kernel(ArithmeticOp op, int operand, const T* a, math::Broadcast ba, const T* b,
                                math::Broadcast bb, const T* dy, Extent out, Extent own, Extent span, T* dx) {
  const size_t i = blockIdx.x;
  const int x0 = static_cast<int>(i % own.w), r0 = static_cast<int>(i / own.w % own.h);
  const int c0 = static_cast<int>(i / (static_cast<size_t>(own.w) * own.h) % own.c);
  const int n0 = static_cast<int>(i / (static_cast<size_t>(own.w) * own.h * own.c));
  const long long set = static_cast<long long>(span.n) * span.c * span.h * span.w;
  float sum = 0.f;
  for (long long k = threadIdx.x; k < set; k += blockDim.x) {
    const int x = span.w > 1 ? static_cast<int>(k % span.w) : x0;
    const int r = span.h > 1 ? static_cast<int>(k / span.w % span.h) : r0;
    const int c = span.c > 1 ? static_cast<int>(k / (span.w * span.h) % span.c) : c0;
    const int n = span.n > 1 ? static_cast<int>(k / (static_cast<long long>(span.w) * span.h * span.c)) : n0;
    const size_t j = ((static_cast<size_t>(n) * out.c + c) * out.h + r) * out.w + x;
    sum += ld(dy[j]) * math::arithmetic_partial(op, operand, ld(a[ba.at(n, c, r, x)]), ld(b[bb.at(n, c, r, x)]));
  }
  __shared__ float partial[kThreads];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) dx[i] = st<T>(partial[0]);
}

// dx has the result's shape: one thread per element.
template <class T>
__global__ void pointwise_gradient_kernel(ArithmeticOp op, int operand, const T* a, math::Broadcast ba, const T* b,
                                          math::Broadcast bb, const T* dy, Extent e, T* dx, size_t count) {
  NNGRAPH_GRID_LOOP(i, count) {
    const int x = static_cast<int>(i % e.w), r = static_cast<int>(i / e.w % e.h);
    const int c = static_cast<int>(i / (static_cast<size_t>(e.w) * e.h) % e.c);
    const int n = static_cast<int>(i / (static_cast<size_t>(e.w) * e.h * e.c));
    dx[i] = st<T>(ld(dy[i]) * math::arithmetic_partial(op, operand, ld(a[ba.at(n, c, r, x)]), ld(b[bb.at(n, c, r, x)])));
  }
}

void arithmetic(Backend& backend, ArithmeticOp op, const Tensor& a, const Tensor& b, const NeuronDescriptor& neuron,
                const Tensor& through, const Tensor& y) {
  CudaBackend& cb = cuda_of(backend);
  auto lock = cb.enter();
  const size_t count = y.count();
  cuda::with_storage(y.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* v = through ? through.data_as<const T>() : nullptr;
    auto launch = [&](auto apply) {
      const bool dense = a.count() == count && b.count() == count;
      if constexpr (!decltype(apply)::kThrough) {
        if (dense)
          return cuda::map_values(cb.stream(), a.data_as<const T>(), b.data_as<const T>(), y.data_as<T>(), count, apply);
      }
      if (dense) {
        constexpr int V = cuda::kPack<T>;
        const T *pa = a.data_as<const T>(), *pb = b.data_as<const T>();
        T* py = y.data_as<T>();
        if (count % V == 0 && cuda::packed(pa) && cuda::packed(pb) && cuda::packed(v) && cuda::packed(py))
          through_kernel<V><<<blocks_for(count / V), kThreads, 0, cb.stream()>>>(apply, pa, pb, v, py, count / V);
        else
          through_kernel<1><<<blocks_for(count), kThreads, 0, cb.stream()>>>(apply, pa, pb, v, py, count);
      } else {
        broadcast_kernel<<<blocks_for(count), kThreads, 0, cb.stream()>>>(apply, a.data_as<const T>(), broadcast(a),
                                                                          b.data_as<const T>(), broadcast(b), v,
                                                                          y.data_as<T>(), extent_of(y), count);
      }
    };
    if (v)
      cuda::with_derivative(neuron, [&](auto d) { launch(Through<decltype(d)>{op, d}); });
    else
      cuda::with_neuron(neuron, [&](auto n) { launch(Apply<decltype(n)>{op, n}); });
  });
  cuda::check_launch("arithmetic");
}

// Up to kSumSources images a launch of sum_kernel.
constexpr int kSumSources = 8;
template <class T>
struct SumSources {
  const T* at[kSumSources];
  int count;
};

// y = Σ sources, V values at a time (y may be one of them): every source's load in flight
// before the first is added; then, where v is given, times derivative(v).
template <int V, class T, class D>
__global__ void sum_kernel(SumSources<T> s, const T* v, D derivative, T* y, size_t items) {
  NNGRAPH_GRID_LOOP(i, items) {
    cuda::Loaded<V, T> x[kSumSources];
#pragma unroll
    for (int k = 0; k < kSumSources; ++k)
      if (k < s.count) x[k].load(s.at[k] + i * V);
    float total[V] = {};
#pragma unroll
    for (int k = 0; k < kSumSources; ++k)
      if (k < s.count)
#pragma unroll
        for (int j = 0; j < V; ++j) total[j] += x[k][j];
    if (v) {
      float w[V];
      cuda::load_values<V>(v + i * V, w);
#pragma unroll
      for (int j = 0; j < V; ++j) total[j] *= derivative(w[j]);
    }
    cuda::store_values<V>(y + i * V, total);
  }
}

void sum(Backend& backend, const std::vector<Tensor>& sources, const NeuronDescriptor& neuron, const Tensor& through,
         const Tensor& y) {
  CudaBackend& cb = cuda_of(backend);
  auto lock = cb.enter();
  const size_t count = y.count();
  cuda::with_storage(y.dtype(), [&](auto z) {
    using T = decltype(z);
    constexpr int V = cuda::kPack<T>;
    T* out = y.data_as<T>();
    const T* v = through ? through.data_as<const T>() : nullptr;
    bool packs = count % V == 0 && cuda::packed(out) && cuda::packed(v);
    for (const Tensor& t : sources) packs = packs && cuda::packed(t.data_as<const T>());
    cuda::with_derivative(v ? neuron : NeuronDescriptor{}, [&](auto d) {
      // kSumSources a launch; each launch after the first adds the sum so far, in y; the last
      // applies the derivative.
      for (size_t k = 0; k < sources.size();) {
        SumSources<T> group{};
        if (k) group.at[group.count++] = out;
        while (group.count < kSumSources && k < sources.size()) group.at[group.count++] = sources[k++].data_as<const T>();
        const T* last = k == sources.size() ? v : nullptr;
        if (packs)
          sum_kernel<V><<<blocks_for(count / V), kThreads, 0, cb.stream()>>>(group, last, d, out, count / V);
        else
          sum_kernel<1><<<blocks_for(count), kThreads, 0, cb.stream()>>>(group, last, d, out, count);
      }
    });
  });
  cuda::check_launch("sum");
}

void arithmetic_gradient(Backend& backend, ArithmeticOp op, int operand, const Tensor& a, const Tensor& b,
                         const Tensor& dy, const Tensor& dx) {
  CudaBackend& cb = cuda_of(backend);
  auto lock = cb.enter();
  const Extent out = extent_of(dy), own = extent_of(dx);
  cuda::with_storage(dy.dtype(), [&](auto z) {
    using T = decltype(z);
    if (dx.count() == dy.count()) {
      pointwise_gradient_kernel<<<blocks_for(dy.count()), kThreads, 0, cb.stream()>>>(
          op, operand, a.data_as<const T>(), broadcast(a), b.data_as<const T>(), broadcast(b), dy.data_as<const T>(),
          out, dx.data_as<T>(), dy.count());
    } else {
      auto span = [](int mine, int theirs) { return mine == 1 ? theirs : 1; };
      const Extent s{span(own.n, out.n), span(own.c, out.c), span(own.h, out.h), span(own.w, out.w)};
      gradient_kernel<<<static_cast<unsigned>(dx.count()), kThreads, 0, cb.stream()>>>(
          op, operand, a.data_as<const T>(), broadcast(a), b.data_as<const T>(), broadcast(b), dy.data_as<const T>(),
          out, own, s, dx.data_as<T>());
    }
  });
  cuda::check_launch("arithmetic_gradient");
}

NNGRAPH_KERNEL(ArithmeticKernel, CUDA, arithmetic);
NNGRAPH_KERNEL(ArithmeticGradientKernel, CUDA, arithmetic_gradient);
NNGRAPH_KERNEL(SumKernel, CUDA, sum);

}  // namespace
}  // namespace nngraph
