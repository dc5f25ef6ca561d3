// Batch normalization while training, over rows of channels held on chip: each thread keeps its
// rows in registers from one read to the one write, and the grid sums the statistics between
// two grid-wide barriers (a cooperative launch, every block resident at once). One launch, one
// read and one write each way, where the two-stage kernels take three launches and read the
// image twice (forward) or three times (gradient): for the small images of a network's later
// layers, whose passes are mostly their launches' starts and ends.
#include <cooperative_groups.h>

#include <cstdlib>

#include "columns.cuh"
#include "common.cuh"
#include "kernels.cuh"
#include "normalization.cuh"

namespace nngraph::cuda {
namespace {

namespace cg = cooperative_groups;

// Rows a thread holds: the forward pass one pack of x a row, the gradient x's and dy's.
constexpr int kForwardRows = 16, kGradientRows = 8;

// Thread (lane, group)'s k-th row of its chunk, or -1 past the chunk's end.
__device__ inline int held_row(const ColumnLanes& share, int k) {
  const int r = share.r0 + share.lane + k * share.lanes;
  return r < share.r1 ? r : -1;
}

template <class T, class F>
struct ResidentForward {
  const T *x, *addend;
  T* y;
  int y_ld, n, c, chunks;
  const float *gamma, *beta;
  float *stats, *partial;
  float epsilon;
  F neuron;
};

template <int V, class T, class F>
__global__ void __launch_bounds__(kThreads, 2) resident_forward_kernel(ResidentForward<T, F> p) {
  const ColumnLanes share(p.n, p.c, V, p.chunks);
  const int column = share.group * V;
  Loaded<V, T> v[kForwardRows];
  float a[V] = {}, b[V] = {};
  if (share.active()) {
    float shift[V];  // the channel's first value, as the two-stage sums take it
#pragma unroll
    for (int i = 0; i < V; ++i) shift[i] = ld(p.x[column + i]);
#pragma unroll
    for (int k = 0; k < kForwardRows; ++k)
      if (const int r = held_row(share, k); r >= 0) v[k].load(p.x + static_cast<size_t>(r) * p.c + column);
#pragma unroll
    for (int k = 0; k < kForwardRows; ++k)
      if (held_row(share, k) >= 0)
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const float d = v[k][i] - shift[i];
          a[i] += d;
          b[i] += d * d;
        }
  }
  write_partials<2, V>(share, a, b, p.partial, p.c);
  cg::grid_group grid = cg::this_grid();
  grid.sync();
  const int block = static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x), blocks = gridDim.x * gridDim.y;
  for (int ch = block; ch < p.c; ch += blocks)
    channel_moments(p.x, p.partial, p.chunks, p.c, 1, static_cast<double>(p.n), p.epsilon, p.gamma, p.beta, p.stats,
                    ch);
  grid.sync();
  if (!share.active()) return;
  float scale[V], shift[V];
#pragma unroll
  for (int i = 0; i < V; ++i) scale[i] = p.stats[kScale * p.c + column + i], shift[i] = p.stats[kShift * p.c + column + i];
#pragma unroll
  for (int k = 0; k < kForwardRows; ++k) {
    const int r = held_row(share, k);
    if (r < 0) continue;
    Loaded<V, T> add;
    if (p.addend) add.load(p.addend + static_cast<size_t>(r) * p.c + column);
    float out[V];  // NormalizeRows' formula, so that a replay computes the same values
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = p.neuron(v[k][i] * scale[i] + shift[i] + (p.addend ? add[i] : 0.f));
    store_values<V>(p.y + static_cast<size_t>(r) * p.y_ld + column, out);
  }
}

template <class T, class P>
struct ResidentGradient {
  const T *x, *dy;
  T* dx;
  int dy_ld, dx_ld, n, c, chunks;
  float *stats, *partial, *dgamma, *dbeta;
  float inv_count;
  P through;
};

