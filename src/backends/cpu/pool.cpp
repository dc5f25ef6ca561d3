#include <algorithm>
#include <limits>

#include "backends/cpu/cpu_backend.h"
#include "nngraph/nodes.h"

namespace nngraph {

void CpuBackend::pooling(PoolingMode mode, const PoolGeometry& g, const Image& in,
                         const Image& out) {
  const auto& is = in.shape();
  const auto& os = out.shape();
  const float* src = in.data_as<float>();
  float* dst = out.data_as<float>();
  const bool max = mode == PoolingMode::Max;
  const size_t planes = static_cast<size_t>(in.batch()) * is.c;
  pool_.parallel_for(planes, [&](size_t b, size_t e) {
    for (size_t pl = b; pl < e; ++pl) {
      const float* x = src + pl * is.h * is.w;
      float* y = dst + pl * os.h * os.w;
      for (int oy = 0; oy < os.h; ++oy) {
        const int y0 = oy * g.sy - g.pad_top;
        const int ya = std::max(y0, 0), yb = std::min(y0 + g.kh, is.h);
        for (int ox = 0; ox < os.w; ++ox) {
          const int x0 = ox * g.sx - g.pad_left;
          const int xa = std::max(x0, 0), xb = std::min(x0 + g.kw, is.w);
          float acc = max ? -std::numeric_limits<float>::infinity() : 0.f;
          for (int iy = ya; iy < yb; ++iy)
            for (int ix = xa; ix < xb; ++ix) {
              const float v = x[iy * is.w + ix];
              acc = max ? std::max(acc, v) : acc + v;
            }
          if (!max) {
            const int count = g.count_include_pad ? g.kh * g.kw : (yb - ya) * (xb - xa);
            acc /= static_cast<float>(count);
          }
          y[oy * os.w + ox] = acc;
        }
      }
    }
  });
}

void CpuBackend::pooling_gradient(PoolingMode mode, const PoolGeometry& g, const Image& in, const Image& dy,
                                  const Image& dx) {
  const auto& is = in.shape();
  const auto& os = dy.shape();
  const float* src = in.data_as<float>();
  const float* grad = dy.data_as<float>();
  float* dst = dx.data_as<float>();
  const bool max = mode == PoolingMode::Max;
  const size_t planes = static_cast<size_t>(in.batch()) * is.c;
  pool_.parallel_for(planes, [&](size_t b, size_t e) {
    for (size_t pl = b; pl < e; ++pl) {
      const float* x = src + pl * is.h * is.w;
      const float* gy = grad + pl * os.h * os.w;
      float* gx = dst + pl * is.h * is.w;
      std::fill_n(gx, is.h * is.w, 0.f);
      for (int oy = 0; oy < os.h; ++oy) {
        const int y0 = oy * g.sy - g.pad_top;
        const int ya = std::max(y0, 0), yb = std::min(y0 + g.kh, is.h);
        for (int ox = 0; ox < os.w; ++ox) {
          const int x0 = ox * g.sx - g.pad_left;
          const int xa = std::max(x0, 0), xb = std::min(x0 + g.kw, is.w);
          const float v = gy[oy * os.w + ox];
          if (max) {  // same scan order as the forward pass: the first maximum wins
            int best = ya * is.w + xa;
            for (int iy = ya; iy < yb; ++iy)
              for (int ix = xa; ix < xb; ++ix)
                if (x[iy * is.w + ix] > x[best]) best = iy * is.w + ix;
            gx[best] += v;
          } else {
            const int count = g.count_include_pad ? g.kh * g.kw : (yb - ya) * (xb - xa);
            const float share = v / static_cast<float>(count);
            for (int iy = ya; iy < yb; ++iy)
              for (int ix = xa; ix < xb; ++ix) gx[iy * is.w + ix] += share;
          }
        }
      }
    }
  });
}

}  // namespace nngraph
