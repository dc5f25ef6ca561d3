// Pooling forward: one thread per output pixel (and pack of channels in NHWC), a block per
// output for the many taps of global pooling; max pooling writes each window's winner where
// asked (a training state its gradient reads, pool_gradient.cu).
#include <algorithm>
#include <type_traits>

#include "kernels.cuh"
#include "pool.cuh"

namespace nngraph::cuda {
namespace {

// Where output element e (of images of c·oh·ow values) keeps its winner.
template <class I>
__device__ inline uint8_t* winner_at(uint8_t* won, size_t won_image, I e, size_t per_image) {
  const size_t at = static_cast<size_t>(e);
  return won + at / per_image * won_image + at % per_image;
}

// One tap's value v into a window's running maximum (with its first maximum's tap, in scan
// order) or sum.
__device__ inline void take(bool is_max, float v, int tap, float& acc, int& best) {
  if (is_max && (best < 0 || v > acc)) best = tap;
  acc = is_max ? fmaxf(acc, v) : acc + v;
}

// A pack of V results at y, and their winners' taps at won where kept.
template <int V, class T>
__device__ inline void store_pack(T* y, const float* acc, const int* best, uint8_t* won) {
  store_values<V>(y, acc);
  if (!won) return;
  alignas(V) uint8_t taps[V];
#pragma unroll
  for (int k = 0; k < V; ++k) taps[k] = static_cast<uint8_t>(best[k]);
  copy_winners<V>(taps, won);
}

// NCHW: a thread per output pixel of a plane; max pooling's first maximum in scan order is
// its winner.
template <class T, class I>
__global__ void pool_kernel(bool is_max, PoolGeometry g, const T* in, T* out, I total, int c, int h, int w, int oh,
                            int ow, uint8_t* won, size_t won_image) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const Site<I> o = site_of<false>(i, c, oh, ow);
    const T* x = in + plane_start<false>(o.plane, c, h * w);
    float acc = is_max ? -INFINITY : 0.f;
    int best = -1;
    const int count = each_tap(g, o.y, o.x, h, w, [&](int p) { take(is_max, ld(x[p]), p, acc, best); });
    out[i] = st<T>(is_max ? acc : acc / static_cast<float>(count));
    if (won) *winner_at(won, won_image, i, size_t(c) * oh * ow) = static_cast<uint8_t>(g.tap(best, w, o.y, o.x));
  }
}

// NHWC: a thread per output pixel and pack of V channels (16 bytes where the channels are
// whole packs, else 1), each tap one load of V values. Output pixels lie ys values apart
// (more than c: channels of a concatenation, made in place).
template <int V, class T, class I>
__global__ void pool_packs_kernel(bool is_max, PoolGeometry g, const T* in, T* out, I items, int c, int h, int w,
                                  int oh, int ow, int ys, uint8_t* won, size_t won_image) {
  const int packs = c / V;
  NNGRAPH_GRID_LOOP_T(I, i, items) {
    const I pixel = i / packs;
    const int x = static_cast<int>(pixel % ow), y = static_cast<int>(pixel / ow % oh);
    const T* image = in + (pixel / (I(oh) * ow)) * (I(h) * w * c) + static_cast<int>(i % packs) * V;
    float acc[V];
    int best[V];  // taps
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = is_max ? -INFINITY : 0.f, best[k] = -1;
    const int count = each_window_tap(g, y, x, h, w, [&](int p, int tap) {
      float v[V];
      load_values<V>(image + I(p) * c, v);
#pragma unroll
      for (int k = 0; k < V; ++k) take(is_max, v[k], tap, acc[k], best[k]);
    });
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = is_max ? acc[k] : acc[k] / static_cast<float>(count);
    store_pack<V>(out + pixel * ys + static_cast<int>(i % packs) * V, acc, best,
                  won ? winner_at(won, won_image, i * V, size_t(c) * oh * ow) : nullptr);
  }
}

// NHWC K × K windows side by side (stride K, no padding; the common down-sampling): as the
// packs kernel, without bounds, every tap's load issued before the first is used. The input is
// read once, so it streams past the second-level cache and leaves it to y, which the next
// pass reads.
template <int K, int V, class T, class I>
__global__ void pool_side_by_side_kernel(bool is_max, const T* in, T* out, I items, int c, int h, int w, int oh,
                                         int ow, int ys, uint8_t* won, size_t won_image) {
  const int packs = c / V;
  NNGRAPH_GRID_LOOP_T(I, i, items) {
    const I pixel = i / packs;
    const int x = static_cast<int>(pixel % ow), y = static_cast<int>(pixel / ow % oh);
    const T* corner = in + (pixel / (I(oh) * ow)) * (I(h) * w * c) + (I(y) * K * w + I(x) * K) * c +
                      static_cast<int>(i % packs) * V;
    Loaded<V, T> taps[K * K];
#pragma unroll
    for (int k = 0; k < K * K; ++k) taps[k].load_streaming(corner + (I(k / K) * w + k % K) * c);
    float acc[V];
    int best[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      acc[v] = is_max ? -INFINITY : 0.f, best[v] = -1;
#pragma unroll
      for (int k = 0; k < K * K; ++k) take(is_max, taps[k][v], k, acc[v], best[v]);
      if (!is_max) acc[v] /= static_cast<float>(K * K);
    }
    store_pack<V>(out + pixel * ys + static_cast<int>(i % packs) * V, acc, best,
                  won ? winner_at(won, won_image, i * V, size_t(c) * oh * ow) : nullptr);
  }
}

