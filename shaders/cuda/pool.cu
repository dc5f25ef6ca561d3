// Pooling: one thread per output pixel forward (a block per output for the many taps of
// global pooling); the gradient gathers, one thread per input pixel, from the windows that
// cover it (from their winners where max pooling kept them), writes each pixel's share where
// average windows tile the image, or scatters from each output where windows are disjoint (no
// atomics, deterministic, same first-maximum rule as the cpu backend). A folded neuron
// gradient multiplies by f'(x) in the same pass.
// Images lie NCHW or, with Last, NHWC: a thread's neighbours then take the neighbouring
// channels, so reads and writes coalesce.
#include <algorithm>
#include <type_traits>

#include "backends/geometry.h"
#include "common.cuh"
#include "kernels.cuh"
#include "ops/pool.h"

namespace nngraph::cuda {
namespace {

// Element i of a batch of c × h × w images: its plane (image·c + channel) and pixel.
template <class I>
struct Site {
  I plane;
  int y, x;
};
template <bool Last, class I>
__device__ inline Site<I> site_of(I i, int c, int h, int w) {
  const I pixel = Last ? i / c : i;
  const int x = static_cast<int>(pixel % w), y = static_cast<int>((pixel / w) % h);
  const I plane = Last ? (pixel / (I(h) * w)) * c + i % c : i / (I(h) * w);
  return {plane, y, x};
}
// Where plane `plane` of images of hw pixels starts; its pixels lie pixel_step<Last>(c) apart.
template <bool Last, class I>
__device__ inline I plane_start(I plane, int c, int hw) {
  return Last ? (plane / c) * hw * c + plane % c : plane * hw;
}
template <bool Last>
__device__ inline int pixel_step(int c) {
  return Last ? c : 1;
}

// f(std::bool_constant<last>).
template <class F>
void with_layout(bool last, F&& f) {
  if (last)
    f(std::true_type{});
  else
    f(std::false_type{});
}

// f(index) for each in-bounds pixel of output (oy, ox)'s window, in scan order; returns the count.
// Unrolled along rows, so that a large window's reads are in flight together.
template <class F>
__device__ inline int each_tap(const PoolGeometry& g, int oy, int ox, int h, int w, F f) {
  const math::Taps ty = math::window_taps(oy, g.sy, g.pad_top, g.kh, g.dil_y, h);
  const math::Taps tx = math::window_taps(ox, g.sx, g.pad_left, g.kw, g.dil_x, w);
  for (int i = 0, iy = ty.first; i < ty.count; ++i, iy += g.dil_y)
#pragma unroll 4
    for (int j = 0; j < tx.count; ++j) f(iy * w + tx.first + j * g.dil_x);
  return g.count_include_pad ? g.kh * g.kw : ty.count * tx.count;
}

// The first maximum of output (oy, ox)'s window, as a pixel index into the plane (its
// pixels `step` apart).
template <class T>
__device__ inline int window_argmax(const PoolGeometry& g, const T* x, int step, int oy, int ox, int h, int w) {
  int best = -1;
  each_tap(g, oy, ox, h, w, [&](int p) {
    if (best < 0 || ld(x[p * step]) > ld(x[best * step])) best = p;
  });
  return best;
}

// Where output element e (of images of c·oh·ow values) keeps its winner.
template <class I>
__device__ inline uint8_t* winner_at(uint8_t* won, size_t won_image, I e, size_t per_image) {
  const size_t at = static_cast<size_t>(e);
  return won + at / per_image * won_image + at % per_image;
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
    const int count = each_tap(g, o.y, o.x, h, w, [&](int p) {
      const float v = ld(x[p]);
      if (is_max && (best < 0 || v > acc)) best = p;
      acc = is_max ? fmaxf(acc, v) : acc + v;
    });
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
    int best[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = is_max ? -INFINITY : 0.f, best[k] = -1;
    const int count = each_tap(g, y, x, h, w, [&](int p) {
      float v[V];
      load_values<V>(image + I(p) * c, v);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        if (is_max && (best[k] < 0 || v[k] > acc[k])) best[k] = p;
        acc[k] = is_max ? fmaxf(acc[k], v[k]) : acc[k] + v[k];
      }
    });
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = is_max ? acc[k] : acc[k] / static_cast<float>(count);
    store_values<V>(out + pixel * ys + static_cast<int>(i % packs) * V, acc);
    if (won) {
      uint8_t* at = winner_at(won, won_image, i * V, size_t(c) * oh * ow);
#pragma unroll
      for (int k = 0; k < V; ++k) at[k] = static_cast<uint8_t>(g.tap(best[k], w, y, x));
    }
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

// f(oy, ox, tap) for each output whose window holds input pixel (iy, ix) as its tap ky·kw + kx:
// tap k of output o lies at o·s − pad + k·d. Undilated windows name their range directly
// (o·s ≤ i + pad < o·s + k), with no division per tap.
template <class F>
__device__ inline void each_covering_window(const PoolGeometry& g, int iy, int ix, int oh, int ow, F f) {
  if (g.dil_y == 1 && g.dil_x == 1) {
    const int ty = iy + g.pad_top, tx = ix + g.pad_left;
    const int y1 = min(oh - 1, ty / g.sy), x1 = min(ow - 1, tx / g.sx);
    for (int oy = max(0, (ty - g.kh + g.sy) / g.sy); oy <= y1; ++oy)
      for (int ox = max(0, (tx - g.kw + g.sx) / g.sx); ox <= x1; ++ox)
        f(oy, ox, (ty - oy * g.sy) * g.kw + tx - ox * g.sx);
    return;
  }
  for (int ky = 0; ky < g.kh; ++ky) {
    const int ty = iy + g.pad_top - ky * g.dil_y, oy = ty / g.sy;
    if (ty < 0 || ty % g.sy || oy >= oh) continue;
    for (int kx = 0; kx < g.kw; ++kx) {
      const int tx = ix + g.pad_left - kx * g.dil_x, ox = tx / g.sx;
      if (tx < 0 || tx % g.sx || ox >= ow) continue;
      f(oy, ox, ky * g.kw + kx);
    }
  }
}

// V winner bytes in one load (V-aligned: channels in whole packs, images 16-byte blocks apart).
template <int V>
__device__ inline void load_winners(const uint8_t* p, uint8_t* out) {
  if constexpr (V == 8) {
    *reinterpret_cast<uint2*>(out) = *reinterpret_cast<const uint2*>(p);
  } else if constexpr (V == 4) {
    *reinterpret_cast<uint32_t*>(out) = *reinterpret_cast<const uint32_t*>(p);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = p[k];
  }
}

// Max pooling from its winners: a thread per input pixel and pack of V channels (NHWC; 1
// otherwise) adds the dy (⊙ f'(y), the winner's value, with a folded neuron gradient) of each
// covering window whose winner it is, reading dy and y only for windows it won. x is not read;
// a window's taps are not read again. NHWC dy and y pixels lie gs and ys values apart (more
// than c: a concatenation's part, read in place); the winners are dense.
template <int V, bool Last, class T, class I, class D>
__global__ void winners_gradient_kernel(PoolGeometry g, const uint8_t* won, size_t won_image, const T* y, const T* dy,
                                        T* dx, I items, int c, int h, int w, int oh, int ow, int gs, int ys,
                                        D derivative) {
  const I plane = I(oh) * ow;
  const int step = pixel_step<Last>(c);
  NNGRAPH_GRID_LOOP_T(I, i, items) {
    const I e = i * V;
    const Site<I> at = site_of<Last>(e, c, h, w);
    const I image = at.plane / c;
    const int channel = static_cast<int>(at.plane % c);
    const uint8_t* wins = won + image * won_image + (Last ? channel : channel * plane);
    // Where the image's values of this pack start in dy and y, and their pixels' spacing.
    const I gy0 = Last ? image * plane * gs + channel : at.plane * plane, y0 = Last ? image * plane * ys + channel : gy0;
    const int gstep = Last ? gs : 1, ystep = Last ? ys : 1;
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0.f;
    each_covering_window(g, at.y, at.x, oh, ow, [&](int oy, int ox, int tap) {
      const int q = oy * ow + ox;
      uint8_t wv[V];
      load_winners<V>(wins + q * step, wv);
      bool any = false;
#pragma unroll
      for (int k = 0; k < V; ++k) any = any || wv[k] == tap;
      if (!any) return;
      float gv[V], yv[V];
      load_values<V>(dy + gy0 + I(q) * gstep, gv);
      if constexpr (!std::is_same_v<D, NoDerivative>) load_values<V>(y + y0 + I(q) * ystep, yv);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        if (wv[k] != tap) continue;
        if constexpr (std::is_same_v<D, NoDerivative>)
          acc[k] += gv[k];
        else
          acc[k] += gv[k] * derivative(yv[k]);
      }
    });
    store_values<V>(dx + e, acc);
  }
}

// Overlapping windows: a thread per input pixel gathers from the windows holding it.
template <bool Last, class T, class I>
__global__ void pool_gradient_kernel(bool is_max, PoolGeometry g, const T* in, const T* dy, T* dx, I total, int c,
                                     int h, int w, int oh, int ow, AnyDerivative derivative) {
  const int step = pixel_step<Last>(c);
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const Site<I> at = site_of<Last>(i, c, h, w);
    const int ix = at.x, iy = at.y;
    const T* x = in + plane_start<Last>(at.plane, c, h * w);
    const T* gy = dy + plane_start<Last>(at.plane, c, oh * ow);
    float acc = 0.f;
    each_covering_window(g, iy, ix, oh, ow, [&](int oy, int ox, int) {
      if (is_max) {
        if (window_argmax(g, x, step, oy, ox, h, w) == iy * w + ix) acc += ld(gy[(oy * ow + ox) * step]);
      } else {
        const int count = each_tap(g, oy, ox, h, w, [](int) {});
        acc += ld(gy[(oy * ow + ox) * step]) / static_cast<float>(count);
      }
    });
    dx[i] = st<T>(acc * derivative(ld(x[(iy * w + ix) * step])));
  }
}

// NHWC overlapping windows, whole packs: a thread per input pixel and pack of V channels
// gathers from the windows holding it, each window's first maximum found again per channel
// from packed loads (the scalar kernel's loads per value made ResNet's 3×3 stride-2 max
// pooling gradient six times PyTorch's).
template <int V, class T, class I, class D>
__global__ void gather_gradient_packs_kernel(bool is_max, PoolGeometry g, const T* in, const T* dy, T* dx, I items,
                                             int c, int h, int w, int oh, int ow, D derivative) {
  const int packs = c / V;
  NNGRAPH_GRID_LOOP_T(I, i, items) {
    const I pixel = i / packs;
    const int ix = static_cast<int>(pixel % w), iy = static_cast<int>(pixel / w % h), me = iy * w + ix;
    const I image = pixel / (I(h) * w), channel = static_cast<int>(i % packs) * V;
    const T* x = in + image * (I(h) * w * c) + channel;
    const T* gy = dy + image * (I(oh) * ow * c) + channel;
    float acc[V], mine[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0.f, mine[k] = 0.f;
    if (is_max || !std::is_same_v<D, NoDerivative>) load_values<V>(x + I(me) * c, mine);
    each_covering_window(g, iy, ix, oh, ow, [&](int oy, int ox, int) {
      float gv[V];
      load_values<V>(gy + I(oy * ow + ox) * c, gv);
      if (is_max) {
        float best[V];
        int at[V];
#pragma unroll
        for (int k = 0; k < V; ++k) at[k] = -1, best[k] = 0.f;
        each_tap(g, oy, ox, h, w, [&](int p) {
          float v[V];
          load_values<V>(x + I(p) * c, v);
#pragma unroll
          for (int k = 0; k < V; ++k)
            if (at[k] < 0 || v[k] > best[k]) best[k] = v[k], at[k] = p;
        });
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] += at[k] == me ? gv[k] : 0.f;
      } else {
        const float share = 1.f / static_cast<float>(each_tap(g, oy, ox, h, w, [](int) {}));
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] += gv[k] * share;
      }
    });
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] *= derivative(mine[k]);
    store_values<V>(dx + i * V, acc);
  }
}