template <int V, class T, class P>
__global__ void __launch_bounds__(kThreads, 2) resident_gradient_kernel(ResidentGradient<T, P> p) {
  const ColumnLanes share(p.n, p.c, V, p.chunks);
  const int column = share.group * V, c = p.c;
  Loaded<V, T> x[kGradientRows], dy[kGradientRows];
  float a[V] = {}, b[V] = {}, scale[V], shift[V];
  if (share.active()) {
#pragma unroll
    for (int i = 0; i < V; ++i) scale[i] = p.stats[kScale * c + column + i], shift[i] = p.stats[kShift * c + column + i];
#pragma unroll
    for (int k = 0; k < kGradientRows; ++k)
      if (const int r = held_row(share, k); r >= 0) {
        x[k].load(p.x + static_cast<size_t>(r) * c + column);
        dy[k].load(p.dy + static_cast<size_t>(r) * p.dy_ld + column);
      }
#pragma unroll
    for (int k = 0; k < kGradientRows; ++k)
      if (held_row(share, k) >= 0)
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const float g = P::kNone ? dy[k][i] : dy[k][i] * p.through(x[k][i] * scale[i] + shift[i]);
          a[i] += g;
          b[i] += g * (x[k][i] - p.stats[column + i]);  // the mean read here: held in registers, it spilled
        }
  }
  write_partials<2, V>(share, a, b, p.partial, c);
  cg::grid_group grid = cg::this_grid();
  grid.sync();
  const int block = static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x), blocks = gridDim.x * gridDim.y;
  for (int ch = block; ch < c; ch += blocks)
    channel_gradient(p.partial, p.chunks, c, p.stats, p.dgamma, p.dbeta, p.inv_count, ch);
  grid.sync();
  if (!p.dx || !share.active()) return;
  float slope[V], offset[V];  // InputGradientRows' coefficients: offset less slope·mean
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int ch = column + i;
    slope[i] = p.stats[kSlope * c + ch];
    offset[i] = p.stats[kOffset * c + ch] - slope[i] * p.stats[ch];
  }
#pragma unroll
  for (int k = 0; k < kGradientRows; ++k) {
    const int r = held_row(share, k);
    if (r < 0) continue;
    float out[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float g = P::kNone ? dy[k][i] : dy[k][i] * p.through(x[k][i] * scale[i] + shift[i]);
      out[i] = scale[i] * g + slope[i] * x[k][i] + offset[i];
    }
    store_values<V>(p.dx + static_cast<size_t>(r) * p.dx_ld + column, out);
  }
}

// The chunks of a co-resident grid of `kernel` that holds n rows of c channels at `rows` a
// thread, V channels a thread; 0 where it cannot (too many rows, no cooperative launch, or
// NNGRAPH_RESIDENT_NORM=0).
template <class K>
int resident_chunks(K kernel, int n, int c, int v, int rows) {
  static const bool on = [] {
    const char* e = std::getenv("NNGRAPH_RESIDENT_NORM");
    return !(e && e[0] == '0') && device_attribute<cudaDevAttrCooperativeLaunch>() != 0;
  }();
  static const int per_multiprocessor = [&] {
    int blocks = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, 0);
    return blocks;
  }();
  if (!on || c % v != 0) return 0;
  const int columns = (c / v + kThreads - 1) / kThreads;
  const int chunks = std::min(per_multiprocessor * multiprocessors(), resident_chunks_bound()) / columns;
  const long held = static_cast<long>(chunks) * row_lanes(c, v) * rows;
  return chunks > 0 && held >= n ? chunks : 0;
}

// False where the launch was refused (a capture that takes no cooperative kernels, say), its
// error cleared: the caller then runs the two-stage kernels instead.
template <class K, class A>
bool launch_cooperative(K kernel, dim3 grid, cudaStream_t s, const A& args) {
  cudaLaunchAttribute attribute[1] = {};
  attribute[0].id = cudaLaunchAttributeCooperative;
  attribute[0].val.cooperative = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = dim3(kThreads);
  config.stream = s;
  config.attrs = attribute;
  config.numAttrs = 1;
  if (cudaLaunchKernelEx(&config, kernel, args) == cudaSuccess) return true;
  cudaGetLastError();
  return false;
}

