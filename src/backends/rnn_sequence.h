#pragma once
// The sequence algorithm of one recurrent layer, written once over a backend's primitives:
//   ops.gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)   row-major
//   ops.each(count, f)        f(i) for i in [0, count), any order (f is host/device code)
//   ops.scratch(floats)       temporary memory, valid while ops lives
//   ops.fill(p, count, value), ops.copy(dst, src, count)
// Input products of all steps run as one matrix product per gate; each step then does the
// recurrent products and the cell's element phases (rnn_math.h).
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
    for (int q = 0; q < G; ++q)
      ops.gemm(false, true, T * N, H, I, 1.f, s.x, s.x_ld, w.input[q], w.input_ld, 0.f, P + q * H, GH);
  const Gates4 ib{{w.input_bias[0], w.input_bias[1], w.input_bias[2], w.input_bias[3]}};
  Gates4 rb{{w.recurrent_bias[0], w.recurrent_bias[1], w.recurrent_bias[2], w.recurrent_bias[3]}};
  const float* b_hn = nullptr;
  if (g.cell == RNNCell::GRU && g.reset_after) std::swap(b_hn, rb.p[2]);
  const bool unit = g.unit_input;
  const float* x = s.x;
  const int x_ld = s.x_ld;
  ops.each(size_t(T) * N * GH, [=] NNGRAPH_HD(size_t i) {
    const size_t row = i / GH;
    const int col = static_cast<int>(i % GH), q = col / H, j = col % H;
    float v = unit ? x[row * x_ld + j] : P[i];
    if (ib.p[q]) v += ib.p[q][j];
    if (rb.p[q]) v += rb.p[q][j];
    P[i] = v;
  });

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
    for (int q = 0; q < direct; ++q)
      ops.gemm(false, true, N, H, H, 1.f, hp, H, w.recurrent[q], w.recurrent_ld, 0.f, R + q * H, GH);
    if (b_hn) {
      const float* bias = b_hn;
      float* Rn = R + 2 * H;
      ops.each(NH, [=] NNGRAPH_HD(size_t i) { Rn[(i / H) * GH + i % H] += bias[i % H]; });
    }
    ops.each(NH, [=] NNGRAPH_HD(size_t i) {
      const size_t n = i / H;
      const int j = static_cast<int>(i % H);
      float c_unused, e_unused;
      math::rnn_forward_a(k, Pt + n * GH, R + n * GH, j, hp[i], has_c ? cp[i] : 0.f, mem.at(0, j), mem.at(1, j),
                          mem.at(3, j), hn + i, has_c ? cn + i : &c_unused, has_e ? Et + i : &e_unused);
    });
    if (k.gated_product()) {
      ops.gemm(false, true, N, H, H, 1.f, Et, H, w.recurrent[G - 1], w.recurrent_ld, 0.f, R + (G - 1) * H, GH);
      ops.each(NH, [=] NNGRAPH_HD(size_t i) {
        const size_t n = i / H;
        math::rnn_forward_b(k, Pt + n * GH, R + n * GH, static_cast<int>(i % H), hp[i], hn + i);
      });
    }
  }
}

