#pragma once
// Where each output of a shape layer reads (host and, under nvcc, device): pooling windows,
// padding, upsampling and the values each normalization statistic covers. Written once for
// every backend, as math.h's per-element formulas are.
#include <cstddef>

#include "backends/math.h"

namespace nngraph::math {

// ---- windows (pooling)

// The in-bounds taps of a window along one axis: output o's window starts at o·stride − pad
// and has k taps `dilation` apart; those inside [0, n) are first, first + dilation, ...
struct Taps {
  int first, count;
};
NNGRAPH_HD inline Taps window_taps(int o, int stride, int pad, int k, int dilation, int n) {
  const int start = o * stride - pad;
  // Divisions only where dilated (a kernel's integer division costs tens of instructions).
  const int ka = start >= 0 ? 0 : dilation == 1 ? -start : (-start + dilation - 1) / dilation;
  const int kb = n <= start ? 0 : dilation == 1 ? n - start : (n - start + dilation - 1) / dilation;
  const int count = (kb < k ? kb : k) - ka;
  return {start + ka * dilation, count < 0 ? 0 : count};
}

// ---- padding along one axis of n values, `before` added before it and m in all

// The source of padded coordinate t (t = output − before); -1 where the constant fills it.
NNGRAPH_HD inline int pad_source(PadMode mode, int t, int n) {
  if (t >= 0 && t < n) return t;
  if (mode == PadMode::Constant) return -1;
  if (mode == PadMode::Edge) return t < 0 ? 0 : n - 1;
  return t < 0 ? -t : 2 * (n - 1) - t;  // reflect: each pad is below n
}

// The outputs whose source is i, as up to three ranges [lo, hi] (the gradient gathers them).
struct Preimage {
  int lo[3], hi[3], count = 0;
  NNGRAPH_HD void add(int a, int b, int m) {
    a = a < 0 ? 0 : a;
    b = b > m - 1 ? m - 1 : b;
    if (a <= b) {
      lo[count] = a;
      hi[count++] = b;
    }
  }
};
NNGRAPH_HD inline Preimage pad_preimage(PadMode mode, int i, int n, int before, int m) {
  Preimage p;
  if (mode == PadMode::Edge) {
    p.add(i == 0 ? 0 : before + i, i == n - 1 ? m - 1 : before + i, m);
  } else {
    p.add(before + i, before + i, m);
    if (mode == PadMode::Reflect) {
      if (i >= 1 && i <= before) p.add(before - i, before - i, m);
      if (i <= n - 2) p.add(before + 2 * (n - 1) - i, before + 2 * (n - 1) - i, m);
    }
  }
  return p;
}

// ---- upsampling one axis of n values to m = n·scale

// Output o reads (1 − w1)·x[i0] + w1·x[i1]. Bilinear: source coordinate o·(n−1)/(m−1) with
// align_corners, else (o + ½)/scale − ½ clamped at 0 (PyTorch's two conventions).
struct Lerp {
  int i0, i1;
  float w1;
};
NNGRAPH_HD inline Lerp upsample_source(UpsamplingMode mode, bool align_corners, int o, int n, int m) {
  const int scale = m / n;
  if (mode == UpsamplingMode::Nearest) return {o / scale, o / scale, 0.f};
  float src = align_corners ? (m > 1 ? static_cast<float>(o) * (n - 1) / (m - 1) : 0.f)
                            : (o + 0.5f) / static_cast<float>(scale) - 0.5f;
  src = src < 0.f ? 0.f : src;
  int i0 = static_cast<int>(src);
  i0 = i0 > n - 1 ? n - 1 : i0;
  return {i0, i0 + 1 < n ? i0 + 1 : n - 1, src - static_cast<float>(i0)};
}
// The weight of source i in output o.
NNGRAPH_HD inline float upsample_weight(const Lerp& l, int i) {
  return (l.i0 == i ? 1.f - l.w1 : 0.f) + (l.i1 == i ? l.w1 : 0.f);
}
// The outputs [first, last] that may read source i (a superset; upsample_weight tells).
NNGRAPH_HD inline void upsample_readers(UpsamplingMode mode, bool align_corners, int i, int n, int m, int* first,
                                        int* last) {
  const float r = align_corners && mode == UpsamplingMode::Bilinear ? (n > 1 ? (m - 1.f) / (n - 1.f) : m) : m / n;
  const int a = static_cast<int>((i - 1) * r) - 2, b = static_cast<int>((i + 2) * r) + 2;
  *first = a < 0 || n == 1 ? 0 : a;
  *last = b > m - 1 || n == 1 ? m - 1 : b;
}

// ---- group, instance and layer normalization: which values each statistic covers

// Per image, `stats()` statistics: groups of channels over the whole image (group, instance
// and layer normalization over C×H×W), or every channel at one position (per_position:
// layer normalization over C). Statistic a reads count() values stride() apart from first().
struct NormSpan {
  int channels, hw, groups;
  bool per_position;
  NNGRAPH_HD int stats() const { return per_position ? hw : groups; }
  NNGRAPH_HD int count() const { return per_position ? channels : channels / groups * hw; }
  NNGRAPH_HD int stride() const { return per_position ? hw : 1; }
  NNGRAPH_HD size_t first(int n, int a) const {
    return per_position ? static_cast<size_t>(n) * channels * hw + a
                        : (static_cast<size_t>(n) * channels + static_cast<size_t>(a) * (channels / groups)) * hw;
  }
  // The channel of value j of statistic a, and the statistic of (channel, position).
  NNGRAPH_HD int channel(int a, int j) const { return per_position ? j : a * (channels / groups) + j / hw; }
  NNGRAPH_HD int stat_of(int c, int p) const { return per_position ? p : c / (channels / groups); }
};

}  // namespace nngraph::math
