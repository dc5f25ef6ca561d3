// Upsampling on the cpu: each axis's sources and weights once per call, then a thread per
// run of planes; the gradient scatters each output into its (up to four) sources.
#include <algorithm>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/geometry.h"
#include "ops/upsampling.h"

namespace nngraph {
namespace {

std::vector<math::Lerp> axis(UpsamplingMode mode, bool align, int n, int m) {
  std::vector<math::Lerp> l(m);
  for (int o = 0; o < m; ++o) l[o] = math::upsample_source(mode, align, o, n, m);
  return l;
}

void upsampling(Backend& backend, UpsamplingMode mode, bool align, const Tensor& x, const Tensor& y) {
  const ImageShape &is = x.shape(), &os = y.shape();
  const auto rows = axis(mode, align, is.h, os.h), cols = axis(mode, align, is.w, os.w);
  const float* src = x.data_as<const float>();
  float* dst = y.data_as<float>();
  pool_of(backend).parallel_for(static_cast<size_t>(x.batch()) * is.c, [&](size_t b, size_t e) {
    for (size_t p = b; p < e; ++p) {
      const float* in = src + p * is.h * is.w;
      float* out = dst + p * os.h * os.w;
      for (int i = 0; i < os.h; ++i) {
        const math::Lerp r = rows[i];
        const float* r0 = in + r.i0 * is.w;
        const float* r1 = in + r.i1 * is.w;
        for (int j = 0; j < os.w; ++j) {
          const math::Lerp c = cols[j];
          const float top = r0[c.i0] + c.w1 * (r0[c.i1] - r0[c.i0]);
          const float bottom = r1[c.i0] + c.w1 * (r1[c.i1] - r1[c.i0]);
          out[i * os.w + j] = top + r.w1 * (bottom - top);
        }
      }
    }
  });
}

void upsampling_gradient(Backend& backend, UpsamplingMode mode, bool align, const Tensor& dy, const Tensor& dx) {
  const ImageShape &os = dy.shape(), &is = dx.shape();
  const auto rows = axis(mode, align, is.h, os.h), cols = axis(mode, align, is.w, os.w);
  const float* grad = dy.data_as<const float>();
  float* dst = dx.data_as<float>();
  pool_of(backend).parallel_for(static_cast<size_t>(dx.batch()) * is.c, [&](size_t b, size_t e) {
    for (size_t p = b; p < e; ++p) {
      const float* g = grad + p * os.h * os.w;
      float* out = dst + p * is.h * is.w;
      std::fill_n(out, static_cast<size_t>(is.h) * is.w, 0.f);
      for (int i = 0; i < os.h; ++i) {
        const math::Lerp r = rows[i];
        for (int j = 0; j < os.w; ++j) {
          const math::Lerp c = cols[j];
          const float v = g[i * os.w + j], top = (1.f - r.w1) * v, bottom = r.w1 * v;
          out[r.i0 * is.w + c.i0] += (1.f - c.w1) * top;
          out[r.i0 * is.w + c.i1] += c.w1 * top;
          out[r.i1 * is.w + c.i0] += (1.f - c.w1) * bottom;
          out[r.i1 * is.w + c.i1] += c.w1 * bottom;
        }
      }
    }
  });
}

NNGRAPH_KERNEL(UpsamplingKernel, CPU, upsampling);
NNGRAPH_KERNEL(UpsamplingGradientKernel, CPU, upsampling_gradient);

}  // namespace
}  // namespace nngraph
