#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_backend.h"
#include "backends/math.h"
#include "ops/softmax.h"

namespace nngraph {

// Channels are strided by H·W. The work goes by runs of pixels of one image (for_pixel_runs),
// each keeping its pixels' max and sum in small arrays, so the inner loops run along contiguous
// pixels and vectorize (exp_fast).
namespace {

constexpr size_t kRun = 64;  // pixels a unit of work takes

// e^d, 0 for −∞ (a masked value) as expf gives; exp_fast alone would saturate to 1e-38.
inline float exp_of(float d) { return d == -std::numeric_limits<float>::infinity() ? 0.f : math::exp_fast(d); }

// fn(at, pixels, hw) for each run: `at` the offset of its first pixel in channel 0.
template <class Fn>
void for_each_run(Backend& backend, const Tensor& t, Fn fn) {
  const size_t c = static_cast<size_t>(t.shape().c), hw = static_cast<size_t>(t.shape().h) * t.shape().w;
  for_pixel_runs(pool_of(backend), t.batch(), hw, kRun,
                 [&](int n, size_t p0, size_t len) { fn(n * c * hw + p0, len, hw); });
}

void softmax(Backend& backend, bool log, const Tensor& in, const Tensor& out) {
  const int c = in.shape().c;
  const float* src = in.data_as<float>();
  float* dst = out.data_as<float>();
  for_each_run(backend, in, [&](size_t at, size_t np, size_t hw) {
    const float* x = src + at;
    float* y = dst + at;
    float mx[kRun], sum[kRun];
    std::fill_n(mx, np, -std::numeric_limits<float>::infinity());
    std::fill_n(sum, np, 0.f);
    for (int ch = 0; ch < c; ++ch)
      for (size_t p = 0; p < np; ++p) mx[p] = std::max(mx[p], x[ch * hw + p]);
    for (int ch = 0; ch < c; ++ch)
      for (size_t p = 0; p < np; ++p) {
        const float v = exp_of(x[ch * hw + p] - mx[p]);
        sum[p] += v;
        if (!log) y[ch * hw + p] = v;
      }
    if (log) {
      for (size_t p = 0; p < np; ++p) sum[p] = mx[p] + std::log(sum[p]);
      for (int ch = 0; ch < c; ++ch)
        for (size_t p = 0; p < np; ++p) y[ch * hw + p] = x[ch * hw + p] - sum[p];
    } else {
      for (size_t p = 0; p < np; ++p) sum[p] = 1.f / sum[p];
      for (int ch = 0; ch < c; ++ch)
        for (size_t p = 0; p < np; ++p) y[ch * hw + p] *= sum[p];
    }
  });
}

void softmax_gradient(Backend& backend, bool log, const Tensor& y, const Tensor& dy, const Tensor& dx) {
  const int c = y.shape().c;
  for_each_run(backend, y, [&](size_t at, size_t np, size_t hw) {
    const float* yv = y.data_as<float>() + at;
    const float* g = dy.data_as<float>() + at;
    float* out = dx.data_as<float>() + at;
    float sum[kRun];
    std::fill_n(sum, np, 0.f);
    // softmax: dx = y·(dy − Σ dy·y);  log-softmax: dx = dy − exp(y)·Σ dy
    for (int ch = 0; ch < c; ++ch)
      for (size_t p = 0; p < np; ++p) sum[p] += log ? g[ch * hw + p] : g[ch * hw + p] * yv[ch * hw + p];
    for (int ch = 0; ch < c; ++ch)
      for (size_t p = 0; p < np; ++p) {
        const size_t i = ch * hw + p;
        out[i] = log ? g[i] - exp_of(yv[i]) * sum[p] : yv[i] * (g[i] - sum[p]);
      }
  });
}

NNGRAPH_KERNEL(SoftMaxKernel, CPU, softmax);
NNGRAPH_KERNEL(SoftMaxGradientKernel, CPU, softmax_gradient);

}  // namespace
}  // namespace nngraph