// dst[j·stride] = Σ_rows a[r·lda + j] · (b ? b[r·ldb + j] : 1), for j < columns.
template <class Ops>
void column_sums(Ops& ops, int rows, int columns, const float* a, int lda, const float* b, int ldb, float* dst,
                 int stride) {
  if (!dst) return;
  ops.each(size_t(columns), [=] NNGRAPH_HD(size_t j) {
    float sum = 0.f;
    for (int r = 0; r < rows; ++r) sum += a[size_t(r) * lda + j] * (b ? b[size_t(r) * ldb + j] : 1.f);
    dst[j * stride] = sum;
  });
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
    float *dh_in = dh, *dc_in = dc, *dh_out = dhp, *dc_out = dcp;
    ops.each(NH, [=] NNGRAPH_HD(size_t i) {
      const size_t n = i / H;
      const int j = static_cast<int>(i % H);
      const float dht = dh_in[i] + (dyt ? dyt[n * dy_ld + j] : 0.f);
      float dc_unused, dq_unused;
      math::rnn_gradient_a(k, Pt + n * GH, dGt + n * GH, j, dht, has_c ? dc_in[i] : 0.f, hp[i], hn[i],
                           has_c ? cp[i] : 0.f, has_c ? cn[i] : 0.f, has_e ? Et[i] : 0.f, mem.at(0, j),
                           mem.at(1, j), mem.at(3, j), dh_out + i, has_c ? dc_out + i : &dc_unused,
                           dQt ? dQt + i : &dq_unused);
    });
    if (k.gated_product()) {
      float* tt = tmp;
      ops.gemm(false, false, N, H, H, 1.f, dGt + (G - 1) * H, GH, w.recurrent[G - 1], w.recurrent_ld, 0.f, tt, H);
      ops.each(NH, [=] NNGRAPH_HD(size_t i) {
        const size_t n = i / H;
        math::rnn_gradient_b(k, Pt + n * GH, dGt + n * GH, static_cast<int>(i % H), tt[i], hp[i], dh_out + i);
      });
    }
    for (int q = 0; q < direct; ++q) {
      const bool from_q = gru_after && q == 2;
      ops.gemm(false, false, N, H, H, 1.f, from_q ? dQt : dGt + q * H, from_q ? H : GH, w.recurrent[q],
               w.recurrent_ld, 1.f, dh_out, H);
    }
    std::swap(dh, dhp);
    std::swap(dc, dcp);
  }
  if (s.dh0) ops.copy(s.dh0, dh, NH);
  if (s.dc0 && has_c) ops.copy(s.dc0, dc, NH);

  // Input side, over all steps at once.
  if (s.dx) {
    if (g.unit_input) {
      float* dx = s.dx;
      const bool acc = s.accumulate_dx;
      ops.each(size_t(TN) * H, [=] NNGRAPH_HD(size_t i) {
        const size_t row = i / H, j = i % H;
        float sum = acc ? dx[i] : 0.f;
        for (int q = 0; q < G; ++q) sum += dG[row * GH + q * H + j];
        dx[i] = sum;
      });
    } else {
      for (int q = 0; q < G; ++q)
        ops.gemm(false, false, TN, I, H, 1.f, dG + q * H, GH, w.input[q], w.input_ld,
                 q == 0 && !s.accumulate_dx ? 0.f : 1.f, s.dx, I);
    }
  }
  const float* h_prev = hs + (g.reverse ? NH : 0);  // h₋ of every step, time-major
  const float* c_prev = cs + (g.reverse ? NH : 0);
  const float* c_next = cs + (g.reverse ? 0 : NH);
  for (int q = 0; q < G; ++q) {
    if (dw.input[q]) ops.gemm(true, false, H, I, TN, 1.f, dG + q * H, GH, s.x, s.x_ld, 0.f, dw.input[q], dw.input_ld);
    const bool from_q = gru_after && q == 2;
    const float* drec = from_q ? dQ : dG + q * H;
    const int drec_ld = from_q ? H : GH;
    if (dw.recurrent[q])
      ops.gemm(true, false, H, H, TN, 1.f, drec, drec_ld, q < direct ? h_prev : E, H, 0.f, dw.recurrent[q],
               dw.recurrent_ld);
    column_sums(ops, TN, H, dG + q * H, GH, nullptr, 0, dw.input_bias[q], 1);
    column_sums(ops, TN, H, drec, drec_ld, nullptr, 0, dw.recurrent_bias[q], 1);
  }
  if (g.peephole) {
    column_sums(ops, TN, H, dG, GH, c_prev, H, dw.memory[0], dw.memory_stride);
    column_sums(ops, TN, H, dG + H, GH, c_prev, H, dw.memory[1], dw.memory_stride);
    column_sums(ops, TN, H, dG + 3 * H, GH, c_next, H, dw.memory[3], dw.memory_stride);
    if (float* unused = dw.memory[2]) {
      const int stride = dw.memory_stride;
      ops.each(size_t(H), [=] NNGRAPH_HD(size_t j) { unused[j * stride] = 0.f; });
    }
  }
}

}  // namespace nngraph::rnn
