// Group, instance and layer normalization on the cpu: a thread per run of statistics, sums
// in double; gamma's and beta's gradients a thread per run of channels.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "ops/group_normalization.h"

namespace nngraph {
namespace {

// Over the channels at each position of NCHW images: the sums of a run of positions at once, each
// channel's row read along the run (what a thread per position reads a row apart), in the same
// order per position.
constexpr size_t kRun = 256;

void layer_normalization_positions(Backend& backend, const math::NormSpan& s, float eps, const float* xv,
                                   const float* g, const float* b, float* st, float* yv, int images) {
  const size_t hw = s.hw;
  for_pixel_runs(pool_of(backend), images, s.hw, kRun, [&](int n, size_t p0, size_t len) {
    double sum[kRun] = {}, sq[kRun] = {};
    float mean[kRun], inv[kRun];
    const float* x = xv + static_cast<size_t>(n) * s.channels * hw + p0;
    for (int c = 0; c < s.channels; ++c)
      for (size_t p = 0; p < len; ++p) sum[p] += x[c * hw + p];
    for (size_t p = 0; p < len; ++p) sum[p] /= s.channels;
    for (int c = 0; c < s.channels; ++c)
      for (size_t p = 0; p < len; ++p) {
        const double d = x[c * hw + p] - sum[p];
        sq[p] += d * d;
      }
    for (size_t p = 0; p < len; ++p) {
      inv[p] = static_cast<float>(1.0 / std::sqrt(sq[p] / s.channels + eps));
      mean[p] = static_cast<float>(sum[p]);
      if (st) st[2 * (n * hw + p0 + p)] = mean[p], st[2 * (n * hw + p0 + p) + 1] = inv[p];
    }
    if (!yv) return;
    float* y = yv + static_cast<size_t>(n) * s.channels * hw + p0;
    for (int c = 0; c < s.channels; ++c)
      for (size_t p = 0; p < len; ++p) y[c * hw + p] = g[c] * (x[c * hw + p] - mean[p]) * inv[p] + b[c];
  });
}

void group_normalization(Backend& backend, const math::NormSpan& s, float eps, const Tensor& x, const Tensor& gamma,
                         const Tensor& beta, const Tensor& stats, const Tensor& y) {
  const float* xv = x.data_as<const float>();
  const float* g = gamma.data_as<const float>();
  const float* b = beta.data_as<const float>();
  float* st = stats.data_as<float>();
  float* yv = y.data_as<float>();
  if (s.per_position && s.hw > 1) return layer_normalization_positions(backend, s, eps, xv, g, b, st, yv, x.batch());
  const int per = s.stats(), count = s.count(), stride = s.stride();
  pool_of(backend).parallel_for(static_cast<size_t>(x.batch()) * per, [&](size_t first, size_t end) {
    for (size_t k = first; k < end; ++k) {
      const int n = static_cast<int>(k / per), a = static_cast<int>(k % per);
      const size_t base = s.first(n, a);
      double sum = 0;
      for (int j = 0; j < count; ++j) sum += xv[base + static_cast<size_t>(j) * stride];
      const double mean = sum / count;
      double sq = 0;
      for (int j = 0; j < count; ++j) {
        const double d = xv[base + static_cast<size_t>(j) * stride] - mean;
        sq += d * d;
      }
      const float inv = static_cast<float>(1.0 / std::sqrt(sq / count + eps)), m = static_cast<float>(mean);
      if (st) st[2 * k] = m, st[2 * k + 1] = inv;
      if (!yv) continue;  // a gradient pass wants the statistics alone
      for (int j = 0; j < count; ++j) {
        const size_t at = base + static_cast<size_t>(j) * stride;
        const int c = s.channel(a, j);
        yv[at] = g[c] * (xv[at] - m) * inv + b[c];
      }
    }
  });
}

void group_normalization_gradient(Backend& backend, const math::NormSpan& s, const Tensor& x, const Tensor& dy,
                                  const Tensor& gamma, const Tensor& stats, const Tensor& dx, const Tensor& dgamma,
                                  const Tensor& dbeta) {
  ThreadPool& pool = pool_of(backend);
  const float* xv = x.data_as<const float>();
  const float* gy = dy.data_as<const float>();
  const float* g = gamma.data_as<const float>();
  const float* st = stats.data_as<const float>();
  const int n_images = x.batch(), per = s.stats(), count = s.count(), stride = s.stride();
  float* out = dx.data_as<float>();
  if (out && s.per_position && s.hw > 1) {
    const size_t hw = s.hw;
    for_pixel_runs(pool_of(backend), n_images, s.hw, kRun, [&](int n, size_t p0, size_t len) {
      double s1[kRun] = {}, s2[kRun] = {};  // Σ gamma·dy and Σ gamma·dy·x̂ per position
      const size_t base = static_cast<size_t>(n) * s.channels * hw + p0;
      const float* m = st + 2 * (n * hw + p0);
      for (int c = 0; c < s.channels; ++c)
        for (size_t p = 0; p < len; ++p) {
          const size_t at = base + c * hw + p;
          const double v = static_cast<double>(g[c]) * gy[at];
          s1[p] += v;
          s2[p] += v * (xv[at] - m[2 * p]) * m[2 * p + 1];
        }
      for (int c = 0; c < s.channels; ++c)
        for (size_t p = 0; p < len; ++p) {
          const size_t at = base + c * hw + p;
          const float inv = m[2 * p + 1], m1 = static_cast<float>(s1[p] / s.channels),
                      m2 = static_cast<float>(s2[p] / s.channels);
          out[at] = inv * (g[c] * gy[at] - m1 - (xv[at] - m[2 * p]) * inv * m2);
        }
    });
  } else if (out) {
    pool.parallel_for(static_cast<size_t>(n_images) * per, [&](size_t first, size_t end) {
      for (size_t k = first; k < end; ++k) {
        const int a = static_cast<int>(k % per);
        const size_t base = s.first(static_cast<int>(k / per), a);
        const float m = st[2 * k], inv = st[2 * k + 1];
        double s1 = 0, s2 = 0;  // Σ gamma·dy and Σ gamma·dy·x̂
        for (int j = 0; j < count; ++j) {
          const size_t at = base + static_cast<size_t>(j) * stride;
          const double v = static_cast<double>(g[s.channel(a, j)]) * gy[at];
          s1 += v;
          s2 += v * (xv[at] - m) * inv;
        }
        const float m1 = static_cast<float>(s1 / count), m2 = static_cast<float>(s2 / count);
        for (int j = 0; j < count; ++j) {
          const size_t at = base + static_cast<size_t>(j) * stride;
          out[at] = inv * (g[s.channel(a, j)] * gy[at] - m1 - (xv[at] - m) * inv * m2);
        }
      }
    });
  }
  float* dg = dgamma.data_as<float>();
  float* db = dbeta.data_as<float>();
  if (!dg && !db) return;
  pool.parallel_for(static_cast<size_t>(s.channels), [&](size_t first, size_t end) {
    for (size_t c = first; c < end; ++c) {
      double sg = 0, sb = 0;
      for (int n = 0; n < n_images; ++n)
        for (int p = 0; p < s.hw; ++p) {
          const size_t at = (static_cast<size_t>(n) * s.channels + c) * s.hw + p;
          const size_t k = static_cast<size_t>(n) * per + s.stat_of(static_cast<int>(c), p);
          sg += static_cast<double>(gy[at]) * (xv[at] - st[2 * k]) * st[2 * k + 1];
          sb += gy[at];
        }
      if (dg) dg[c] = static_cast<float>(sg);
      if (db) db[c] = static_cast<float>(sb);
    }
  });
}

NNGRAPH_KERNEL(GroupNormalizationKernel, CPU, group_normalization);
NNGRAPH_KERNEL(GroupNormalizationGradientKernel, CPU, group_normalization_gradient);

}  // namespace
}  // namespace nngraph
