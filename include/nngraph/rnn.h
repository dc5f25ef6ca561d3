#pragma once
// Recurrent layers (MPSRNNSingleGateDescriptor, MPSLSTMDescriptor, MPSGRUDescriptor, plus the
// minimal gated unit), the RNN graph node and the matrix layers.
//
// Gates, in the order a layer's weights stack them (as cuDNN and PyTorch do):
//   single gate  h = φ(W x + U h₋ + b)                                   φ = cell_neuron
//   LSTM  i f g o: i = σ(Wᵢx + Uᵢh₋ + Pᵢ⊙c₋ + bᵢ), f likewise, g = φ(W_g x + U_g h₋ + b_g),
//         c = f⊙c₋ + i⊙g, o = σ(Wₒx + Uₒh₋ + Pₒ⊙c + bₒ), h = o⊙ψ(c)   ψ = cell_to_output_neuron
//   GRU   r z n:   r, z = σ(W x + U h₋ + b); h = (1−z)⊙n + z⊙h₋ with
//         reset_after (cuDNN, PyTorch): n = φ(Wₙx + bₙ + r⊙(Uₙh₋ + b_hn))
//         otherwise (the original, MPS): n = φ(Wₙx + Uₙ(r⊙h₋) + bₙ)
//   MGU   f n:     f = σ(W_f x + U_f h₋ + b_f), n = φ(Wₙx + Uₙ(f⊙h₋) + bₙ), h = (1−f)⊙h₋ + f⊙n
// σ is gate_neuron. P are the LSTM's diagonal memory (peephole) weights.
#include <memory>
#include <string>
#include <vector>

#include "nngraph/data_source.h"
#include "nngraph/nodes.h"

namespace nngraph {

enum class RNNCell { SingleGate, LSTM, GRU, MGU };
enum class SequenceDirection { Forward, Backward };
enum class BidirectionalCombine { Sum, Concatenate };

// One layer running in one direction. Its weights come from matrix data sources (or, as MPS
// takes them, plain 1×1 convolution sources of the same O × I weights), either
//   layer_weights: one gates·H × (I + H [+ 1 with peepholes]) matrix: row block k holds
//     gate k's [W | U | P] (P only in the i, f, o blocks' last column; the g block's is
//     unused); biases (gates·H, optional) are the input biases. With the unit input
//     transform the W columns are absent.
//   or one source per gate matrix: input_weights (H × I, with optional biases),
//     recurrent_weights (H × H, optional biases added too) and, with peepholes,
//     memory_weights for i, f, o (diagonal H: one value per channel).
struct RNNDescriptor {
  RNNCell cell = RNNCell::LSTM;
  int input_feature_channels = 0, output_feature_channels = 0;
  // The input enters every gate as it is (W = identity, no input weights); needs I == H.
  bool use_layer_input_unit_transform = false;
  SequenceDirection direction = SequenceDirection::Forward;
  NeuronDescriptor gate_neuron = NeuronDescriptor::make(NeuronType::Sigmoid);
  NeuronDescriptor cell_neuron = NeuronDescriptor::make(NeuronType::TanH);
  NeuronDescriptor cell_to_output_neuron = NeuronDescriptor::make(NeuronType::TanH);
  bool peephole = false;     // LSTM only
  bool reset_after = true;   // GRU only
  std::shared_ptr<DataSource> layer_weights;
  std::vector<std::shared_ptr<DataSource>> input_weights, recurrent_weights, memory_weights;

  int gates() const;
  static const char* cell_name(RNNCell cell);
  // The matrix a layer_weights source holds: gates·H rows, one per gate output.
  MatrixDescriptor layer_descriptor() const;
  // Throws InvalidInput naming `label` when sizes, neurons or sources do not fit.
  void validate(const std::string& label) const;
  // Sources in the order graphs and layers keep their weights.
  std::vector<WeightSource> weight_sources() const;
};

// Stacked layers; each stage is one descriptor, or a forward and a backward one whose
// outputs are summed or concatenated (bidirectional).
struct RNNStack {
  std::vector<std::vector<RNNDescriptor>> stages;
  BidirectionalCombine combine = BidirectionalCombine::Concatenate;
  int input_channels() const;
  int output_channels() const;
  int stage_channels(size_t stage) const;
  void validate(const std::string& label) const;
  std::vector<WeightSource> weight_sources() const;
  // Layer-directions in weight order; each one's first weight source index.
  std::vector<const RNNDescriptor*> layers() const;
  std::vector<size_t> layer_weight_offsets() const;
};

// A stack over sequences of matrices, one per step with one row per sequence
// (MPSRNNMatrixInferenceLayer, MPSRNNMatrixTrainingLayer). Weights travel as matrices: per
// data source (weight_sources() order) its weights (O × I/groups), then its biases (1 × O)
// when it has them. Initial and final states are per layer (N × H); empty lists mean zeros.
class RNNMatrixLayer {
 public:
  RNNMatrixLayer(RNNStack stack, Device device, std::string label = "rnn_matrix");
  const RNNStack& stack() const { return stack_; }
  const Device& device() const { return device_; }
  // The data sources' current values, and zeros of the same shapes.
  std::vector<Matrix> create_weight_matrices() const;
  std::vector<Matrix> create_weight_gradient_matrices() const;

  // What the gradient pass reads from a forward pass.
  struct TrainingState {
    int steps = 0, batch = 0;
    std::shared_ptr<Buffer> x, state;
  };
  struct Forward {
    std::vector<Matrix> outputs, h_final, c_final;  // c_final: LSTM layers only (others empty)
    std::shared_ptr<TrainingState> training_state;  // null unless training
  };
  Forward forward(const std::vector<Matrix>& sources, const std::vector<Matrix>& weights,
                  const std::vector<Matrix>& h0, const std::vector<Matrix>& c0, bool training) const;
  struct Gradients {
    std::vector<Matrix> sources, h0, c0;
  };
  // output_gradients: one per step, or empty when only final states carry gradient.
  // weight_gradients (may be empty): overwritten, or added to with accumulate.
  Gradients gradient(const std::vector<Matrix>& output_gradients, const TrainingState& state,
                     const std::vector<Matrix>& weights, const std::vector<Matrix>& weight_gradients,
                     bool accumulate, const std::vector<Matrix>& dh_final, const std::vector<Matrix>& dc_final) const;

 private:
  std::vector<std::pair<int, int>> weight_shapes() const;  // rows × columns per weight matrix
  std::vector<WeightsState> views(const std::vector<Matrix>& m, const char* what) const;
  RNNStack stack_;
  Device device_;
  std::string label_;
  std::vector<bool> has_bias_;  // per weight source
};

}  // namespace nngraph
