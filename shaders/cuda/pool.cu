// Pooling: one thread per output pixel forward; the gradient gathers, one thread per input
// pixel, from the windows that cover it (no atomics, deterministic, same first-maximum rule
// as the cpu backend). A folded neuron gradient multiplies by f'(x) in the same pass.
#include <type_traits>

#include "common.cuh"
#include "kernels.cuh"
#include "ops/pool.h"

namespace nngraph::cuda {
namespace {

__device__ inline int clamp_lo(int v) { return v < 0 ? 0 : v; }

template <class I>
__global__ void pool_kernel(bool is_max, PoolGeometry g, const float* in, float* out, I total, int h, int w, int oh,
                            int ow) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const int ox = static_cast<int>(i % ow), oy = static_cast<int>((i / ow) % oh);
    const float* x = in + (i / (I(oh) * ow)) * h * w;
    const int y0 = oy * g.sy - g.pad_top, x0 = ox * g.sx - g.pad_left;
    const int ya = clamp_lo(y0), yb = min(y0 + g.kh, h), xa = clamp_lo(x0), xb = min(x0 + g.kw, w);
    float acc = is_max ? -INFINITY : 0.f;
    for (int iy = ya; iy < yb; ++iy)
      for (int ix = xa; ix < xb; ++ix) acc = is_max ? fmaxf(acc, x[iy * w + ix]) : acc + x[iy * w + ix];
    const int count = g.count_include_pad ? g.kh * g.kw : (yb - ya) * (xb - xa);
    out[i] = is_max ? acc : acc / static_cast<float>(count);
  }
}

template <class I>
__global__ void pool_gradient_kernel(bool is_max, PoolGeometry g, const float* in, const float* dy, float* dx,
                                     I total, int h, int w, int oh, int ow, AnyDerivative derivative) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const int ix = static_cast<int>(i % w), iy = static_cast<int>((i / w) % h);
    const I plane = i / (I(h) * w);
    const float* x = in + plane * h * w;
    const float* gy = dy + plane * oh * ow;
    // outputs whose window [o·s − pad, o·s − pad + k) holds this pixel
    const int oy0 = max(0, (iy + g.pad_top - g.kh + g.sy) / g.sy), oy1 = min(oh - 1, (iy + g.pad_top) / g.sy);
    const int ox0 = max(0, (ix + g.pad_left - g.kw + g.sx) / g.sx), ox1 = min(ow - 1, (ix + g.pad_left) / g.sx);
    float acc = 0.f;
    for (int oy = oy0; oy <= oy1; ++oy)
      for (int ox = ox0; ox <= ox1; ++ox) {
        const int y0 = oy * g.sy - g.pad_top, x0 = ox * g.sx - g.pad_left;
        if (iy < y0 || iy >= y0 + g.kh || ix < x0 || ix >= x0 + g.kw) continue;
        const int ya = clamp_lo(y0), yb = min(y0 + g.kh, h), xa = clamp_lo(x0), xb = min(x0 + g.kw, w);
        if (is_max) {
          int best = ya * w + xa;
          for (int yy = ya; yy < yb; ++yy)
            for (int xx = xa; xx < xb; ++xx)
              if (x[yy * w + xx] > x[best]) best = yy * w + xx;
          if (best == iy * w + ix) acc += gy[oy * ow + ox];
        } else {
          const int count = g.count_include_pad ? g.kh * g.kw : (yb - ya) * (xb - xa);
          acc += gy[oy * ow + ox] / static_cast<float>(count);
        }
      }
    dx[i] = acc * derivative(x[iy * w + ix]);
  }
}

// 2×2 windows, stride 2, no padding: each input pixel lies in one window, so a thread per
// output writes its four pixels (no gather, no zero fill but for an uncovered odd edge).
template <class I, class D>
__global__ void halve_gradient_kernel(bool is_max, const float* in, const float* dy, float* dx, I total, int h, int w,
                                      int oh, int ow, D derivative) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const int ox = static_cast<int>(i % ow), oy = static_cast<int>((i / ow) % oh);
    const I plane = i / (I(oh) * ow);
    const I o0 = (plane * h + 2 * oy) * w + 2 * ox, o1 = o0 + w;
    const float g = dy[i];
    const bool read = is_max || !std::is_same_v<D, NoDerivative>;  // average alone needs no x
    const float a = read ? in[o0] : 0.f, b = read ? in[o0 + 1] : 0.f;
    const float c = read ? in[o1] : 0.f, d = read ? in[o1 + 1] : 0.f;
    float ga = 0.25f * g, gb = ga, gc = ga, gd = ga;
    if (is_max) {  // the first maximum in scan order, as everywhere
      const float m = fmaxf(fmaxf(a, b), fmaxf(c, d));
      const bool ta = a == m, tb = !ta && b == m, tc = !ta && !tb && c == m;
      ga = ta ? g : 0.f;
      gb = tb ? g : 0.f;
      gc = tc ? g : 0.f;
      gd = (ta || tb || tc) ? 0.f : g;
    }
    dx[o0] = ga * derivative(a);
    dx[o0 + 1] = gb * derivative(b);
    dx[o1] = gc * derivative(c);
    dx[o1 + 1] = gd * derivative(d);
  }
}

}  // namespace

void pooling(cudaStream_t s, PoolingMode mode, const PoolGeometry& g, const float* in, float* out, int planes, int h,
             int w, int oh, int ow) {
  const size_t total = static_cast<size_t>(planes) * oh * ow, inputs = static_cast<size_t>(planes) * h * w;
  with_index_type(std::max(total, inputs), [&](auto i) {
    pool_kernel<<<blocks_for(total), kThreads, 0, s>>>(mode == PoolingMode::Max, g, in, out, decltype(i)(total), h, w,
                                                       oh, ow);
  });
  check_launch("pooling");
}

void pooling_gradient(cudaStream_t s, PoolingMode mode, const PoolGeometry& g, const float* in, const float* dy,
                      float* dx, int planes, int h, int w, int oh, int ow, const NeuronDescriptor& nd) {
  const size_t inputs = static_cast<size_t>(planes) * h * w, outputs = static_cast<size_t>(planes) * oh * ow;
  const size_t largest = std::max(inputs, outputs);
  if (g.kh == 2 && g.kw == 2 && g.sy == 2 && g.sx == 2 && g.pad_top == 0 && g.pad_left == 0) {
    if (h != 2 * oh || w != 2 * ow) cudaMemsetAsync(dx, 0, inputs * sizeof(float), s);
    with_derivative(nd, [&](auto derivative) {
      with_index_type(largest, [&](auto i) {
        halve_gradient_kernel<<<blocks_for(outputs), kThreads, 0, s>>>(mode == PoolingMode::Max, in, dy, dx,
                                                                        decltype(i)(outputs), h, w, oh, ow, derivative);
      });
    });
  } else {
    with_index_type(largest, [&](auto i) {
      pool_gradient_kernel<<<blocks_for(inputs), kThreads, 0, s>>>(mode == PoolingMode::Max, g, in, dy, dx,
                                                                    decltype(i)(inputs), h, w, oh, ow, AnyDerivative{nd});
    });
  }
  check_launch("pooling_gradient");
}

}  // namespace nngraph::cuda