// NHWC windows that tile the images, of many taps each (global pooling): a block per output
// pixel, its threads splitting the window's taps for each pack of V channels, then summing
// their partials in shared memory. A thread per output pack would leave most of the GPU idle
// (global pooling has a handful of outputs per image).
template <int V, class T>
__global__ void tile_pool_kernel(bool is_max, const T* in, T* out, int c, int h, int w, int kh, int kw, int oh,
                                 int ow, int ys) {
  __shared__ float partial[kThreads][V];
  const int packs = c / V, per = min(packs, kThreads), groups = kThreads / per, taps = kh * kw;
  const int o = blockIdx.x, ox = o % ow, oy = o / ow % oh, t = threadIdx.x, group = t / per;
  const T* image = in + static_cast<size_t>(o / (oh * ow)) * h * w * c;
  for (int first = 0; first < packs; first += per) {
    const int pack = first + t % per;
    const bool active = group < groups && pack < packs;
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = is_max ? -INFINITY : 0.f;
    for (int tap = group; active && tap < taps; tap += groups) {
      const int y = oy * kh + tap / kw, x = ox * kw + tap % kw;
      float v[V];
      load_values<V>(image + (static_cast<size_t>(y) * w + x) * c + pack * V, v);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = is_max ? fmaxf(acc[k], v[k]) : acc[k] + v[k];
    }
#pragma unroll
    for (int k = 0; k < V; ++k) partial[t][k] = acc[k];
    __syncthreads();
    if (active && group == 0) {
      for (int g = 1; g < groups; ++g)
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float v = partial[g * per + t][k];
          acc[k] = is_max ? fmaxf(acc[k], v) : acc[k] + v;
        }
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = is_max ? acc[k] : acc[k] / static_cast<float>(taps);
      store_values<V>(out + static_cast<size_t>(o) * ys + pack * V, acc);
    }
    __syncthreads();
  }
}

}  // namespace

template <class T>
void pooling(cudaStream_t s, PoolingMode mode, const PoolGeometry& g, const T* in, T* out, int n, int c, int h, int w,
             int oh, int ow, bool last, int ys, uint8_t* won, size_t won_image) {
  const size_t total = static_cast<size_t>(n) * c * oh * ow, inputs = static_cast<size_t>(n) * c * h * w;
  const size_t spread = static_cast<size_t>(n) * oh * ow * (last ? ys : c);  // past y's last value
  const bool is_max = mode == PoolingMode::Max;
  with_index_type(std::max({total, inputs, spread}), [&](auto i) {
    using I = decltype(i);
    auto packs = [&](auto v) {
      constexpr int V = decltype(v)::value;
      pool_packs_kernel<V><<<blocks_for(total / V), kThreads, 0, s>>>(is_max, g, in, out, I(total / V), c, h, w, oh,
                                                                      ow, ys, won, won_image);
    };
    const bool whole = c % kPack<T> == 0 && ys % kPack<T> == 0 && packed(in) && packed(out);
    auto side = [&](auto k) {
      constexpr int K = decltype(k)::value, V = kPack<T>;
      pool_side_by_side_kernel<K, V><<<blocks_for(total / V), kThreads, 0, s>>>(is_max, in, out, I(total / V), c, h,
                                                                                w, oh, ow, ys, won, won_image);
    };
    const bool small_sides = last && whole && g.side_by_side(h, w, oh, ow) && g.kh == g.kw;
    if (small_sides && g.kh == 2) {
      side(std::integral_constant<int, 2>{});
    } else if (small_sides && g.kh == 3) {
      side(std::integral_constant<int, 3>{});
    } else if (!last) {
      pool_kernel<<<blocks_for(total), kThreads, 0, s>>>(is_max, g, in, out, I(total), c, h, w, oh, ow, won,
                                                          won_image);
    } else if (g.tiles(h, w) && g.kh * g.kw >= 16 && !won) {
      const unsigned outputs = static_cast<unsigned>(static_cast<size_t>(n) * oh * ow);
      if (whole)
        tile_pool_kernel<kPack<T>><<<outputs, kThreads, 0, s>>>(is_max, in, out, c, h, w, g.kh, g.kw, oh, ow, ys);
      else
        tile_pool_kernel<1><<<outputs, kThreads, 0, s>>>(is_max, in, out, c, h, w, g.kh, g.kw, oh, ow, ys);
    } else if (whole) {
      packs(std::integral_constant<int, kPack<T>>{});
    } else {
      packs(std::integral_constant<int, 1>{});
    }
  });
  check_launch("pooling");
}

#define INSTANTIATE(T)                                                                                             \
  template void pooling(cudaStream_t, PoolingMode, const PoolGeometry&, const T*, T*, int, int, int, int, int, int, \
                        bool, int, uint8_t*, size_t);
NNGRAPH_STORAGE_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace nngraph::cuda
