#pragma once
// The sequence algorithm of one recurrent layer, written once over a backend's primitives:
//   ops.gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)   row-major
//   ops.each(rows, cols, f)   f(r, j) over a rows × cols range, any order (f: a functor below)
//   ops.scratch(floats)       temporary memory, valid while ops lives
//   ops.fill(p, count, value), ops.copy(dst, src, count)
// Input products of all steps run as one matrix product; each step then does the recurrent
// product and the cell's element phases (rnn_math.h). Gate matrices stacked in one buffer
// (a layer source) share one product; separate sources take one product each.
#include <utility>

#include "backends/rnn_math.h"

namespace nngraph::rnn {

struct Gates4 {
  const float* p[4];
};
struct Strided {  // peephole values: p[k][j·stride] (stride 0 over one zero where absent)
  const float* p[4];
  int stride;
  NNGRAPH_HD float at(int k, int j) const { return p[k][j * stride]; }
};

// ---- element phases, one functor each, called as f(row, column) over a rows × columns
// range (members are plain values so host and device see one layout)

struct CombineBiases {  // b[q·H + j] = input bias + recurrent bias of gate q (each may be absent)
  float* b;
  Gates4 ib, rb;
  int H;
  NNGRAPH_HD void operator()(size_t q, int j) const {
    b[q * H + j] = (ib.p[q] ? ib.p[q][j] : 0.f) + (rb.p[q] ? rb.p[q][j] : 0.f);
  }
};

struct AddBiases {  // over (rows·G) × H: P[row, q·H + j] = (unit ? x[row, j] : P[…]) + b[q·H + j]
  float* P;
  const float *x, *b;
  int x_ld, H, G;
  bool unit;
  NNGRAPH_HD void operator()(size_t r, int j) const {
    const size_t row = r / G;
    const int q = static_cast<int>(r % G);
    P[r * H + j] = (unit ? x[row * x_ld + j] : P[r * H + j]) + b[q * H + j];
  }
};

struct AddColumnBias {  // R[n, j] += bias[j] over an N × H block with row stride GH
  float* R;
  const float* bias;
  int GH;
  NNGRAPH_HD void operator()(size_t n, int j) const { R[n * GH + j] += bias[j]; }
};

template <class K>
struct ForwardA {
  K k;
  float* P;
  const float *R, *hp, *cp;
  float *hn, *cn, *E;  // cn, E: only where the cell has them
  Strided mem;
  int GH;
  NNGRAPH_HD void operator()(size_t n, int j) const {
    const size_t i = n * k.hidden + j;
    const math::StepValues v = k.forward_a(P + n * GH, R + n * GH, j, hp[i], K::has_c ? cp[i] : 0.f, mem.at(0, j),
                                           mem.at(1, j), mem.at(3, j));
    if (!k.gated_product()) hn[i] = v.h;
    if constexpr (K::has_c) cn[i] = v.c;
    if constexpr (K::has_e) E[i] = v.e;
  }
};

template <class K>
struct ForwardB {
  K k;
  float* P;
  const float *R, *hp;
  float* hn;
  int GH;
  NNGRAPH_HD void operator()(size_t n, int j) const {
    const size_t i = n * k.hidden + j;
    hn[i] = k.forward_b(P + n * GH, R + n * GH, j, hp[i]);
  }
};

template <class K>
struct GradientA {
  K k;
  const float *P, *dh_in, *dy, *dc_in, *hp, *hn, *cp, *cn, *E;  // dc_in, cp, cn, E: where the cell has them
  float *dG, *dh_out, *dc_out, *dQ;                             // dc_out: LSTM; dQ: GRU (reset after)
  Strided mem;
  int GH, dy_ld;  // dy_ld 0: dy is one row of zeros
  NNGRAPH_HD void operator()(size_t n, int j) const {
    const size_t i = n * k.hidden + j;
    const float dht = dh_in[i] + dy[n * dy_ld + j];
    const math::StepGradients d =
        k.gradient_a(P + n * GH, dG + n * GH, j, dht, K::has_c ? dc_in[i] : 0.f, hp[i], hn[i], K::has_c ? cp[i] : 0.f,
                     K::has_c ? cn[i] : 0.f, K::has_e ? E[i] : 0.f, mem.at(0, j), mem.at(1, j), mem.at(3, j));
    dh_out[i] = d.dhp;
    if constexpr (K::has_c) dc_out[i] = d.dcp;
    if constexpr (K::cell == RNNCell::GRU)
      if (dQ) dQ[i] = d.dq;
  }
};

template <class K>
struct GradientB {
  K k;
  const float *P, *t, *hp;
  float *dG, *dh_out;
  int GH;
  NNGRAPH_HD void operator()(size_t n, int j) const {
    const size_t i = n * k.hidden + j;
    dh_out[i] += k.gradient_b(P + n * GH, dG + n * GH, j, t[i], hp[i]);
  }
};

struct UnitInputGradient {  // dx[row, j] (+)= Σ_q dG[row, q·H + j]
  float* dx;
  const float* dG;
  int H, G;
  bool accumulate;
  NNGRAPH_HD void operator()(size_t row, int j) const {
    float sum = accumulate ? dx[row * H + j] : 0.f;
    for (int q = 0; q < G; ++q) sum += dG[row * G * H + q * H + j];
    dx[row * H + j] = sum;
  }
};

struct ProductSums {  // over 1 × columns: dst[j·stride] = Σ_rows a[r·lda + j] · b[r·ldb + j]
  const float *a, *b;
  float* dst;
  int rows, lda, ldb, stride;
  NNGRAPH_HD void operator()(size_t, int j) const {
    float sum = 0.f;
    for (int r = 0; r < rows; ++r) sum += a[size_t(r) * lda + j] * b[size_t(r) * ldb + j];
    dst[j * stride] = sum;
  }
};

struct Fill {  // over rows × 1: p[r·stride] = value
  float* p;
  float value;
  size_t stride;
  NNGRAPH_HD void operator()(size_t r, int) const { p[r * stride] = value; }
};

// How many gate matrices from q on (before end) lie stacked, each `distance` floats after the
// previous: one product then serves them all.
template <class P>
int stacked_run(P* const* m, int q, int end, size_t distance) {
  int n = 1;
  if (m[q])
    while (q + n < end && m[q + n] == m[q] + n * distance) ++n;
  return n;
}

// The gates whose recurrent product reads h₋ directly (the rest read gate⊙h₋).
inline int direct_gates(const RNNLayerGeometry& g) {
  return g.cell == RNNCell::MGU || (g.cell == RNNCell::GRU && !g.reset_after) ? g.gates - 1 : g.gates;
}

// H floats of zero: the peepholes of a cell without them, a missing output gradient.
template <class Ops>
float* zeros(Ops& ops, int H) {
  float* z = ops.scratch(size_t(H));
  ops.fill(z, size_t(H), 0.f);
  return z;
}

template <class Ops>
Strided peepholes(Ops& ops, const RNNLayerGeometry& g, const RNNLayerWeights& w) {
  if (g.peephole) return {{w.memory[0], w.memory[1], w.memory[2], w.memory[3]}, w.memory_stride};
  const float* z = zeros(ops, 1);
  return {{z, z, z, z}, 0};
}

template <class Ops>
void forward(Ops& ops, const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s) {
  const int T = g.steps, N = g.batch, H = g.hidden, G = g.gates, I = g.input, GH = G * H;
  const size_t NH = size_t(N) * H;
  float* state = s.state;
  float *hs = g.h(state), *cs = g.c(state), *P = g.gate_values(state), *E = g.extra(state);

  // Input products of every step, plus both biases (but b_hn, which the reset gate scales).
  if (!g.unit_input)
    for (int q = 0, n; q < G; q += n) {
      n = stacked_run(w.input, q, G, size_t(H) * w.input_ld);
      ops.gemm(false, true, T * N, n * H, I, 1.f, s.x, s.x_ld, w.input[q], w.input_ld, 0.f, P + q * H, GH);
    }
  const Gates4 ib{{w.input_bias[0], w.input_bias[1], w.input_bias[2], w.input_bias[3]}};
  Gates4 rb{{w.recurrent_bias[0], w.recurrent_bias[1], w.recurrent_bias[2], w.recurrent_bias[3]}};
  const float* b_hn = nullptr;
  if (g.cell == RNNCell::GRU && g.reset_after) std::swap(b_hn, rb.p[2]);
  float* bias = ops.scratch(size_t(GH));
  ops.each(size_t(G), H, CombineBiases{bias, ib, rb, H});
  ops.each(size_t(T) * N * G, H, AddBiases{P, s.x, bias, s.x_ld, H, G, g.unit_input});

  const size_t first = g.reverse ? size_t(T) * NH : 0;
  if (s.h0) ops.copy(hs + first, s.h0, NH); else ops.fill(hs + first, NH, 0.f);
  if (g.cell_has_c()) {
    if (s.c0) ops.copy(cs + first, s.c0, NH); else ops.fill(cs + first, NH, 0.f);
  }
  float* R = ops.scratch(size_t(N) * GH);
  const Strided mem = peepholes(ops, g, w);
  const int direct = direct_gates(g);
  math::with_cell(g, [&](auto k) {
    using K = decltype(k);
    for (int step = 0; step < T; ++step) {
      const int t = g.reverse ? T - 1 - step : step;
      const size_t prev = (g.reverse ? t + 1 : t) * NH, next = (g.reverse ? t : t + 1) * NH;
      const float* hp = hs + prev;
      float* hn = hs + next;
      float* Pt = P + size_t(t) * N * GH;
      float* Et = E + size_t(t) * NH;
      for (int q = 0, n; q < direct; q += n) {
        n = stacked_run(w.recurrent, q, direct, size_t(H) * w.recurrent_ld);
        ops.gemm(false, true, N, n * H, H, 1.f, hp, H, w.recurrent[q], w.recurrent_ld, 0.f, R + q * H, GH);
      }
      if (b_hn) ops.each(size_t(N), H, AddColumnBias{R + 2 * H, b_hn, GH});
      ops.each(size_t(N), H, ForwardA<K>{k, Pt, R, hp, cs + prev, hn, cs + next, Et, mem, GH});
      if (k.gated_product()) {
        ops.gemm(false, true, N, H, H, 1.f, Et, H, w.recurrent[G - 1], w.recurrent_ld, 0.f, R + (G - 1) * H, GH);
        ops.each(size_t(N), H, ForwardB<K>{k, Pt, R, hp, hn, GH});
      }
    }
  });
}

template <class Ops>
void peephole_sums(Ops& ops, int rows, int H, const float* dg, int ld, const float* c, float* dst, int stride) {
  if (dst) ops.each(1, H, ProductSums{dg, c, dst, rows, ld, H, stride});
}

template <class Ops>
void gradient(Ops& ops, const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s,
              const RNNLayerGradients& dw) {
  const int T = g.steps, N = g.batch, H = g.hidden, G = g.gates, I = g.input, GH = G * H, TN = T * N;
  const size_t NH = size_t(N) * H;
  float* state = s.state;
  const float *hs = g.h(state), *cs = g.c(state), *P = g.gate_values(state), *E = g.extra(state);
  const bool gru_after = g.cell == RNNCell::GRU && g.reset_after;
  const bool has_c = g.cell_has_c(), gated = direct_gates(g) < G;

  float* dG = ops.scratch(size_t(TN) * GH);
  float* dQ = gru_after ? ops.scratch(size_t(TN) * H) : nullptr;
  float* dh = ops.scratch(NH);
  float* dhp = ops.scratch(NH);
  float* dc = has_c ? ops.scratch(NH) : nullptr;
  float* dcp = has_c ? ops.scratch(NH) : nullptr;
  float* tmp = gated ? ops.scratch(NH) : nullptr;
  if (s.dh_final) ops.copy(dh, s.dh_final, NH); else ops.fill(dh, NH, 0.f);
  if (has_c) {
    if (s.dc_final) ops.copy(dc, s.dc_final, NH); else ops.fill(dc, NH, 0.f);
  }
  const Strided mem = peepholes(ops, g, w);
  const int direct = direct_gates(g);
  const int plain = gru_after ? 2 : direct;  // gates whose recurrent gradient is dG·U over h₋
  const float* dy = s.dy ? s.dy : zeros(ops, H);
  const int dy_ld = s.dy ? s.dy_ld : 0;
  math::with_cell(g, [&](auto k) {
    using K = decltype(k);
    for (int step = T - 1; step >= 0; --step) {
      const int t = g.reverse ? T - 1 - step : step;
      const size_t prev = (g.reverse ? t + 1 : t) * NH, next = (g.reverse ? t : t + 1) * NH;
      const float* hp = hs + prev;
      const float* Pt = P + size_t(t) * N * GH;
      float* dGt = dG + size_t(t) * N * GH;
      float* dQt = dQ ? dQ + size_t(t) * NH : nullptr;
      ops.each(size_t(N), H, GradientA<K>{k, Pt, dh, dy + size_t(t) * N * dy_ld, dc, hp, hs + next, cs + prev,
                                          cs + next, E + size_t(t) * NH, dGt, dhp, dcp, dQt, mem, GH, dy_ld});
      if (gated) {
        ops.gemm(false, false, N, H, H, 1.f, dGt + (G - 1) * H, GH, w.recurrent[G - 1], w.recurrent_ld, 0.f, tmp, H);
        ops.each(size_t(N), H, GradientB<K>{k, Pt, tmp, hp, dGt, dhp, GH});
      }
      for (int q = 0, n; q < plain; q += n) {
        n = stacked_run(w.recurrent, q, plain, size_t(H) * w.recurrent_ld);
        ops.gemm(false, false, N, H, n * H, 1.f, dGt + q * H, GH, w.recurrent[q], w.recurrent_ld, 1.f, dhp, H);
      }
      if (gru_after) ops.gemm(false, false, N, H, H, 1.f, dQt, H, w.recurrent[2], w.recurrent_ld, 1.f, dhp, H);
      std::swap(dh, dhp);
      std::swap(dc, dcp);
    }
  });
  if (s.dh0) ops.copy(s.dh0, dh, NH);
  if (s.dc0 && has_c) ops.copy(s.dc0, dc, NH);

  // Input side, over all steps at once.
  if (s.dx) {
    if (g.unit_input) {
      ops.each(size_t(TN), H, UnitInputGradient{s.dx, dG, H, G, s.accumulate_dx});
    } else {
      for (int q = 0, n; q < G; q += n) {
        n = stacked_run(w.input, q, G, size_t(H) * w.input_ld);
        ops.gemm(false, false, TN, I, n * H, 1.f, dG + q * H, GH, w.input[q], w.input_ld,
                 q == 0 && !s.accumulate_dx ? 0.f : 1.f, s.dx, I);
      }
    }
  }
  const float* h_prev = hs + (g.reverse ? NH : 0);  // h₋ of every step, time-major
  const float* c_prev = cs + (g.reverse ? NH : 0);
  const float* c_next = cs + (g.reverse ? 0 : NH);
  for (int q = 0, n; q < G; q += n) {
    n = stacked_run(dw.input, q, G, size_t(H) * dw.input_ld);
    if (dw.input[q])
      ops.gemm(true, false, n * H, I, TN, 1.f, dG + q * H, GH, s.x, s.x_ld, 0.f, dw.input[q], dw.input_ld);
  }
  for (int q = 0, n; q < plain; q += n) {
    n = stacked_run(dw.recurrent, q, plain, size_t(H) * dw.recurrent_ld);
    if (dw.recurrent[q])
      ops.gemm(true, false, n * H, H, TN, 1.f, dG + q * H, GH, h_prev, H, 0.f, dw.recurrent[q], dw.recurrent_ld);
  }
  if (plain < G && dw.recurrent[plain])  // the GRU's Uₙ (over dQ) or the gated product's (over E)
    ops.gemm(true, false, H, H, TN, 1.f, gru_after ? dQ : dG + plain * H, gru_after ? H : GH, gru_after ? h_prev : E,
             H, 0.f, dw.recurrent[plain], dw.recurrent_ld);
  // Bias gradients: column sums of dG, as products with a row of ones.
  float* ones = nullptr;
  auto column_sums = [&](const float* a, int lda, int columns, float* dst) {
    if (!dst) return;
    if (!ones) {
      ones = ops.scratch(size_t(TN));
      ops.fill(ones, size_t(TN), 1.f);
    }
    ops.gemm(false, false, 1, columns, TN, 1.f, ones, TN, a, lda, 0.f, dst, columns);
  };
  for (int q = 0, n; q < G; q += n) {
    n = stacked_run(dw.input_bias, q, G, size_t(H));
    column_sums(dG + q * H, GH, n * H, dw.input_bias[q]);
  }
  const int rb_end = gru_after ? 2 : G;
  for (int q = 0, n; q < rb_end; q += n) {
    n = stacked_run(dw.recurrent_bias, q, rb_end, size_t(H));
    column_sums(dG + q * H, GH, n * H, dw.recurrent_bias[q]);
  }
  if (gru_after) column_sums(dQ, H, H, dw.recurrent_bias[2]);
  if (g.peephole) {  // Σ over rows of dgate ⊙ c
    peephole_sums(ops, TN, H, dG, GH, c_prev, dw.memory[0], dw.memory_stride);
    peephole_sums(ops, TN, H, dG + H, GH, c_prev, dw.memory[1], dw.memory_stride);
    peephole_sums(ops, TN, H, dG + 3 * H, GH, c_next, dw.memory[3], dw.memory_stride);
    if (dw.memory[2]) ops.each(size_t(H), 1, Fill{dw.memory[2], 0.f, size_t(dw.memory_stride)});
  }
}

}  // namespace nngraph::rnn
