#pragma once
// The sequence algorithm of one recurrent layer, written once over a backend's primitives:
//   ops.gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)   row-major
//   ops.each(count, f)        f(i) for i in [0, count), any order (f: a functor below, whose
//                             members are plain values so host and device see one layout)
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
struct Strided {  // peephole values: p[k][j·stride]
  const float* p[4];
  int stride;
  NNGRAPH_HD float at(int k, int j) const { return p[k] ? p[k][j * stride] : 0.f; }
};

// ---- element phases, one functor each (i: element of the pass's range)

struct AddBiases {  // P[row, q·H + j] (or x[row, j] with the unit transform) + biases
  float* P;
  const float* x;
  int x_ld, H, GH;
  bool unit;
  Gates4 ib, rb;
  NNGRAPH_HD void operator()(size_t i) const {
    const size_t row = i / GH;
    const int col = static_cast<int>(i % GH), q = col / H, j = col % H;
    float v = unit ? x[row * x_ld + j] : P[i];
    if (ib.p[q]) v += ib.p[q][j];
    if (rb.p[q]) v += rb.p[q][j];
    P[i] = v;
  }
};

struct AddColumnBias {  // R[n, j] += bias[j] over an N × H block with row stride GH
  float* R;
  const float* bias;
  int H, GH;
  NNGRAPH_HD void operator()(size_t i) const { R[(i / H) * GH + i % H] += bias[i % H]; }
};

struct ForwardA {
  math::RNNCellParams k;
  float* P;
  const float *R, *hp, *cp;
  float *hn, *cn, *E;  // cn, E: null where the cell has none
  Strided mem;
  int GH;
  NNGRAPH_HD void operator()(size_t i) const {
    const int H = k.hidden;
    const size_t n = i / H;
    const int j = static_cast<int>(i % H);
    const math::StepValues v = math::rnn_forward_a(k, P + n * GH, R + n * GH, j, hp[i], cn ? cp[i] : 0.f,
                                                   mem.at(0, j), mem.at(1, j), mem.at(3, j));
    if (!k.gated_product()) hn[i] = v.h;
    if (cn) cn[i] = v.c;
    if (E) E[i] = v.e;
  }
};

struct ForwardB {
  math::RNNCellParams k;
  float* P;
  const float *R, *hp;
  float* hn;
  int GH;
  NNGRAPH_HD void operator()(size_t i) const {
    const size_t n = i / k.hidden;
    hn[i] = math::rnn_forward_b(k, P + n * GH, R + n * GH, static_cast<int>(i % k.hidden), hp[i]);
  }
};

struct GradientA {
  math::RNNCellParams k;
  const float *P, *dh_in, *dy, *dc_in, *hp, *hn, *cp, *cn, *E;  // dy, dc_in, cp, cn, E: may be null
  float *dG, *dh_out, *dc_out, *dQ;                             // dc_out, dQ: may be null
  Strided mem;
  int GH, dy_ld;
  NNGRAPH_HD void operator()(size_t i) const {
    const int H = k.hidden;
    const size_t n = i / H;
    const int j = static_cast<int>(i % H);
    const float dht = dh_in[i] + (dy ? dy[n * dy_ld + j] : 0.f);
    const math::StepGradients d =
        math::rnn_gradient_a(k, P + n * GH, dG + n * GH, j, dht, dc_in ? dc_in[i] : 0.f, hp[i], hn[i],
                             cp ? cp[i] : 0.f, cn ? cn[i] : 0.f, E ? E[i] : 0.f, mem.at(0, j), mem.at(1, j), mem.at(3, j));
    dh_out[i] = d.dhp;
    if (dc_out) dc_out[i] = d.dcp;
    if (dQ) dQ[i] = d.dq;
  }
};

struct GradientB {
  math::RNNCellParams k;
  const float *P, *t, *hp;
  float *dG, *dh_out;
  int GH;
  NNGRAPH_HD void operator()(size_t i) const {
    const size_t n = i / k.hidden;
    dh_out[i] += math::rnn_gradient_b(k, P + n * GH, dG + n * GH, static_cast<int>(i % k.hidden), t[i], hp[i]);
  }
};

struct UnitInputGradient {  // dx[row, j] (+)= Σ_q dG[row, q·H + j]
  float* dx;
  const float* dG;
  int H, G;
  bool accumulate;
  NNGRAPH_HD void operator()(size_t i) const {
    const size_t row = i / H, j = i % H;
    float sum = accumulate ? dx[i] : 0.f;
    for (int q = 0; q < G; ++q) sum += dG[row * G * H + q * H + j];
    dx[i] = sum;
  }
};