// Disjoint windows (global pooling among them): dx is zero but where a thread per output
// writes its window's share, so large windows are read once, not once per pixel.
template <bool Last, class T, class I>
__global__ void disjoint_gradient_kernel(bool is_max, PoolGeometry g, const T* in, const T* dy, T* dx, I total, int c,
                                         int h, int w, int oh, int ow, AnyDerivative derivative) {
  const int step = pixel_step<Last>(c);
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const Site<I> o = site_of<Last>(i, c, oh, ow);
    const I start = plane_start<Last>(o.plane, c, h * w);
    const T* x = in + start;
    T* gx = dx + start;
    if (is_max) {
      const int best = window_argmax(g, x, step, o.y, o.x, h, w);
      gx[best * step] = st<T>(ld(dy[i]) * derivative(ld(x[best * step])));
    } else {
      const float share = ld(dy[i]) / static_cast<float>(each_tap(g, o.y, o.x, h, w, [](int) {}));
      each_tap(g, o.y, o.x, h, w, [&](int p) { gx[p * step] = st<T>(share * derivative(ld(x[p * step]))); });
    }
  }
}

// Average windows that tile the images: each input value lies in one window, so a thread per
// pack of V values (V channels of a pixel in NHWC) writes its share of that window's dy, all
// in parallel and with no zero fill.
template <int V, bool Last, class T, class I, class D>
__global__ void tile_average_gradient_kernel(const T* in, const T* dy, T* dx, I packs, int c, int h, int w, int kh,
                                             int kw, int oh, int ow, D derivative) {
  const float share = 1.f / static_cast<float>(kh * kw);
  NNGRAPH_GRID_LOOP_T(I, i, packs) {
    const I e = i * V;
    const Site<I> at = site_of<Last>(e, c, h, w);
    const I o = plane_start<Last>(at.plane, c, oh * ow) + I((at.y / kh) * ow + at.x / kw) * pixel_step<Last>(c);
    float g[V], x[V];
    load_values<V>(dy + o, g);
    if constexpr (!std::is_same_v<D, NoDerivative>) load_values<V>(in + e, x);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      g[k] *= share;
      if constexpr (!std::is_same_v<D, NoDerivative>) g[k] *= derivative(x[k]);
    }
    store_values<V>(dx + e, g);
  }
}

