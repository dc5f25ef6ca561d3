// Recurrent layer descriptors: sizes, neurons and weight sources checked once.
#include <optional>

#include "nngraph/error.h"
#include "nngraph/rnn.h"

namespace nngraph {
namespace {

MatrixDescriptor matrix(int rows, int columns) { return MatrixDescriptor{rows, columns, false}; }
MatrixDescriptor diagonal(int n) { return MatrixDescriptor{n, n, true}; }

// The matrix a source holds: a matrix descriptor, or (as MPS's recurrent descriptors take) a
// plain 1×1 convolution's O × I weights, diagonal when grouped per channel.
std::optional<MatrixDescriptor> as_matrix(const ParameterDescriptor& pd) {
  if (const auto* m = std::get_if<MatrixDescriptor>(&pd)) return *m;
  const auto* d = std::get_if<ConvolutionDescriptor>(&pd);
  if (!d || d->kernel_height != 1 || d->kernel_width != 1 || d->stride_y != 1 || d->stride_x != 1 ||
      d->dilation_y != 1 || d->dilation_x != 1 || d->neuron.type != NeuronType::None)
    return std::nullopt;
  const int in = d->input_feature_channels, out = d->output_feature_channels;
  if (d->groups == 1) return matrix(out, in);
  if (d->groups == in && in == out) return diagonal(out);
  return std::nullopt;
}

void check_source(const std::shared_ptr<DataSource>& s, const MatrixDescriptor& want, const std::string& label,
                  const std::string& what) {
  if (!s) fail("[", label, "] ", what, " data source is None");
  const ParameterDescriptor d = s->descriptor();
  const auto m = as_matrix(d);
  if (!m || !(*m == want))
    fail("[", label, "] ", what, " data source '", s->label(), "' describes ", kind_name(d), " ", describe(d),
         ", expected a ", want.str(), " matrix");
}

}  // namespace

int RNNDescriptor::gates() const {
  switch (cell) {
    case RNNCell::SingleGate: return 1;
    case RNNCell::LSTM: return 4;
    case RNNCell::GRU: return 3;
    case RNNCell::MGU: return 2;
  }
  return 1;
}

const char* RNNDescriptor::cell_name(RNNCell cell) {
  switch (cell) {
    case RNNCell::SingleGate: return "single_gate";
    case RNNCell::LSTM: return "lstm";
    case RNNCell::GRU: return "gru";
    case RNNCell::MGU: return "mgu";
  }
  return "rnn";
}

MatrixDescriptor RNNDescriptor::layer_descriptor() const {
  const int h = output_feature_channels;
  return matrix(gates() * h, (use_layer_input_unit_transform ? 0 : input_feature_channels) + h + (peephole ? 1 : 0));
}

void RNNDescriptor::validate(const std::string& label) const {
  const int in = input_feature_channels, h = output_feature_channels, g = gates();
  if (in < 1 || h < 1)
    fail("[", label, "] ", cell_name(cell), " needs positive feature channels, got ", in, " in and ", h, " out");
  if (use_layer_input_unit_transform && in != h)
    fail("[", label, "] the unit input transform needs as many input as output channels, got ", in, " and ", h);
  if (peephole && cell != RNNCell::LSTM) fail("[", label, "] memory (peephole) weights are an LSTM option");
  for (const NeuronDescriptor* n : {&gate_neuron, &cell_neuron})
    if (!n->derivative_from_output())
      fail("[", label, "] a gate or cell neuron must be differentiable from its output; ", n->name(), " (a=", n->a,
           ") is not");
  if (layer_weights) {
    if (!input_weights.empty() || !recurrent_weights.empty() || !memory_weights.empty())
      fail("[", label, "] give layer weights or per-gate weights, not both");
    check_source(layer_weights, layer_descriptor(), label, "layer");
    return;
  }
  const size_t want_in = use_layer_input_unit_transform ? 0 : g;
  if (input_weights.size() != want_in)
    fail("[", label, "] ", cell_name(cell), " needs ", want_in, " input weight source(s), got ", input_weights.size());
  if (recurrent_weights.size() != static_cast<size_t>(g))
    fail("[", label, "] ", cell_name(cell), " needs ", g, " recurrent weight sources, got ", recurrent_weights.size());
  if (memory_weights.size() != (peephole ? 3u : 0u))
    fail("[", label, "] needs ", peephole ? 3 : 0, " memory weight sources (input, forget, output gates), got ",
         memory_weights.size());
  for (size_t i = 0; i < input_weights.size(); ++i)
    check_source(input_weights[i], matrix(h, in), label, cat("input weights ", i));
  for (size_t i = 0; i < recurrent_weights.size(); ++i)
    check_source(recurrent_weights[i], matrix(h, h), label, cat("recurrent weights ", i));
  for (size_t i = 0; i < memory_weights.size(); ++i)
    check_source(memory_weights[i], diagonal(h), label, cat("memory weights ", i));
}

std::vector<WeightSource> RNNDescriptor::weight_sources() const {
  if (layer_weights) return {{layer_weights.get(), layer_descriptor()}};
  const int in = input_feature_channels, h = output_feature_channels;
  std::vector<WeightSource> out;
  for (const auto& s : input_weights) out.push_back({s.get(), matrix(h, in)});
  for (const auto& s : recurrent_weights) out.push_back({s.get(), matrix(h, h)});
  for (const auto& s : memory_weights) out.push_back({s.get(), diagonal(h)});
  return out;
}

int RNNStack::input_channels() const { return stages.front().front().input_feature_channels; }

int RNNStack::stage_channels(size_t stage) const {
  const auto& s = stages[stage];
  int out = s[0].output_feature_channels;
  if (s.size() == 2 && combine == BidirectionalCombine::Concatenate) out += s[1].output_feature_channels;
  return out;
}

int RNNStack::output_channels() const { return stage_channels(stages.size() - 1); }

void RNNStack::validate(const std::string& label) const {
  if (stages.empty()) fail("[", label, "] needs at least one layer");
  for (size_t k = 0; k < stages.size(); ++k) {
    const auto& s = stages[k];
    const std::string name = cat(label, " layer ", k);
    if (s.empty() || s.size() > 2) fail("[", name, "] a stage is one layer or a forward and a backward layer");
    for (const auto& d : s) d.validate(name);
    if (s.size() == 2) {
      if (s[0].direction != SequenceDirection::Forward || s[1].direction != SequenceDirection::Backward)
        fail("[", name, "] a bidirectional stage is a forward layer then a backward layer");
      if (s[0].input_feature_channels != s[1].input_feature_channels)
        fail("[", name, "] the two directions read ", s[0].input_feature_channels, " and ",
             s[1].input_feature_channels, " input channels");
      if (combine == BidirectionalCombine::Sum && s[0].output_feature_channels != s[1].output_feature_channels)
        fail("[", name, "] summed directions need equal output channels, got ", s[0].output_feature_channels,
             " and ", s[1].output_feature_channels);
    }
    if (k > 0 && s[0].input_feature_channels != stage_channels(k - 1))
      fail("[", name, "] reads ", s[0].input_feature_channels, " channels but the layer below gives ",
           stage_channels(k - 1));
  }
}

std::vector<WeightSource> RNNStack::weight_sources() const {
  std::vector<WeightSource> out;
  for (const RNNDescriptor* d : layers()) {
    auto w = d->weight_sources();
    out.insert(out.end(), w.begin(), w.end());
  }
  return out;
}

std::vector<const RNNDescriptor*> RNNStack::layers() const {
  std::vector<const RNNDescriptor*> out;
  for (const auto& s : stages)
    for (const auto& d : s) out.push_back(&d);
  return out;
}

std::vector<size_t> RNNStack::layer_weight_offsets() const {
  std::vector<size_t> out;
  size_t at = 0;
  for (const RNNDescriptor* d : layers()) {
    out.push_back(at);
    at += d->layer_weights ? 1 : d->input_weights.size() + d->recurrent_weights.size() + d->memory_weights.size();
  }
  return out;
}

}  // namespace nngraph