struct ColumnSums {  // dst[j·stride] = Σ_rows a[r·lda + j] · (b ? b[r·ldb + j] : 1)
  const float *a, *b;
  float* dst;
  int rows, lda, ldb, stride;
  NNGRAPH_HD void operator()(size_t j) const {
    float sum = 0.f;
    for (int r = 0; r < rows; ++r) sum += a[size_t(r) * lda + j] * (b ? b[size_t(r) * ldb + j] : 1.f);
    dst[j * stride] = sum;
  }
};

struct Fill {
  float* p;
  float value;
  size_t stride;
  NNGRAPH_HD void operator()(size_t i) const { p[i * stride] = value; }
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
  return math::cell_params(g).gated_product() ? g.gates - 1 : g.gates;
}

template <class Ops>
void forward(Ops& ops, const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s) {
  const int T = g.steps, N = g.batch, H = g.hidden, G = g.gates, I = g.input, GH = G * H;
  const size_t NH = size_t(N) * H;
  float* state = s.state;
  float *hs = g.h(state), *cs = g.c(state), *P = g.gate_values(state), *E = g.extra(state);
  const auto k = math::cell_params(g);

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
  ops.each(size_t(T) * N * GH, AddBiases{P, s.x, s.x_ld, H, GH, g.unit_input, ib, rb});

  const size_t first = g.reverse ? size_t(T) * NH : 0;
  if (s.h0) ops.copy(hs + first, s.h0, NH); else ops.fill(hs + first, NH, 0.f);
  if (g.cell_has_c()) {
    if (s.c0) ops.copy(cs + first, s.c0, NH); else ops.fill(cs + first, NH, 0.f);
  }
  float* R = ops.scratch(size_t(N) * GH);
  const Strided mem{{w.memory[0], w.memory[1], w.memory[2], w.memory[3]}, w.memory_stride};
  const int direct = direct_gates(g);
  const bool has_c = g.cell_has_c(), has_e = g.has_extra();
  for (int step = 0; step < T; ++step) {
    const int t = g.reverse ? T - 1 - step : step;
    const size_t prev = (g.reverse ? t + 1 : t) * NH, next = (g.reverse ? t : t + 1) * NH;
    const float* hp = hs + prev;
    float* hn = hs + next;
    const float* cp = cs + prev;
    float* cn = cs + next;
    float* Pt = P + size_t(t) * N * GH;
    float* Et = E + size_t(t) * NH;
    for (int q = 0, n; q < direct; q += n) {
      n = stacked_run(w.recurrent, q, direct, size_t(H) * w.recurrent_ld);
      ops.gemm(false, true, N, n * H, H, 1.f, hp, H, w.recurrent[q], w.recurrent_ld, 0.f, R + q * H, GH);
    }
    if (b_hn) ops.each(NH, AddColumnBias{R + 2 * H, b_hn, H, GH});
    ops.each(NH, ForwardA{k, Pt, R, hp, has_c ? cp : nullptr, hn, has_c ? cn : nullptr, has_e ? Et : nullptr, mem, GH});
    if (k.gated_product()) {
      ops.gemm(false, true, N, H, H, 1.f, Et, H, w.recurrent[G - 1], w.recurrent_ld, 0.f, R + (G - 1) * H, GH);
      ops.each(NH, ForwardB{k, Pt, R, hp, hn, GH});
    }
  }
}

template <class Ops>
void column_sums(Ops& ops, int rows, int columns, const float* a, int lda, const float* b, int ldb, float* dst,
                 int stride) {
  if (dst) ops.each(size_t(columns), ColumnSums{a, b, dst, rows, lda, ldb, stride});
}

