#include "ops/rnn_stack.h"

#include "ops/convert.h"
#include "ops/rnn.h"

namespace nngraph::rnn_stack {
namespace {

RNNLayerGeometry geometry(const RNNDescriptor& d, int steps, int batch) {
  return RNNLayerGeometry{d.cell, d.gates(), d.input_feature_channels, d.output_feature_channels, steps, batch,
                          d.direction == SequenceDirection::Backward, d.use_layer_input_unit_transform,
                          d.peephole, d.reset_after, d.gate_neuron, d.cell_neuron, d.cell_to_output_neuron};
}

// A layer's per-gate views of its weight states (or of their gradients).
template <class P>
RNNLayerTensors<P> tensors(const RNNDescriptor& d, const WeightsState* ws) {
  RNNLayerTensors<P> t;
  const int g = d.gates(), h = d.output_feature_channels, in = d.input_feature_channels;
  const bool unit = d.use_layer_input_unit_transform;
  auto ptr = [](const std::shared_ptr<Buffer>& b) -> P* { return b ? static_cast<P*>(b->data()) : nullptr; };
  if (d.layer_weights) {
    P* base = ptr(ws[0].weights());
    P* bias = ptr(ws[0].biases());
    const int cols = unit ? 0 : in;
    const int ld = cols + h + (d.peephole ? 1 : 0);
    for (int q = 0; q < g; ++q) {
      if (base) {  // null: a gradient nobody wants (frozen weights)
        P* rows = base + size_t(q) * h * ld;
        if (!unit) t.input[q] = rows;
        t.recurrent[q] = rows + cols;
        if (d.peephole) t.memory[q] = rows + cols + h;
      }
      if (bias) t.input_bias[q] = bias + q * h;
    }
    t.input_ld = t.recurrent_ld = t.memory_stride = ld;
    return t;
  }
  size_t i = 0;
  if (!unit)
    for (int q = 0; q < g; ++q, ++i) {
      t.input[q] = ptr(ws[i].weights());
      t.input_bias[q] = ptr(ws[i].biases());
    }
  for (int q = 0; q < g; ++q, ++i) {
    t.recurrent[q] = ptr(ws[i].weights());
    t.recurrent_bias[q] = ptr(ws[i].biases());
  }
  if (d.peephole)
    for (int q : {0, 1, 3}) t.memory[q] = ptr(ws[i++].weights());
  t.input_ld = in;
  t.recurrent_ld = h;
  return t;
}

template <class T>
T at(const std::vector<T>& v, size_t i) {
  return v.empty() ? nullptr : v[i];
}

float* floats(const std::shared_ptr<Buffer>& b) { return static_cast<float*>(b->data()); }

}  // namespace

Layout layout(const RNNStack& stack, int steps, int batch) {
  Layout l;
  l.steps = steps;
  l.batch = batch;
  for (const RNNDescriptor* d : stack.layers()) {
    l.layers.push_back(geometry(*d, steps, batch));
    l.layer_state.push_back(l.total);
    l.total += l.layers.back().state_floats();
  }
  for (size_t k = 0; k + 1 < stack.stages.size(); ++k) {  // the last stage writes io.y instead
    l.stage_output.push_back(l.total);
    l.total += size_t(steps) * batch * stack.stage_channels(k);
  }
  return l;
}

void forward(Backend& b, const RNNStack& stack, const Layout& l, const WeightsState* w, float* state, const IO& io) {
  const auto layers = stack.layers();
  const auto offsets = stack.layer_weight_offsets();
  const int T = l.steps, N = l.batch;
  size_t li = 0;
  for (size_t k = 0; k < stack.stages.size(); ++k) {
    const int in = stack.stages[k][0].input_feature_channels, out = stack.stage_channels(k);
    const float* x = k == 0 ? io.x : state + l.stage_output[k - 1];
    const bool last = k + 1 == stack.stages.size();
    float* y = last ? io.y : state + l.stage_output[k];
    for (size_t d = 0; d < stack.stages[k].size(); ++d, ++li) {
      const RNNLayerGeometry& g = l.layers[li];
      float* st = state + l.layer_state[li];
      RNNSequence s;
      s.x = x;
      s.x_ld = in;
      s.h0 = at(io.h0, li);
      s.c0 = at(io.c0, li);
      s.state = st;
      s.for_gradient = io.for_gradient;
      dispatch<RNNForwardKernel>(b, g, tensors<const float>(*layers[li], w + offsets[li]), s);
      const int col = d == 1 && stack.combine == BidirectionalCombine::Concatenate ? stack.stages[k][0].output_feature_channels : 0;
      const bool add = d == 1 && stack.combine == BidirectionalCombine::Sum;
      const int H = g.hidden;
      if (y) copy_float_rows(b, y + col, out, g.outputs(g.h(st)), H, T * N, H, add);
      if (last && io.y_last) copy_float_rows(b, io.y_last + col, out, g.final_state(g.h(st)), H, N, H, add);
      const size_t bytes = size_t(N) * H * sizeof(float);
      if (float* h = at(io.h_final, li)) b.copy(h, g.final_state(g.h(st)), bytes);
      if (float* c = at(io.c_final, li); c && g.cell_has_c()) b.copy(c, g.final_state(g.c(st)), bytes);
    }
  }
}

void gradient(Backend& b, const RNNStack& stack, const Layout& l, const WeightsState* w, float* state, const IO& io,
              GradientState* dw) {
  const auto layers = stack.layers();
  const auto offsets = stack.layer_weight_offsets();
  const int T = l.steps, N = l.batch;
  const float* dy = io.dy;
  const float* dy_last = io.dy_last;
  std::shared_ptr<Buffer> dy_buffer;  // the stage above's input gradient
  size_t li = layers.size();
  for (size_t k = stack.stages.size(); k-- > 0;) {
    const auto& stage = stack.stages[k];
    const int in = stage[0].input_feature_channels, out = stack.stage_channels(k);
    const float* x = k == 0 ? io.x : state + l.stage_output[k - 1];
    std::shared_ptr<Buffer> dx_buffer;
    float* dx = io.dx;
    if (k > 0) {
      dx_buffer = b.allocate(size_t(T) * N * in * sizeof(float));
      dx = floats(dx_buffer);
    }
    li -= stage.size();
    for (size_t d = 0; d < stage.size(); ++d) {
      const size_t layer = li + d;
      const RNNLayerGeometry& g = l.layers[layer];
      const int H = g.hidden;
      const int col = d == 1 && stack.combine == BidirectionalCombine::Concatenate ? stage[0].output_feature_channels : 0;
      RNNSequence s;
      s.x = x;
      s.x_ld = in;
      s.state = state + l.layer_state[layer];
      s.dy = dy ? dy + col : nullptr;
      s.dy_ld = out;
      std::shared_ptr<Buffer> dh_buffer;
      s.dh_final = at(io.dh_final, layer);
      if (dy_last) {  // the combined final state's gradient, plus any given for this layer
        dh_buffer = b.allocate(size_t(N) * H * sizeof(float));
        copy_float_rows(b, floats(dh_buffer), H, dy_last + col, out, N, H, false);
        if (s.dh_final) copy_float_rows(b, floats(dh_buffer), H, s.dh_final, H, N, H, true);
        s.dh_final = floats(dh_buffer);
      }
      s.dc_final = at(io.dc_final, layer);
      s.dx = dx;
      s.accumulate_dx = d == 1;
      s.dh0 = at(io.dh0, layer);
      s.dc0 = g.cell_has_c() ? at(io.dc0, layer) : nullptr;
      RNNLayerGradients grads;
      if (dw) grads = tensors<float>(*layers[layer], dw + offsets[layer]);
      dispatch<RNNGradientKernel>(b, g, tensors<const float>(*layers[layer], w + offsets[layer]), s, grads);
    }
    dy = dx;
    dy_last = nullptr;
    dy_buffer = std::move(dx_buffer);
  }
}

}  // namespace nngraph::rnn_stack
