#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/geometry.h"
#include "ops/pool.h"

namespace nngraph {
namespace {

// The halving windows (PoolGeometry::halves); max pooling writes each window's winner where
// given (taps 0 1 / 2 3, the first maximum in scan order). Average pooling's gradient writes
// every input pixel once instead of zero-fill then scatter (max pooling's reads its winners).
void halve(bool max, const float* __restrict x, int w, float* __restrict y, int oh, int ow, uint8_t* wins) {
  for (int oy = 0; oy < oh; ++oy) {
    const float* r0 = x + static_cast<size_t>(2 * oy) * w;
    const float* r1 = r0 + w;
    float* out = y + static_cast<size_t>(oy) * ow;
    if (max && wins) {
      uint8_t* won = wins + static_cast<size_t>(oy) * ow;
      for (int ox = 0; ox < ow; ++ox) {
        const float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
        const float m = std::max(std::max(a, b), std::max(c, d));
        out[ox] = m;
        won[ox] = a == m ? 0 : b == m ? 1 : c == m ? 2 : 3;
      }
    } else if (max) {
      for (int ox = 0; ox < ow; ++ox)
        out[ox] = std::max(std::max(r0[2 * ox], r0[2 * ox + 1]), std::max(r1[2 * ox], r1[2 * ox + 1]));
    } else {
      for (int ox = 0; ox < ow; ++ox) out[ox] = 0.25f * (r0[2 * ox] + r0[2 * ox + 1] + r1[2 * ox] + r1[2 * ox + 1]);
    }
  }
}

void halve_gradient(int h, int w, const float* __restrict dy, int oh, int ow, float* __restrict dx) {
  if (h != 2 * oh || w != 2 * ow) std::fill_n(dx, static_cast<size_t>(h) * w, 0.f);  // uncovered edge
  for (int oy = 0; oy < oh; ++oy) {
    float* d0 = dx + static_cast<size_t>(2 * oy) * w;
    float* d1 = d0 + w;
    for (int ox = 0; ox < ow; ++ox) d0[2 * ox] = d0[2 * ox + 1] = d1[2 * ox] = d1[2 * ox + 1] = 0.25f * dy[oy * ow + ox];
  }
}

// The window of output (oy, ox): its in-bounds taps along each axis.
struct Window {
  math::Taps y, x;
  Window(const PoolGeometry& g, const ImageShape& in, int oy, int ox)
      : y(math::window_taps(oy, g.sy, g.pad_top, g.kh, g.dil_y, in.h)),
        x(math::window_taps(ox, g.sx, g.pad_left, g.kw, g.dil_x, in.w)) {}
  int count(const PoolGeometry& g) const { return g.count_include_pad ? g.kh * g.kw : y.count * x.count; }
  // f(index) for each in-bounds pixel, in scan order.
  template <class F>
  void each(const PoolGeometry& g, int w, F f) const {
    for (int i = 0, iy = y.first; i < y.count; ++i, iy += g.dil_y)
      for (int j = 0, ix = x.first; j < x.count; ++j, ix += g.dil_x) f(iy * w + ix);
  }
};

// Any window: zero, then each dy to its window's first maximum (the forward scan order) or
// spread evenly.
void scatter_gradient(bool max, const PoolGeometry& g, const ImageShape& is, const ImageShape& os, const float* x,
                      const float* gy, float* gx) {
  std::fill_n(gx, static_cast<size_t>(is.h) * is.w, 0.f);
  for (int oy = 0; oy < os.h; ++oy)
    for (int ox = 0; ox < os.w; ++ox) {
      const Window win(g, is, oy, ox);
      const float v = gy[oy * os.w + ox];
      if (max) {
        int best = -1;
        win.each(g, is.w, [&](int p) {
          if (best < 0 || x[p] > x[best]) best = p;
        });
        if (best >= 0) gx[best] += v;
      } else {
        const float share = v / static_cast<float>(win.count(g));
        win.each(g, is.w, [&](int p) { gx[p] += share; });
      }
    }
}

// A window's kw taps of a padded row, reduced, for each output column: KW and SX fixed (dense
// taps) for the common windows, so the loop over the columns vectorizes (a stride of 2 reads
// whole vectors and deinterleaves them); 0 for any.
template <bool Max, int KW, int SX>
void pool_columns(const float* __restrict padded, int wo, int kw, int sx, int dx, float* __restrict out) {
  const int taps = KW ? KW : kw, step = SX ? SX : sx, d = KW ? 1 : dx;
  for (int ox = 0; ox < wo; ++ox) {
    const float* t = padded + static_cast<size_t>(ox) * step;
    float acc = t[0];
    for (int j = 1; j < taps; ++j) acc = Max ? std::max(acc, t[j * d]) : acc + t[j * d];
    out[ox] = acc;
  }
}

// Windows without winners, separably: each output row's kh source rows reduced column by
// column (one vectorized pass for up to three rows) into its row of `padded` (rows of `pitch`,
// padded on both sides with the reduction's identity), then each window's kw columns of those
// rows, with no bounds to check. A band of kBand rows is reduced before any is read across:
// read back at once, a row's vector stores would stall the unaligned loads that straddle them.
constexpr int kBand = 32;

template <bool Max, int KW, int SX>
void pool_band(const PoolGeometry& g, const ImageShape& is, const ImageShape& os, int oy0, int oy1, const float* x,
               float* y, float* padded, size_t pitch, const float* divisors) {
  const auto op = [](float a, float b) { return Max ? std::max(a, b) : a + b; };
  const size_t w = is.w, next = static_cast<size_t>(g.dil_y) * w;
  for (int oy = oy0; oy < oy1; ++oy) {
    const math::Taps rows = math::window_taps(oy, g.sy, g.pad_top, g.kh, g.dil_y, is.h);
    float* __restrict row = padded + (oy - oy0) * pitch + g.pad_left;
    if (rows.count == 0) {
      std::fill_n(row, w, Max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    const float* __restrict r = x + static_cast<size_t>(rows.first) * w;
    if (rows.count == 1) {
      std::copy_n(r, w, row);
    } else if (rows.count == 2) {
      for (size_t ix = 0; ix < w; ++ix) row[ix] = op(r[ix], r[next + ix]);
    } else {
      for (size_t ix = 0; ix < w; ++ix) row[ix] = op(op(r[ix], r[next + ix]), r[2 * next + ix]);
    }
    for (int i = 3; i < rows.count; ++i) {
      const float* __restrict more = r + i * next;
      for (size_t ix = 0; ix < w; ++ix) row[ix] = op(row[ix], more[ix]);
    }
  }
  for (int oy = oy0; oy < oy1; ++oy) {
    float* out = y + static_cast<size_t>(oy) * os.w;
    pool_columns<Max, KW, SX>(padded + (oy - oy0) * pitch, os.w, g.kw, g.sx, g.dil_x, out);
    if (!Max) {
      const math::Taps rows = math::window_taps(oy, g.sy, g.pad_top, g.kh, g.dil_y, is.h);
      const float n = g.count_include_pad ? 1.f : static_cast<float>(rows.count);
      for (int ox = 0; ox < os.w; ++ox) out[ox] /= divisors[ox] * n;
    }
  }
}

// One plane, band by band (`padded` holds kBand rows).
template <bool Max, int KW, int SX>
void pool_rows(const PoolGeometry& g, const ImageShape& is, const ImageShape& os, const float* x, float* y,
               float* padded, size_t pitch, const float* divisors) {
  for (int oy = 0; oy < os.h; oy += kBand)
    pool_band<Max, KW, SX>(g, is, os, oy, std::min(os.h, oy + kBand), x, y, padded, pitch, divisors);
}

// pool_rows for this reduction and the window's columns (specialized for the common ones).
template <bool Max>
auto rows_kernel(const PoolGeometry& g) {
  const bool dense = g.dil_x == 1;
  return dense && g.kw == 3 && g.sx == 2 ? pool_rows<Max, 3, 2>
         : dense && g.kw == 3 && g.sx == 1 ? pool_rows<Max, 3, 1>
         : dense && g.kw == 2 && g.sx == 2 ? pool_rows<Max, 2, 2>
                                           : pool_rows<Max, 0, 0>;
}

void pooling(Backend& backend, PoolingMode mode, const PoolGeometry& g, const Tensor& in, const Tensor& out,
             const Tensor& winners) {
  const auto& is = in.shape();
  const auto& os = out.shape();
  const float* src = in.data_as<float>();
  float* dst = out.data_as<float>();
  const bool max = mode == PoolingMode::Max;
  const size_t planes = static_cast<size_t>(in.batch()) * is.c;
  auto* won = static_cast<uint8_t*>(winners.data());
  const size_t won_image = winner_image(winners), plane = static_cast<size_t>(os.h) * os.w;
  if (g.halves()) {
    pool_of(backend).parallel_for(planes, [&](size_t b, size_t e) {
      for (size_t pl = b; pl < e; ++pl)
        halve(max, src + pl * is.h * is.w, is.w, dst + pl * plane, os.h, os.w,
              won ? won + pl / is.c * won_image + pl % is.c * plane : nullptr);
    });
    return;
  }
  if (!won) {
    // Per output column: the window's in-bounds taps (or all, counting the padding) divide its sum.
    std::vector<float> divisors(os.w);
    for (int ox = 0; ox < os.w; ++ox)
      divisors[ox] = g.count_include_pad ? static_cast<float>(g.kh * g.kw)
                                         : static_cast<float>(math::window_taps(ox, g.sx, g.pad_left, g.kw, g.dil_x,
                                                                                is.w).count);
    const size_t width = static_cast<size_t>(os.w - 1) * g.sx + static_cast<size_t>(g.kw - 1) * g.dil_x + 1;
    const size_t pitch = (std::max(width, static_cast<size_t>(g.pad_left) + is.w) + 15) / 16 * 16;
    pool_of(backend).parallel_for(planes, [&](size_t b, size_t e) {
      std::vector<float> padded(pitch * std::min(os.h, kBand), max ? -std::numeric_limits<float>::infinity() : 0.f);
      const auto rows = max ? rows_kernel<true>(g) : rows_kernel<false>(g);
      for (size_t pl = b; pl < e; ++pl)
        rows(g, is, os, src + pl * is.h * is.w, dst + pl * plane, padded.data(), pitch, divisors.data());
    });
    return;
  }
  // Max pooling that keeps its winners (training): each window scanned for its first maximum.
  pool_of(backend).parallel_for(planes, [&](size_t b, size_t e) {
    for (size_t pl = b; pl < e; ++pl) {
      const float* x = src + pl * is.h * is.w;
      float* y = dst + pl * plane;
      uint8_t* wins = won + pl / is.c * won_image + pl % is.c * plane;
      for (int oy = 0; oy < os.h; ++oy)
        for (int ox = 0; ox < os.w; ++ox) {
          const Window win(g, is, oy, ox);
          float acc = -std::numeric_limits<float>::infinity();
          int best = -1;  // the first maximum in scan order
          win.each(g, is.w, [&](int p) {
            if (best < 0 || x[p] > acc) best = p;
            acc = std::max(acc, x[p]);
          });
          y[oy * os.w + ox] = acc;
          wins[oy * os.w + ox] = static_cast<uint8_t>(g.tap(best, is.w, oy, ox));
        }
    }
  });
}

// Each dy (times neuron'(y), the winner's value, where a neuron is given) to its window's winner.
void winners_gradient(const PoolGeometry& g, const ImageShape& is, const ImageShape& os, const uint8_t* wins,
                      const float* y, const float* gy, const NeuronDescriptor& neuron, float* gx) {
  const size_t plane = static_cast<size_t>(os.h) * os.w;
  std::vector<float> through(neuron.type != NeuronType::None ? plane : 0);
  if (!through.empty()) {
    neuron_derivative(gy, y, through.data(), plane, neuron);
    gy = through.data();
  }
  std::fill_n(gx, static_cast<size_t>(is.h) * is.w, 0.f);
  for (int oy = 0; oy < os.h; ++oy)
    for (int ox = 0; ox < os.w; ++ox) gx[g.pixel(wins[oy * os.w + ox], is.w, oy, ox)] += gy[oy * os.w + ox];
}

void pooling_gradient(Backend& backend, PoolingMode mode, const PoolGeometry& g, const Tensor& in, const Tensor& dy,
                      const Tensor& winners, const Tensor& out, const Tensor& dx, const NeuronDescriptor& neuron) {
  const auto& is = in.shape();
  const auto& os = dy.shape();
  const auto* won = static_cast<const uint8_t*>(winners.data());
  const float* src = won ? nullptr : in.data_as<float>();  // with winners x is not read (it may be gone)
  const float* grad = dy.data_as<float>();
  const float* y = won ? out.data_as<float>() : nullptr;
  float* dst = dx.data_as<float>();
  const bool max = mode == PoolingMode::Max, halving = g.halves() && !max;  // max keeps winners
  const size_t planes = static_cast<size_t>(in.batch()) * is.c, area = static_cast<size_t>(is.h) * is.w;
  const size_t won_image = winner_image(winners), plane = static_cast<size_t>(os.h) * os.w;
  pool_of(backend).parallel_for(planes, [&](size_t b, size_t e) {
    for (size_t pl = b; pl < e; ++pl) {
      if (won) {
        winners_gradient(g, is, os, won + pl / is.c * won_image + pl % is.c * plane, y + pl * plane,
                         grad + pl * plane, neuron, dst + pl * area);
        continue;
      }
      const float* x = src + pl * area;
      const float* gy = grad + pl * os.h * os.w;
      float* gx = dst + pl * area;
      if (halving)
        halve_gradient(is.h, is.w, gy, os.h, os.w, gx);
      else
        scatter_gradient(max, g, is, os, x, gy, gx);
      if (neuron.type != NeuronType::None) neuron_derivative(gx, x, gx, area, neuron);  // while in cache
    }
  });
}

NNGRAPH_KERNEL(PoolingKernel, CPU, pooling);
NNGRAPH_KERNEL(PoolingGradientKernel, CPU, pooling_gradient);

}  // namespace
}  // namespace nngraph