template <class Ops>
void gradient(Ops& ops, const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s,
              const RNNLayerGradients& dw) {
  const int T = g.steps, N = g.batch, H = g.hidden, G = g.gates, I = g.input, GH = G * H, TN = T * N;
  const size_t NH = size_t(N) * H;
  float* state = s.state;
  const float *hs = g.h(state), *cs = g.c(state), *P = g.gate_values(state), *E = g.extra(state);
  const auto k = math::cell_params(g);
  const bool gru_after = g.cell == RNNCell::GRU && g.reset_after;
  const bool has_c = g.cell_has_c(), has_e = g.has_extra();

  float* dG = ops.scratch(size_t(TN) * GH);
  float* dQ = gru_after ? ops.scratch(size_t(TN) * H) : nullptr;
  float* dh = ops.scratch(NH);
  float* dhp = ops.scratch(NH);
  float* dc = has_c ? ops.scratch(NH) : nullptr;
  float* dcp = has_c ? ops.scratch(NH) : nullptr;
  float* tmp = k.gated_product() ? ops.scratch(NH) : nullptr;
  if (s.dh_final) ops.copy(dh, s.dh_final, NH); else ops.fill(dh, NH, 0.f);
  if (has_c) {
    if (s.dc_final) ops.copy(dc, s.dc_final, NH); else ops.fill(dc, NH, 0.f);
  }
  const Strided mem{{w.memory[0], w.memory[1], w.memory[2], w.memory[3]}, w.memory_stride};
  const int direct = direct_gates(g);
  const int plain = gru_after ? 2 : direct;  // gates whose recurrent gradient is dG·U over h₋
  const float* dy = s.dy;
  const int dy_ld = s.dy_ld;
  for (int step = T - 1; step >= 0; --step) {
    const int t = g.reverse ? T - 1 - step : step;
    const size_t prev = (g.reverse ? t + 1 : t) * NH, next = (g.reverse ? t : t + 1) * NH;
    const float *hp = hs + prev, *hn = hs + next, *cp = cs + prev, *cn = cs + next;
    const float* Pt = P + size_t(t) * N * GH;
    const float* Et = E + size_t(t) * NH;
    float* dGt = dG + size_t(t) * N * GH;
    float* dQt = dQ ? dQ + size_t(t) * NH : nullptr;
    const float* dyt = dy ? dy + size_t(t) * N * dy_ld : nullptr;
    ops.each(NH, GradientA{k, Pt, dh, dyt, has_c ? dc : nullptr, hp, hn, has_c ? cp : nullptr, has_c ? cn : nullptr,
                           has_e ? Et : nullptr, dGt, dhp, has_c ? dcp : nullptr, dQt, mem, GH, dy_ld});
    if (k.gated_product()) {
      ops.gemm(false, false, N, H, H, 1.f, dGt + (G - 1) * H, GH, w.recurrent[G - 1], w.recurrent_ld, 0.f, tmp, H);
      ops.each(NH, GradientB{k, Pt, tmp, hp, dGt, dhp, GH});
    }
    for (int q = 0, n; q < plain; q += n) {
      n = stacked_run(w.recurrent, q, plain, size_t(H) * w.recurrent_ld);
      ops.gemm(false, false, N, H, n * H, 1.f, dGt + q * H, GH, w.recurrent[q], w.recurrent_ld, 1.f, dhp, H);
    }
    if (gru_after) ops.gemm(false, false, N, H, H, 1.f, dQt, H, w.recurrent[2], w.recurrent_ld, 1.f, dhp, H);
    std::swap(dh, dhp);
    std::swap(dc, dcp);
  }
  if (s.dh0) ops.copy(s.dh0, dh, NH);
  if (s.dc0 && has_c) ops.copy(s.dc0, dc, NH);

  // Input side, over all steps at once.
  if (s.dx) {
    if (g.unit_input) {
      ops.each(size_t(TN) * H, UnitInputGradient{s.dx, dG, H, G, s.accumulate_dx});
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
  for (int q = 0, n; q < G; q += n) {
    n = stacked_run(dw.input_bias, q, G, size_t(H));
    column_sums(ops, TN, n * H, dG + q * H, GH, nullptr, 0, dw.input_bias[q], 1);
  }
  const int rb_end = gru_after ? 2 : G;
  for (int q = 0, n; q < rb_end; q += n) {
    n = stacked_run(dw.recurrent_bias, q, rb_end, size_t(H));
    column_sums(ops, TN, n * H, dG + q * H, GH, nullptr, 0, dw.recurrent_bias[q], 1);
  }
  if (gru_after) column_sums(ops, TN, H, dQ, H, nullptr, 0, dw.recurrent_bias[2], 1);
  if (g.peephole) {
    column_sums(ops, TN, H, dG, GH, c_prev, H, dw.memory[0], dw.memory_stride);
    column_sums(ops, TN, H, dG + H, GH, c_prev, H, dw.memory[1], dw.memory_stride);
    column_sums(ops, TN, H, dG + 3 * H, GH, c_next, H, dw.memory[3], dw.memory_stride);
    if (dw.memory[2]) ops.each(size_t(H), Fill{dw.memory[2], 0.f, size_t(dw.memory_stride)});
  }
}

}  // namespace nngraph::rnn
