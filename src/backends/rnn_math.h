#pragma once
// Per-element recurrent cell math shared by every backend (see rnn.h for the formulas).
// A step runs in phases around matrix products:
//   forward:  R = h₋·Uᵀ for the gates that read h₋ → phase A; GRU (reset before) and MGU then
//             form Uₙ(r⊙h₋) / Uₙ(f⊙h₋) → phase B.
//   gradient: phase A gives the pre-activation gradients that need no product; GRU (reset
//             before) and MGU form d(r⊙h₋) = dnₚᵣₑ·Uₙ → phase B; then dh₋ += Σ dgate·U.
// Gate rows hold pre-activations on entry and activated values after the forward pass.
// The cell kind and its neuron set are template arguments, so an element loop holds no
// switch and vectorizes on cpu.
#include <type_traits>

#include "ops/rnn.h"
#include "backends/math.h"
#include "nngraph/rnn.h"

namespace nngraph::math {

// Neurons as the descriptors say (a switch per call). d_*: f' from the output, but d_out,
// which reads x or y as the neuron needs.
struct AnyNeurons {
  NeuronDescriptor g, a, o;
  bool out_from_output;
  NNGRAPH_HD float gate(float x) const { return neuron(g, x); }
  NNGRAPH_HD float act(float x) const { return neuron(a, x); }
  NNGRAPH_HD float out(float x) const { return neuron(o, x); }
  NNGRAPH_HD float d_gate(float y) const { return neuron_derivative(g, y); }
  NNGRAPH_HD float d_act(float y) const { return neuron_derivative(a, y); }
  NNGRAPH_HD float d_out(float x, float y) const { return neuron_derivative(o, out_from_output ? y : x); }
};

// The usual set, inline: sigmoid gates, tanh candidate and cell output.
struct SigmoidTanh {
  NNGRAPH_HD float gate(float x) const { return sigmoid(x); }
  NNGRAPH_HD float act(float x) const { return tanh_fast(x); }
  NNGRAPH_HD float out(float x) const { return tanh_fast(x); }
  NNGRAPH_HD float d_gate(float y) const { return y * (1.f - y); }
  NNGRAPH_HD float d_act(float y) const { return 1.f - y * y; }
  NNGRAPH_HD float d_out(float, float y) const { return 1.f - y * y; }
};

// What one element of a step leaves: h (phase A of gated_product cells leaves it to phase
// B), c (LSTM) and e, the per-step extra value (GRU: Uₙh₋+b_hn or r⊙h₋; MGU: f⊙h₋).
struct StepValues {
  float h = 0.f, c = 0.f, e = 0.f;
};

// What gradient phase A leaves for one element: the direct part of d/d(h₋), d/d(c₋) (LSTM)
// and the GRU's d/d(Uₙh₋+b_hn).
struct StepGradients {
  float dhp = 0.f, dcp = 0.f, dq = 0.f;
};

template <RNNCell C, class Neurons>
struct Cell {
  static constexpr RNNCell cell = C;
  static constexpr bool has_c = C == RNNCell::LSTM;
  static constexpr bool has_e = C == RNNCell::GRU || C == RNNCell::MGU;
  Neurons nn;
  int hidden;
  bool reset_after;

  // Phase B exists: the candidate's product reads a gated state.
  NNGRAPH_HD bool gated_product() const { return C == RNNCell::MGU || (C == RNNCell::GRU && !reset_after); }

  // One element j of one row. p: the row's gates (pre-activation in, activated out);
  // r: its recurrent products; mi, mf, mo: peephole values (LSTM).
  NNGRAPH_HD StepValues forward_a(float* p, const float* r, int j, float hp, float cp, float mi, float mf,
                                  float mo) const {
    const int H = hidden;
    StepValues v;
    if constexpr (C == RNNCell::SingleGate) {
      v.h = p[j] = nn.act(p[j] + r[j]);
    } else if constexpr (C == RNNCell::LSTM) {
      const float i = p[j] = nn.gate(p[j] + r[j] + mi * cp);
      const float f = p[H + j] = nn.gate(p[H + j] + r[H + j] + mf * cp);
      const float g = p[2 * H + j] = nn.act(p[2 * H + j] + r[2 * H + j]);
      v.c = f * cp + i * g;
      const float o = p[3 * H + j] = nn.gate(p[3 * H + j] + r[3 * H + j] + mo * v.c);
      v.h = o * nn.out(v.c);
    } else if constexpr (C == RNNCell::GRU) {
      const float rg = p[j] = nn.gate(p[j] + r[j]);
      const float z = p[H + j] = nn.gate(p[H + j] + r[H + j]);
      if (reset_after) {
        v.e = r[2 * H + j];  // Uₙh₋ + b_hn
        const float n = p[2 * H + j] = nn.act(p[2 * H + j] + rg * v.e);
        v.h = (1.f - z) * n + z * hp;
      } else {
        v.e = rg * hp;
      }
    } else {
      v.e = (p[j] = nn.gate(p[j] + r[j])) * hp;
    }
    return v;
  }

