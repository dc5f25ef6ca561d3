#pragma once
// The recurrent graph node and the recurrent layers' kernels: one layer in one direction over
// a sequence, forward and gradient. The node (ops/rnn.cpp) and the matrix layers
// (ops/rnn_matrix.cpp) both run stacks of them (ops/rnn_stack.cpp).
#include <cstddef>

#include "backends/kernel.h"
#include "nngraph/rnn.h"

namespace nngraph {

// One recurrent layer running in one direction over `steps` steps of `batch` rows.
struct RNNLayerGeometry {
  RNNCell cell;
  int gates, input, hidden, steps, batch;
  bool reverse, unit_input, peephole, reset_after;
  NeuronDescriptor gate, act, out;  // gate neuron, cell (candidate) neuron, cell-to-output neuron
  // Of every tensor the layer reads and writes (one type per layer, as cuDNN's RNNs take it).
  DType dtype = DType::Float32;
  // Kernels written for float32 call this first: Unsupported for any other dtype.
  void require_float32() const;
  // The training state one run leaves, in floats: states h (and c) at steps+1 boundaries,
  // activated gates per step, and per step the GRU's Uₙh₋+b_hn or the r⊙h₋ / f⊙h₋ product.
  size_t state_floats() const;
  float* h(float* state) const { return state; }
  float* c(float* state) const { return state + boundary(); }
  float* gate_values(float* state) const { return c(state) + (cell_has_c() ? boundary() : 0); }
  float* extra(float* state) const { return gate_values(state) + size_t(steps) * batch * gates * hidden; }
  // Where the outputs of steps 0..T-1 lie in h (contiguous) and the final state.
  float* outputs(float* states) const { return states + (reverse ? 0 : size_t(batch) * hidden); }
  float* final_state(float* states) const { return states + (reverse ? 0 : size_t(steps) * batch * hidden); }
  bool cell_has_c() const;
  bool has_extra() const;
  size_t boundary() const { return size_t(steps + 1) * batch * hidden; }
};

// A layer's tensors per gate: matrices with a row stride (from one layer source or one
// source per gate); null where absent. memory: LSTM peepholes, one value per channel every
// memory_stride floats (the g entry is unused; its gradient is written as zero).
template <class T>
struct RNNLayerTensors {
  T* input[4] = {};
  T* recurrent[4] = {};
  T* input_bias[4] = {};
  T* recurrent_bias[4] = {};
  T* memory[4] = {};
  int input_ld = 0, recurrent_ld = 0, memory_stride = 1;
};
using RNNLayerWeights = RNNLayerTensors<const float>;
using RNNLayerGradients = RNNLayerTensors<float>;

// Sequences are time-major rows: row t·batch + n. Null pointers: zeros / not wanted.
struct RNNSequence {
  const float* x = nullptr;
  int x_ld = 0;
  const float* h0 = nullptr;
  const float* c0 = nullptr;
  float* state = nullptr;  // RNNLayerGeometry::state_floats()
  bool for_gradient = true;  // forward: a gradient pass will follow (backends may keep more)
  // Gradient pass:
  const float* dy = nullptr;
  int dy_ld = 0;
  const float* dh_final = nullptr;
  const float* dc_final = nullptr;
  float* dx = nullptr;  // batch rows of `input`, contiguous
  bool accumulate_dx = false;
  float* dh0 = nullptr;
  float* dc0 = nullptr;
};

// Fills the state (outputs, final states, what the gradient reads).
struct RNNForwardKernel
    : KernelOf<void(Backend&, const RNNLayerGeometry&, const RNNLayerWeights&, const RNNSequence&)> {
  static constexpr const char* name = "rnn";
};
// Reads that state and overwrites every gradient given.
struct RNNGradientKernel : KernelOf<void(Backend&, const RNNLayerGeometry&, const RNNLayerWeights&,
                                         const RNNSequence&, const RNNLayerGradients&)> {
  static constexpr const char* name = "rnn_gradient";
};

// Runs a stack over the sequence of an image's positions (row by row: H·W steps, each
// C features). The result holds every step's output (N × O × H × W) or, with
// last_only, the final state of the last stage (N × O × 1 × 1; a backward layer's final
// state is the one at the first position). Initial states are zero.
class RNNNode : public FilterNode {
 public:
  static std::shared_ptr<RNNNode> create(ImageNodePtr source, RNNStack stack, bool last_only,
                                         std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  // Its layers are stack() (Python: RNN.layers).
  Attributes attributes(const std::vector<ImageShape>&) const override {
    return {{"last_only", int64_t(last_only_)},
            {"combine", std::string(stack_.combine == BidirectionalCombine::Sum ? "sum" : "concatenate")}};
  }
  void encode(const EncodeArgs& args) const override;
  std::vector<WeightSource> weight_sources() const override { return stack_.weight_sources(); }
  size_t state_size(const std::vector<ImageShape>& sources) const override;
  const RNNStack& stack() const { return stack_; }
  bool last_only() const { return last_only_; }

  static constexpr const char* kKind = "rnn";

 protected:
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  RNNNode(ImageNodePtr source, std::string label) : FilterNode({std::move(source)}, std::move(label), kKind) {}
  RNNStack stack_;
  bool last_only_ = false;
};

}  // namespace nngraph
