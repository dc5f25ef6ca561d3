#pragma once
// Per-element recurrent cell math shared by every backend (see rnn.h for the formulas).
// A step runs in phases around matrix products:
//   forward:  R = h₋·Uᵀ for the gates that read h₋ → phase A; GRU (reset before) and MGU then
//             form Uₙ(r⊙h₋) / Uₙ(f⊙h₋) → phase B.
//   gradient: phase A gives the pre-activation gradients that need no product; GRU (reset
//             before) and MGU form d(r⊙h₋) = dnₚᵣₑ·Uₙ → phase B; then dh₋ += Σ dgate·U.
// Gate rows hold pre-activations on entry and activated values after the forward pass.
#include "backends/backend.h"
#include "backends/math.h"
#include "nngraph/rnn.h"

namespace nngraph::math {

struct RNNCellParams {
  RNNCell cell;
  int hidden;
  NeuronDescriptor gate, act, out;
  bool peephole, reset_after;
  bool out_from_output;  // out's derivative reads its output (all but absolute)
  // Phase B exists: the candidate's product reads a gated state.
  NNGRAPH_HD bool gated_product() const {
    return cell == RNNCell::MGU || (cell == RNNCell::GRU && !reset_after);
  }
};

inline RNNCellParams cell_params(const RNNLayerGeometry& g) {
  return {g.cell, g.hidden, g.gate, g.act, g.out, g.peephole, g.reset_after, g.out.derivative_from_output()};
}

// f'(x) for a neuron whose output y is known (validated: derivable from y).
NNGRAPH_HD inline float d_out(const NeuronDescriptor& n, float y) { return neuron_derivative(n, y); }

// What one element of a step leaves: h (phase A of gated_product cells leaves it to phase
// B), c (LSTM) and e, the per-step extra value (GRU: Uₙh₋+b_hn or r⊙h₋; MGU: f⊙h₋).
struct StepValues {
  float h = 0.f, c = 0.f, e = 0.f;
};

// One element j of one row. p: the row's gates (pre-activation in, activated out);
// r: its recurrent products; m: peephole values for i, f, o (LSTM).
NNGRAPH_HD inline StepValues rnn_forward_a(const RNNCellParams& k, float* p, const float* r, int j, float hp,
                                           float cp, float mi, float mf, float mo) {
  const int H = k.hidden;
  StepValues v;
  switch (k.cell) {
    case RNNCell::SingleGate:
      v.h = p[j] = neuron(k.act, p[j] + r[j]);
      break;
    case RNNCell::LSTM: {
      const float i = p[j] = neuron(k.gate, p[j] + r[j] + mi * cp);
      const float f = p[H + j] = neuron(k.gate, p[H + j] + r[H + j] + mf * cp);
      const float g = p[2 * H + j] = neuron(k.act, p[2 * H + j] + r[2 * H + j]);
      v.c = f * cp + i * g;
      const float o = p[3 * H + j] = neuron(k.gate, p[3 * H + j] + r[3 * H + j] + mo * v.c);
      v.h = o * neuron(k.out, v.c);
      break;
    }
    case RNNCell::GRU: {
      const float rg = p[j] = neuron(k.gate, p[j] + r[j]);
      const float z = p[H + j] = neuron(k.gate, p[H + j] + r[H + j]);
      if (k.reset_after) {
        v.e = r[2 * H + j];  // Uₙh₋ + b_hn
        const float n = p[2 * H + j] = neuron(k.act, p[2 * H + j] + rg * v.e);
        v.h = (1.f - z) * n + z * hp;
      } else {
        v.e = rg * hp;
      }
      break;
    }
    case RNNCell::MGU:
      v.e = (p[j] = neuron(k.gate, p[j] + r[j])) * hp;
      break;
  }
  return v;
}

// Phase B (gated_product cells): r holds Uₙ(gate⊙h₋) in the candidate's column block.
// Returns h.
NNGRAPH_HD inline float rnn_forward_b(const RNNCellParams& k, float* p, const float* r, int j, float hp) {
  const int H = k.hidden;
  if (k.cell == RNNCell::GRU) {
    const float z = p[H + j];
    const float n = p[2 * H + j] = neuron(k.act, p[2 * H + j] + r[2 * H + j]);
    return (1.f - z) * n + z * hp;
  }
  const float f = p[j];
  const float n = p[H + j] = neuron(k.act, p[H + j] + r[H + j]);
  return (1.f - f) * hp + f * n;
}

// What gradient phase A leaves for one element: the direct part of d/d(h₋), d/d(c₋) (LSTM)
// and the GRU's d/d(Uₙh₋+b_hn).
struct StepGradients {
  float dhp = 0.f, dcp = 0.f, dq = 0.f;
};

// Gradient phase A for element j. p: activated gates; dg: the row's pre-activation
// gradients (written); dh: d(loss)/d(h) of this step; dc: of c (LSTM).
NNGRAPH_HD inline StepGradients rnn_gradient_a(const RNNCellParams& k, const float* p, float* dg, int j, float dh,
                                               float dc, float hp, float hn, float cp, float cn, float e, float mi,
                                               float mf, float mo) {
  const int H = k.hidden;
  StepGradients d;
  switch (k.cell) {
    case RNNCell::SingleGate:
      dg[j] = dh * d_out(k.act, hn);
      break;
    case RNNCell::LSTM: {
      const float i = p[j], f = p[H + j], g = p[2 * H + j], o = p[3 * H + j];
      const float co = neuron(k.out, cn);
      const float d_o = dh * co * d_out(k.gate, o);
      const float dct = dc + dh * o * neuron_derivative(k.out, k.out_from_output ? co : cn) + d_o * mo;
      const float d_i = dct * g * d_out(k.gate, i);
      const float d_f = dct * cp * d_out(k.gate, f);
      dg[j] = d_i;
      dg[H + j] = d_f;
      dg[2 * H + j] = dct * i * d_out(k.act, g);
      dg[3 * H + j] = d_o;
      d.dcp = dct * f + d_i * mi + d_f * mf;
      break;
    }
    case RNNCell::GRU: {
      const float rg = p[j], z = p[H + j], n = p[2 * H + j];
      const float dn = dh * (1.f - z) * d_out(k.act, n);
      dg[H + j] = dh * (hp - n) * d_out(k.gate, z);
      dg[2 * H + j] = dn;
      d.dhp = dh * z;
      if (k.reset_after) {
        dg[j] = dn * e * d_out(k.gate, rg);
        d.dq = dn * rg;
      }
      break;
    }
    case RNNCell::MGU: {
      const float f = p[j], n = p[H + j];
      dg[H + j] = dh * f * d_out(k.act, n);
      dg[j] = dh * (n - hp);  // d/d(f) so far; phase B adds the product's share
      d.dhp = dh * (1.f - f);
      break;
    }
  }
  return d;
}

// Gradient phase B: t = d/d(gate⊙h₋) of element j (from dnₚᵣₑ·Uₙ). Returns the share of
// d/d(h₋) that flows through the gate's product.
NNGRAPH_HD inline float rnn_gradient_b(const RNNCellParams& k, const float* p, float* dg, int j, float t, float hp) {
  const float gate = p[j];
  if (k.cell == RNNCell::GRU)
    dg[j] = t * hp * d_out(k.gate, gate);
  else
    dg[j] = (dg[j] + t * hp) * d_out(k.gate, gate);
  return t * gate;
}

}  // namespace nngraph::math