// A grid of `kernel` that holds n rows × c channels (V a thread, `rows` rows), launched with the
// arguments make(chunks) builds; false where none fits or the launch was refused.
template <int V, class K, class Make>
bool launch_resident(K kernel, int rows, int n, int c, cudaStream_t s, const Make& make) {
  const int chunks = resident_chunks(kernel, n, c, V, rows);
  return chunks && launch_cooperative(kernel, dim3((c / V + kThreads - 1) / kThreads, chunks), s, make(chunks));
}

}  // namespace

template <class T, class F>
bool resident_forward(cudaStream_t s, const T* x, const float* gamma, const float* beta, float* stats, float* partial,
                      float epsilon, const T* addend, const F& neuron, T* y, int y_ld, int n, int c) {
  constexpr int V = kPack<T>;
  if (!packed(x) || !packed(y) || !packed(addend) || y_ld % V != 0) return false;
  return launch_resident<V>(resident_forward_kernel<V, T, F>, kForwardRows, n, c, s, [&](int chunks) {
    return ResidentForward<T, F>{x, addend, y, y_ld, n, c, chunks, gamma, beta, stats, partial, epsilon, neuron};
  });
}

template <class T, class P>
bool resident_gradient(cudaStream_t s, const T* x, const T* dy, float* stats, const P& through, float* partial, T* dx,
                       float* dgamma, float* dbeta, int dy_ld, int dx_ld, int n, int c) {
  constexpr int V = kPack<T>;
  if (!packed(x) || !packed(dy) || !packed(dx) || dy_ld % V != 0 || dx_ld % V != 0) return false;
  const float inv_count = static_cast<float>(1.0 / n);
  return launch_resident<V>(resident_gradient_kernel<V, T, P>, kGradientRows, n, c, s, [&](int chunks) {
    return ResidentGradient<T, P>{x,     dy,      dx,     dy_ld,  dx_ld,     n,      c,
                                  chunks, stats, partial, dgamma, dbeta, inv_count, through};
  });
}

using PlainThrough = Through<NoNeuron, NoDerivative>;
using ReLUThrough = Through<ReLUNeuron, ReLUDerivative>;
using AnyThrough = Through<AnyNeuron, AnyDerivative>;
#define INSTANTIATE_NEURON(T, F)                                                                                   \
  template bool resident_forward(cudaStream_t, const T*, const float*, const float*, float*, float*, float, const T*, \
                                 const F&, T*, int, int, int);
#define INSTANTIATE_THROUGH(T, P)                                                                                 \
  template bool resident_gradient(cudaStream_t, const T*, const T*, float*, const P&, float*, T*, float*, float*, int, \
                                  int, int, int);
#define INSTANTIATE(T)                                                                        \
  INSTANTIATE_NEURON(T, NoNeuron)                                                             \
  INSTANTIATE_NEURON(T, ReLUNeuron)                                                           \
  INSTANTIATE_NEURON(T, GELUNeuron)                                                           \
  INSTANTIATE_NEURON(T, AnyNeuron)                                                            \
  INSTANTIATE_THROUGH(T, PlainThrough)                                                        \
  INSTANTIATE_THROUGH(T, ReLUThrough)                                                         \
  INSTANTIATE_THROUGH(T, GELUThrough)                                                         \
  INSTANTIATE_THROUGH(T, AnyThrough)
NNGRAPH_STORAGE_TYPES(INSTANTIATE)
#undef INSTANTIATE
#undef INSTANTIATE_NEURON
#undef INSTANTIATE_THROUGH

}  // namespace nngraph::cuda
