// Pooling gradients: a thread per input pixel gathers from the windows that cover it (from
// their winners where max pooling kept them; for 3 × 3 windows at stride 2, a thread per 2 × 2
// cell of pixels), writes each pixel's share where average windows tile the image or halve
// it, or scatters from each output where windows are disjoint (no atomics, deterministic,
// same first-maximum rule as the cpu backend). A folded neuron gradient multiplies by f'(x)
// (from winners, f'(y)) in the same pass.
// Images lie NCHW or, with Last, NHWC: a thread's neighbours then take the neighbouring
// channels, so reads and writes coalesce.
#include <algorithm>
#include <type_traits>

#include "kernels.cuh"
#include "pool.cuh"

namespace nngraph::cuda {
namespace {

// f(std::bool_constant<last>).
template <class F>
void with_layout(bool last, F&& f) {
  if (last)
    f(std::true_type{});
  else
    f(std::false_type{});
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
      alignas(V) uint8_t wv[V];
      copy_winners<V>(wins + q * step, wv);
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

// Max pooling's windows side by side (stride = window, no padding) from their winners, NHWC
// whole packs: a thread per output pack reads its winners, dy (and y) once and writes every
// pixel of its window, zeros but the winner's (no zero fill first). The thread-per-input
// kernel read each 2×2 window's dy four times and moved 1.7 TB/s on an H200.
template <int V, class T, class I, class D>
__global__ void side_by_side_winners_kernel(PoolGeometry g, const uint8_t* won, size_t won_image, const T* y,
                                            const T* dy, T* dx, I items, int c, int h, int w, int oh, int ow,
                                            int gs, int ys, D derivative) {
  const int packs = c / V;
  NNGRAPH_GRID_LOOP_T(I, i, items) {
    const I pixel = i / packs, image = pixel / (I(oh) * ow);
    const int channel = static_cast<int>(i % packs) * V, q = static_cast<int>(pixel % (I(oh) * ow));
    const int oy = q / ow, ox = q % ow;
    alignas(V) uint8_t wv[V];
    copy_winners<V>(won + image * won_image + I(q) * c + channel, wv);
    float gv[V], yv[V];
    load_values<V>(dy + pixel * gs + channel, gv);
    if constexpr (!std::is_same_v<D, NoDerivative>) {
      load_values<V>(y + pixel * ys + channel, yv);
#pragma unroll
      for (int k = 0; k < V; ++k) gv[k] *= derivative(yv[k]);
    }
    // The last row and column of windows also zero the image's uncovered edge.
    const int y0 = oy * g.kh, x0 = ox * g.kw, y1 = oy == oh - 1 ? h : y0 + g.kh, x1 = ox == ow - 1 ? w : x0 + g.kw;
    for (int iy = y0; iy < y1; ++iy)
      for (int ix = x0; ix < x1; ++ix) {
        const int tap = iy - y0 < g.kh && ix - x0 < g.kw ? (iy - y0) * g.kw + ix - x0 : -1;
        float out[V];
#pragma unroll
        for (int k = 0; k < V; ++k) out[k] = wv[k] == tap ? gv[k] : 0.f;
        store_values<V>(dx + ((image * h + iy) * w + ix) * c + channel, out);
      }
  }
}

// Max pooling's undilated K × K windows at stride S < K (Inception's and ResNet's 3 × 3 at 2),
// NHWC whole packs, from their winners: a thread per S × S cell of input pixels (padded rows
// cy·S to cy·S + S − 1, likewise columns) and pack of V channels reads the winners, dy (and
// y) of the (R + 1)² windows that reach into its cell, once each, and writes the cell's
// pixels. A thread per pixel read each window's winners nine times and divided per pixel:
// Inception's stem pooling gradients moved 1.25 TB/s on an H100.
template <int K, int S, int V, class T, class I, class D>
__global__ void cell_winners_kernel(PoolGeometry g, const uint8_t* won, size_t won_image, const T* y, const T* dy,
                                    T* dx, I items, int c, int h, int w, int oh, int ow, int ch, int cw, int gs,
                                    int ys, D derivative) {
  constexpr int R = (K - 1) / S;  // windows before a cell's own that reach into it, each way
  const int packs = c / V;
  NNGRAPH_GRID_LOOP_T(I, i, items) {
    const I cell = i / packs, image = cell / (I(ch) * cw);
    const int channel = static_cast<int>(i % packs) * V;
    const int cx = static_cast<int>(cell % cw), cy = static_cast<int>(cell / cw % ch);
    float acc[S * S][V];
#pragma unroll
    for (int p = 0; p < S * S; ++p)
#pragma unroll
      for (int k = 0; k < V; ++k) acc[p][k] = 0.f;
#pragma unroll
    for (int a = 0; a <= R; ++a) {
      const int oy = cy - R + a;
      if (oy < 0 || oy >= oh) continue;
#pragma unroll
      for (int b = 0; b <= R; ++b) {
        const int ox = cx - R + b;
        if (ox < 0 || ox >= ow) continue;
        const I q = (image * oh + oy) * ow + ox;
        alignas(V) uint8_t wv[V];
        copy_winners<V>(won + image * won_image + I(oy * ow + ox) * c + channel, wv);
        float gv[V];
        load_values<V>(dy + q * gs + channel, gv);
        if constexpr (!std::is_same_v<D, NoDerivative>) {
          float yv[V];
          load_values<V>(y + q * ys + channel, yv);
#pragma unroll
          for (int k = 0; k < V; ++k) gv[k] *= derivative(yv[k]);
        }
#pragma unroll
        for (int k = 0; k < V; ++k) {
          // The winner's row and column in the cell (tap (ty, tx) lies at padded row oy·S + ty).
          const int ty = wv[k] / K, ly = ty - (R - a) * S, lx = wv[k] - ty * K - (R - b) * S;
#pragma unroll
          for (int p = 0; p < S * S; ++p) acc[p][k] += ly == p / S && lx == p % S ? gv[k] : 0.f;
        }
      }
    }
#pragma unroll
    for (int p = 0; p < S * S; ++p) {
      const int iy = cy * S - g.pad_top + p / S, ix = cx * S - g.pad_left + p % S;
      if (iy >= 0 && iy < h && ix >= 0 && ix < w)
        store_values<V>(dx + ((image * h + iy) * w + ix) * c + channel, acc[p]);
    }
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

// 2×2 average windows, stride 2, no padding: each input pixel lies in one window, so a thread
// per output writes its four pixels (no gather, no zero fill but for an uncovered odd edge).
// Max pooling's halving windows keep their winners.
template <bool Last, class T, class I, class D>
__global__ void halve_gradient_kernel(const T* in, const T* dy, T* dx, I total, int c, int h, int w, int oh, int ow,
                                      D derivative) {
  constexpr bool read = !std::is_same_v<D, NoDerivative>;  // only the derivative needs x
  const int step = pixel_step<Last>(c);
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const Site<I> o = site_of<Last>(i, c, oh, ow);
    const I o0 = plane_start<Last>(o.plane, c, h * w) + I(2 * o.y * w + 2 * o.x) * step, o1 = o0 + I(w) * step;
    const float g = 0.25f * ld(dy[i]);
    const float a = read ? ld(in[o0]) : 0.f, b = read ? ld(in[o0 + step]) : 0.f;
    const float e = read ? ld(in[o1]) : 0.f, d = read ? ld(in[o1 + step]) : 0.f;
    dx[o0] = st<T>(g * derivative(a));
    dx[o0 + step] = st<T>(g * derivative(b));
    dx[o1] = st<T>(g * derivative(e));
    dx[o1 + step] = st<T>(g * derivative(d));
  }
}

}  // namespace

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
      const bool side_by_side = g.side_by_side(h, w, oh, ow);
      constexpr int K = 3, S = 2;  // the cells' one instance: Inception's and ResNet's windows
      const bool cells = g.kh == K && g.kw == K && g.sy == S && g.sx == S && g.dil_y == 1 && g.dil_x == 1;
      const int ch = (h + g.pad_top + S - 1) / S, cw = (w + g.pad_left + S - 1) / S;  // S × S cells, padded image
      const size_t cell_items = static_cast<size_t>(n) * ch * cw * (c / kPack<T>);
      with_derivative(nd, [&](auto derivative) {
        with_index_type(largest, [&](auto i) {
          using I = decltype(i);
          if (whole && cells)
            cell_winners_kernel<K, S, kPack<T>><<<blocks_for(cell_items), kThreads, 0, s>>>(
                g, won, won_image, y, dy, dx, I(cell_items), c, h, w, oh, ow, ch, cw, gs, ys, derivative);
          else if (whole && side_by_side)
            side_by_side_winners_kernel<kPack<T>><<<blocks_for(outputs / kPack<T>), kThreads, 0, s>>>(
                g, won, won_image, y, dy, dx, I(outputs / kPack<T>), c, h, w, oh, ow, gs, ys, derivative);
          else if (whole)
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
    if (g.halves() && !is_max) {
      if (h != 2 * oh || w != 2 * ow) cudaMemsetAsync(dx, 0, inputs * sizeof(T), s);
      with_derivative(nd, [&](auto derivative) {
        with_index_type(largest, [&](auto i) {
          halve_gradient_kernel<Last><<<blocks_for(outputs), kThreads, 0, s>>>(
              in, dy, dx, decltype(i)(outputs), c, h, w, oh, ow, derivative);
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

#define INSTANTIATE(T)                                                                                              \
  template void pooling_gradient(cudaStream_t, PoolingMode, const PoolGeometry&, const T*, const T*, const uint8_t*, \
                                 size_t, const T*, T*, int, int, int, int, int, int, bool, int, int,                \
                                 const NeuronDescriptor&);
NNGRAPH_STORAGE_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace nngraph::cuda