  // Phase B (gated_product cells): r holds Uₙ(gate⊙h₋) in the candidate's column block.
  // Returns h.
  NNGRAPH_HD float forward_b(float* p, const float* r, int j, float hp) const {
    const int H = hidden;
    if constexpr (C == RNNCell::GRU) {
      const float z = p[H + j];
      const float n = p[2 * H + j] = nn.act(p[2 * H + j] + r[2 * H + j]);
      return (1.f - z) * n + z * hp;
    }
    const float f = p[j];
    const float n = p[H + j] = nn.act(p[H + j] + r[H + j]);
    return (1.f - f) * hp + f * n;
  }

  // Gradient phase A for element j. p: activated gates; dg: the row's pre-activation
  // gradients (written); dh: d(loss)/d(h) of this step; dc: of c (LSTM).
  NNGRAPH_HD StepGradients gradient_a(const float* p, float* dg, int j, float dh, float dc, float hp, float hn,
                                      float cp, float cn, float e, float mi, float mf, float mo) const {
    const int H = hidden;
    StepGradients d;
    if constexpr (C == RNNCell::SingleGate) {
      dg[j] = dh * nn.d_act(hn);
    } else if constexpr (C == RNNCell::LSTM) {
      const float i = p[j], f = p[H + j], g = p[2 * H + j], o = p[3 * H + j];
      const float co = nn.out(cn);
      const float d_o = dh * co * nn.d_gate(o);
      const float dct = dc + dh * o * nn.d_out(cn, co) + d_o * mo;
      const float d_i = dct * g * nn.d_gate(i);
      const float d_f = dct * cp * nn.d_gate(f);
      dg[j] = d_i;
      dg[H + j] = d_f;
      dg[2 * H + j] = dct * i * nn.d_act(g);
      dg[3 * H + j] = d_o;
      d.dcp = dct * f + d_i * mi + d_f * mf;
    } else if constexpr (C == RNNCell::GRU) {
      const float rg = p[j], z = p[H + j], n = p[2 * H + j];
      const float dn = dh * (1.f - z) * nn.d_act(n);
      dg[H + j] = dh * (hp - n) * nn.d_gate(z);
      dg[2 * H + j] = dn;
      d.dhp = dh * z;
      if (reset_after) {
        dg[j] = dn * e * nn.d_gate(rg);
        d.dq = dn * rg;
      }
    } else {
      const float f = p[j], n = p[H + j];
      dg[H + j] = dh * f * nn.d_act(n);
      dg[j] = dh * (n - hp);  // d/d(f) so far; phase B adds the product's share
      d.dhp = dh * (1.f - f);
    }
    return d;
  }

  // Gradient phase B: t = d/d(gate⊙h₋) of element j (from dnₚᵣₑ·Uₙ). Returns the share of
  // d/d(h₋) that flows through the gate's product.
  NNGRAPH_HD float gradient_b(const float* p, float* dg, int j, float t, float hp) const {
    const float gate = p[j];
    if constexpr (C == RNNCell::GRU)
      dg[j] = t * hp * nn.d_gate(gate);
    else
      dg[j] = (dg[j] + t * hp) * nn.d_gate(gate);
    return t * gate;
  }
};

// n is type t with its plain parameters (tanh: a = b = 1; relu: no leak), as cuDNN's cells
// and SigmoidTanh have them.
inline bool is_plain(const NeuronDescriptor& n, NeuronType t) {
  return n.type == t && (t != NeuronType::TanH || (n.a == 1.f && n.b == 1.f)) && (t != NeuronType::ReLU || n.a == 0.f);
}

// Calls fn(Cell<C, Neurons>{...}) for the layer's cell, with SigmoidTanh where its neurons are
// those (host side).
template <class F>
void with_cell(const RNNLayerGeometry& g, F&& fn) {
  const bool usual = is_plain(g.act, NeuronType::TanH) &&
                     (g.cell == RNNCell::SingleGate || (is_plain(g.gate, NeuronType::Sigmoid) &&
                                                        (g.cell != RNNCell::LSTM || is_plain(g.out, NeuronType::TanH))));
  const AnyNeurons any{g.gate, g.act, g.out, g.out.derivative_from_output()};
  auto pick = [&](auto kind) {
    constexpr RNNCell C = decltype(kind)::value;
    if (usual)
      fn(Cell<C, SigmoidTanh>{{}, g.hidden, g.reset_after});
    else
      fn(Cell<C, AnyNeurons>{any, g.hidden, g.reset_after});
  };
  switch (g.cell) {
    case RNNCell::SingleGate: return pick(std::integral_constant<RNNCell, RNNCell::SingleGate>{});
    case RNNCell::LSTM: return pick(std::integral_constant<RNNCell, RNNCell::LSTM>{});
    case RNNCell::GRU: return pick(std::integral_constant<RNNCell, RNNCell::GRU>{});
    case RNNCell::MGU: return pick(std::integral_constant<RNNCell, RNNCell::MGU>{});
  }
}

}  // namespace nngraph::math
