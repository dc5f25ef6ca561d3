// Padding and cropping on the cpu: a thread per run of (image, channel) planes.
#include <algorithm>

#include "backends/cpu/cpu_backend.h"
#include "backends/geometry.h"
#include "ops/padding.h"

namespace nngraph {
namespace {

void padding(Backend& backend, PadMode mode, const PadGeometry& g, float value, const Tensor& x, const Tensor& y) {
  const ImageShape &is = x.shape(), &os = y.shape();
  const float* src = x.data_as<const float>();
  float* dst = y.data_as<float>();
  const size_t in_plane = static_cast<size_t>(is.h) * is.w, out_plane = static_cast<size_t>(os.h) * os.w;
  pool_of(backend).parallel_for(static_cast<size_t>(y.batch()) * os.c, [&](size_t b, size_t e) {
    for (size_t p = b; p < e; ++p) {
      const int c = static_cast<int>(p % os.c) - g.front;
      float* out = dst + p * out_plane;
      if (c < 0 || c >= is.c) {
        std::fill_n(out, out_plane, value);
        continue;
      }
      const float* in = src + ((p / os.c) * is.c + c) * in_plane;
      // The columns [j0, j1) read their own source column, shifted: one copy (a crop's whole row).
      const int j0 = std::min(std::max(0, g.left), os.w), j1 = std::max(j0, std::min(os.w, is.w + g.left));
      for (int i = 0; i < os.h; ++i) {
        const int sy = math::pad_source(mode, i - g.top, is.h);
        float* row = out + static_cast<size_t>(i) * os.w;
        if (sy < 0) {
          std::fill_n(row, os.w, value);
          continue;
        }
        const float* from = in + static_cast<size_t>(sy) * is.w;
        auto edge = [&](int j) {
          const int sx = math::pad_source(mode, j - g.left, is.w);
          row[j] = sx < 0 ? value : from[sx];
        };
        for (int j = 0; j < j0; ++j) edge(j);
        if (j1 > j0) std::copy_n(from + (j0 - g.left), j1 - j0, row + j0);
        for (int j = j1; j < os.w; ++j) edge(j);
      }
    }
  });
}

void padding_gradient(Backend& backend, PadMode mode, const PadGeometry& g, const Tensor& dy, const Tensor& dx) {
  const ImageShape &os = dy.shape(), &is = dx.shape();
  const float* grad = dy.data_as<const float>();
  float* dst = dx.data_as<float>();
  const size_t in_plane = static_cast<size_t>(is.h) * is.w, out_plane = static_cast<size_t>(os.h) * os.w;
  pool_of(backend).parallel_for(static_cast<size_t>(dx.batch()) * is.c, [&](size_t b, size_t e) {
    for (size_t p = b; p < e; ++p) {
      const int c = static_cast<int>(p % is.c) + g.front;
      float* out = dst + p * in_plane;
      if (c < 0 || c >= os.c) {
        std::fill_n(out, in_plane, 0.f);
        continue;
      }
      const float* gy = grad + ((p / is.c) * os.c + c) * out_plane;
      for (int i = 0; i < is.h; ++i) {
        const math::Preimage rows = math::pad_preimage(mode, i, is.h, g.top, os.h);
        for (int j = 0; j < is.w; ++j) {
          const math::Preimage cols = math::pad_preimage(mode, j, is.w, g.left, os.w);
          float acc = 0.f;
          for (int r = 0; r < rows.count; ++r)
            for (int oy = rows.lo[r]; oy <= rows.hi[r]; ++oy)
              for (int k = 0; k < cols.count; ++k)
                for (int ox = cols.lo[k]; ox <= cols.hi[k]; ++ox) acc += gy[oy * os.w + ox];
          out[i * is.w + j] = acc;
        }
      }
    }
  });
}

NNGRAPH_KERNEL(PaddingKernel, CPU, padding);
NNGRAPH_KERNEL(PaddingGradientKernel, CPU, padding_gradient);

}  // namespace
}  // namespace nngraph
