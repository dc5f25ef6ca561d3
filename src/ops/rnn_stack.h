#pragma once
// Runs a stack of recurrent layers (stages of one or two directions) over time-major
// sequences: the graph node and the matrix layers share it.
#include <vector>

#include "ops/rnn.h"
#include "nngraph/rnn.h"

namespace nngraph::rnn_stack {

// Where each layer's state and the combined output of each stage but the last (the next
// stage's input) lie in a stack's training state, for T steps of N rows.
struct Layout {
  int steps = 0, batch = 0;
  std::vector<RNNLayerGeometry> layers;
  std::vector<size_t> layer_state, stage_output;  // float offsets
  size_t total = 0;
};
Layout layout(const RNNStack& stack, int steps, int batch);

// Per layer vectors may be empty (zeros in, nothing out); other pointers may be null.
struct IO {
  const float* x = nullptr;  // steps × batch × input, time-major
  std::vector<const float*> h0, c0;
  float* y = nullptr;       // steps × batch × output (may be null: final states only)
  float* y_last = nullptr;  // batch × output: the last stage's final states, combined
  bool for_gradient = true;  // a gradient pass will read this state
  std::vector<float*> h_final, c_final;
  // Gradient pass:
  const float* dy = nullptr;
  const float* dy_last = nullptr;
  std::vector<const float*> dh_final, dc_final;
  float* dx = nullptr;
  std::vector<float*> dh0, dc0;
};

// w: the stack's weight states in RNNStack::weight_sources() order.
void forward(Backend& b, const RNNStack& stack, const Layout& l, const WeightsState* w, float* state, const IO& io);
// dw (may be null: no weight gradients) in the same order; overwritten.
void gradient(Backend& b, const RNNStack& stack, const Layout& l, const WeightsState* w, float* state, const IO& io,
              GradientState* dw);

}  // namespace nngraph::rnn_stack