// 2×2 windows, stride 2, no padding: each input pixel lies in one window, so a thread per
// output writes its four pixels (no gather, no zero fill but for an uncovered odd edge).
template <bool Last, class T, class I, class D>
__global__ void halve_gradient_kernel(bool is_max, const T* in, const T* dy, T* dx, I total, int c, int h, int w,
                                      int oh, int ow, D derivative) {
  const int step = pixel_step<Last>(c);
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const Site<I> o = site_of<Last>(i, c, oh, ow);
    const I o0 = plane_start<Last>(o.plane, c, h * w) + I(2 * o.y * w + 2 * o.x) * step, o1 = o0 + I(w) * step;
    const float g = ld(dy[i]);
    const bool read = is_max || !std::is_same_v<D, NoDerivative>;  // average alone needs no x
    const float a = read ? ld(in[o0]) : 0.f, b = read ? ld(in[o0 + step]) : 0.f;
    const float e = read ? ld(in[o1]) : 0.f, d = read ? ld(in[o1 + step]) : 0.f;
    float ga = 0.25f * g, gb = ga, ge = ga, gd = ga;
    if (is_max) {  // the first maximum in scan order, as everywhere
      const float m = fmaxf(fmaxf(a, b), fmaxf(e, d));
      const bool ta = a == m, tb = !ta && b == m, te = !ta && !tb && e == m;
      ga = ta ? g : 0.f;
      gb = tb ? g : 0.f;
      ge = te ? g : 0.f;
      gd = (ta || tb || te) ? 0.f : g;
    }
    dx[o0] = st<T>(ga * derivative(a));
    dx[o0 + step] = st<T>(gb * derivative(b));
    dx[o1] = st<T>(ge * derivative(e));
    dx[o1 + step] = st<T>(gd * derivative(d));
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
    if (!last) {
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

template <class T>
void pooling_gradient(cudaStream_t s, PoolingMode mode, const PoolGeometry& g, const T* in, const T* dy,
                      const uint8_t* won, size_t won_image, const T* y, T* dx, int n, int c, int h, int w, int oh,
                      int ow, bool last, int gs, int ys, const NeuronDescriptor& nd) {
  const size_t inputs = static_cast<size_t>(n) * c * h * w, outputs = static_cast<size_t>(n) * c * oh * ow;
  const size_t largest =
      std::max({inputs, outputs, static_cast<size_t>(n) * oh * ow * (last ? std::max(gs, ys) : c)});
  const bool is_max = mode == PoolingMode::Max;
  with_layout(last, [&](auto layout) {
    constexpr bool Last = decltype(layout)::value;
    if (won) {
      const bool whole = Last && c % kPack<T> == 0 && gs % kPack<T> == 0 && ys % kPack<T> == 0 && packed(dy) &&
                         packed(dx) && packed(y);
      with_derivative(nd, [&](auto derivative) {
        with_index_type(largest, [&](auto i) {
          using I = decltype(i);
          if (whole)
            winners_gradient_kernel<kPack<T>, Last><<<blocks_for(inputs / kPack<T>), kThreads, 0, s>>>(
                g, won, won_image, y, dy, dx, I(inputs / kPack<T>), c, h, w, oh, ow, gs, ys, derivative);
          else
            winners_gradient_kernel<1, Last><<<blocks_for(inputs), kThreads, 0, s>>>(
                g, won, won_image, y, dy, dx, I(inputs), c, h, w, oh, ow, gs, ys, derivative);
        });
      });
      return;
    }
    const bool whole = Last && c % kPack<T> == 0 && packed(in) && packed(dy) && packed(dx);  // 16-byte packs
    if (g.halves()) {
      if (h != 2 * oh || w != 2 * ow) cudaMemsetAsync(dx, 0, inputs * sizeof(T), s);
      with_derivative(nd, [&](auto derivative) {
        with_index_type(largest, [&](auto i) {
          halve_gradient_kernel<Last><<<blocks_for(outputs), kThreads, 0, s>>>(
              is_max, in, dy, dx, decltype(i)(outputs), c, h, w, oh, ow, derivative);
        });
      });
    } else if (!is_max && g.tiles(h, w)) {
      with_derivative(nd, [&](auto derivative) {
        with_index_type(largest, [&](auto i) {
          using I = decltype(i);
          if (whole)
            tile_average_gradient_kernel<kPack<T>, Last><<<blocks_for(inputs / kPack<T>), kThreads, 0, s>>>(
                in, dy, dx, I(inputs / kPack<T>), c, h, w, g.kh, g.kw, oh, ow, derivative);
          else
            tile_average_gradient_kernel<1, Last><<<blocks_for(inputs), kThreads, 0, s>>>(
                in, dy, dx, I(inputs), c, h, w, g.kh, g.kw, oh, ow, derivative);
        });
      });
    } else if (g.disjoint()) {
      cudaMemsetAsync(dx, 0, inputs * sizeof(T), s);
      with_index_type(largest, [&](auto i) {
        disjoint_gradient_kernel<Last><<<blocks_for(outputs), kThreads, 0, s>>>(
            is_max, g, in, dy, dx, decltype(i)(outputs), c, h, w, oh, ow, AnyDerivative{nd});
      });
    } else if (whole) {
      with_derivative(nd, [&](auto derivative) {
        with_index_type(largest, [&](auto i) {
          gather_gradient_packs_kernel<kPack<T>><<<blocks_for(inputs / kPack<T>), kThreads, 0, s>>>(
              is_max, g, in, dy, dx, decltype(i)(inputs / kPack<T>), c, h, w, oh, ow, derivative);
        });
      });
    } else {
      with_index_type(largest, [&](auto i) {
        pool_gradient_kernel<Last><<<blocks_for(inputs), kThreads, 0, s>>>(
            is_max, g, in, dy, dx, decltype(i)(inputs), c, h, w, oh, ow, AnyDerivative{nd});
      });
    }
  });
  check_launch("pooling_gradient");
}

#define INSTANTIATE(T)                                                                                             \
  template void pooling(cudaStream_t, PoolingMode, const PoolGeometry&, const T*, T*, int, int, int, int, int, int, \
                        bool, int, uint8_t*, size_t);                                                              \
  template void pooling_gradient(cudaStream_t, PoolingMode, const PoolGeometry&, const T*, const T*, const uint8_t*, \
                                 size_t, const T*, T*, int, int, int, int, int, int, bool, int, int,                \
                                 const NeuronDescriptor&);
NNGRAPH_STORAGE_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace nngraph::cuda
