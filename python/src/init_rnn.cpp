// Recurrent layer descriptors (SingleGate, LSTM, GRU, MGU) and the RNN graph node.
#include "bindings.h"
#include "nngraph/error.h"
#include "nngraph/rnn.h"

namespace nngraph::py_bind {
namespace {

NeuronDescriptor neuron_arg(const py::handle& n) {
  if (py::isinstance<NeuronDescriptor>(n)) return n.cast<NeuronDescriptor>();
  return NeuronDescriptor::make(NeuronDescriptor::parse(n.cast<std::string>()));
}

std::vector<std::shared_ptr<DataSource>> sources_arg(const py::object& list) {
  std::vector<std::shared_ptr<DataSource>> out;
  if (list.is_none()) return out;
  for (const auto& s : list.cast<py::list>()) out.push_back(hold_data_source(py::reinterpret_borrow<py::object>(s)));
  return out;
}

// Fills everything but the neurons: directions, options and weight sources. With no weights
// given the layer gets one trainable-ready ArrayDataSource (glorot weights, zero biases).
RNNDescriptor make(RNNCell cell, int in, int out, const py::object& weights, const py::object& input_weights,
                   const py::object& recurrent_weights, const py::object& memory_weights, bool peephole,
                   const std::string& direction, bool unit_input, uint64_t seed, const std::string& label) {
  RNNDescriptor d;
  d.cell = cell;
  d.input_feature_channels = in;
  d.output_feature_channels = out;
  d.peephole = peephole;
  d.use_layer_input_unit_transform = unit_input;
  if (direction == "forward")
    d.direction = SequenceDirection::Forward;
  else if (direction == "backward")
    d.direction = SequenceDirection::Backward;
  else
    fail("[", label.empty() ? RNNDescriptor::cell_name(cell) : label, "] direction must be 'forward' or 'backward', got '",
         direction, "'");
  d.input_weights = sources_arg(input_weights);
  d.recurrent_weights = sources_arg(recurrent_weights);
  d.memory_weights = sources_arg(memory_weights);
  if (!weights.is_none()) {
    d.layer_weights = hold_data_source(weights);
  } else if (d.input_weights.empty() && d.recurrent_weights.empty() && d.memory_weights.empty()) {
    const auto ld = d.layer_descriptor();
    ld.validate(label.empty() ? RNNDescriptor::cell_name(cell) : label);
    d.layer_weights = std::make_shared<ArrayDataSource>(
        ld, ArrayDataSource::initial_weights(ld, Initializer::Glorot, seed),
        std::vector<float>(ld.output_feature_channels, 0.f), label.empty() ? RNNDescriptor::cell_name(cell) : label);
  }
  return d;
}

RNNStack stack_arg(const py::object& layers, const std::string& combine) {
  RNNStack s;
  if (combine == "sum")
    s.combine = BidirectionalCombine::Sum;
  else if (combine != "concatenate")
    fail("[rnn] combine must be 'sum' or 'concatenate', got '", combine, "'");
  if (py::isinstance<RNNDescriptor>(layers)) {
    s.stages.push_back({layers.cast<RNNDescriptor>()});
    return s;
  }
  for (const auto& item : layers.cast<py::list>()) {
    if (py::isinstance<RNNDescriptor>(item))
      s.stages.push_back({item.cast<RNNDescriptor>()});
    else
      s.stages.push_back(item.cast<std::vector<RNNDescriptor>>());
  }
  return s;
}

#define RNN_COMMON_ARGS                                                                                   \
  py::arg("input_channels"), py::arg("output_channels"), py::arg("weights") = py::none(),                 \
      py::arg("input_weights") = py::none(), py::arg("recurrent_weights") = py::none(),                   \
      py::arg("direction") = "forward", py::arg("unit_input") = false, py::arg("seed") = 0,               \
      py::arg("label") = ""

}  // namespace

RNNStack to_rnn_stack(const py::object& layers, const std::string& combine) { return stack_arg(layers, combine); }

void init_rnn(py::module_& m) {
  py::class_<RNNDescriptor>(
      m, "RNNDescriptor",
      "One recurrent layer in one direction: its cell, sizes, neurons and weight data sources. "
      "Made by SingleGate, LSTM, GRU or MGU.")
      .def_property_readonly("cell", [](const RNNDescriptor& d) { return RNNDescriptor::cell_name(d.cell); })
      .def_readonly("input_feature_channels", &RNNDescriptor::input_feature_channels)
      .def_readonly("output_feature_channels", &RNNDescriptor::output_feature_channels)
      .def_readonly("peephole", &RNNDescriptor::peephole)
      .def_readonly("reset_after", &RNNDescriptor::reset_after)
      .def_readonly("use_layer_input_unit_transform", &RNNDescriptor::use_layer_input_unit_transform)
      .def_property_readonly("direction", [](const RNNDescriptor& d) {
        return d.direction == SequenceDirection::Forward ? "forward" : "backward";
      })
      .def_property_readonly("gates", &RNNDescriptor::gates)
      .def_property_readonly("layer_descriptor", &RNNDescriptor::layer_descriptor,
                             "The ConvolutionDescriptor a one-source-per-layer data source has.")
      .def_property_readonly("data_sources", [](const RNNDescriptor& d) {
        std::vector<std::shared_ptr<DataSource>> out;
        if (d.layer_weights) out.push_back(d.layer_weights);
        for (const auto* v : {&d.input_weights, &d.recurrent_weights, &d.memory_weights})
          out.insert(out.end(), v->begin(), v->end());
        return out;
      }, "The weight sources in the order graphs keep them.")
      .def("__repr__", [](const RNNDescriptor& d) {
        return cat(RNNDescriptor::cell_name(d.cell), "(", d.input_feature_channels, " → ", d.output_feature_channels,
                   d.direction == SequenceDirection::Backward ? ", backward" : "", ")");
      });

  m.def("SingleGate",
        [](int in, int out, const py::object& w, const py::object& iw, const py::object& rw, const std::string& dir,
           bool unit, uint64_t seed, const std::string& label, const py::object& neuron) {
          RNNDescriptor d = make(RNNCell::SingleGate, in, out, w, iw, rw, py::none(), false, dir, unit, seed, label);
          d.cell_neuron = neuron_arg(neuron);
          d.validate(label.empty() ? "single_gate" : label);
          return d;
        },
        RNN_COMMON_ARGS, py::arg("neuron") = "tanh", "h = neuron(W x + U h₋ + b).");
  m.def("LSTM",
        [](int in, int out, const py::object& w, const py::object& iw, const py::object& rw, const std::string& dir,
           bool unit, uint64_t seed, const std::string& label, const py::object& mw, bool peephole,
           const py::object& gate, const py::object& cell, const py::object& cell_to_output) {
          RNNDescriptor d = make(RNNCell::LSTM, in, out, w, iw, rw, mw, peephole, dir, unit, seed, label);
          d.gate_neuron = neuron_arg(gate);
          d.cell_neuron = neuron_arg(cell);
          d.cell_to_output_neuron = neuron_arg(cell_to_output);
          d.validate(label.empty() ? "lstm" : label);
          return d;
        },
        RNN_COMMON_ARGS, py::arg("memory_weights") = py::none(), py::arg("peephole") = false,
        py::arg("gate_neuron") = "sigmoid", py::arg("cell_neuron") = "tanh", py::arg("cell_to_output_neuron") = "tanh",
        "Gates i, f, g, o. Per-gate sources list gates in that order; memory_weights (peepholes) "
        "are for i, f and o.");
  m.def("GRU",
        [](int in, int out, const py::object& w, const py::object& iw, const py::object& rw, const std::string& dir,
           bool unit, uint64_t seed, const std::string& label, bool reset_after, const py::object& gate,
           const py::object& cell) {
          RNNDescriptor d = make(RNNCell::GRU, in, out, w, iw, rw, py::none(), false, dir, unit, seed, label);
          d.reset_after = reset_after;
          d.gate_neuron = neuron_arg(gate);
          d.cell_neuron = neuron_arg(cell);
          d.validate(label.empty() ? "gru" : label);
          return d;
        },
        RNN_COMMON_ARGS, py::arg("reset_after") = true, py::arg("gate_neuron") = "sigmoid",
        py::arg("cell_neuron") = "tanh",
        "Gates r, z, n. reset_after=True is the cuDNN/PyTorch formulation; False applies the reset "
        "gate to the state before the recurrent product (the original GRU, as MPS describes it).");
  m.def("MGU",
        [](int in, int out, const py::object& w, const py::object& iw, const py::object& rw, const std::string& dir,
           bool unit, uint64_t seed, const std::string& label, const py::object& gate, const py::object& cell) {
          RNNDescriptor d = make(RNNCell::MGU, in, out, w, iw, rw, py::none(), false, dir, unit, seed, label);
          d.gate_neuron = neuron_arg(gate);
          d.cell_neuron = neuron_arg(cell);
          d.validate(label.empty() ? "mgu" : label);
          return d;
        },
        RNN_COMMON_ARGS, py::arg("gate_neuron") = "sigmoid", py::arg("cell_neuron") = "tanh",
        "Minimal gated unit, gates f, n: h = (1−f)⊙h₋ + f⊙tanh(Wₙx + Uₙ(f⊙h₋) + bₙ).");

  py::class_<RNNNode, FilterNode, std::shared_ptr<RNNNode>>(m, "RNN")
      .def(py::init([](const py::object& src, const py::object& layers, const std::string& combine,
                       const std::string& output, std::string label) {
             if (output != "sequence" && output != "last")
               fail("[rnn] output must be 'sequence' or 'last', got '", output, "'");
             return RNNNode::create(to_image_node(src, "rnn"), stack_arg(layers, combine), output == "last",
                                    std::move(label));
           }),
           py::arg("source"), py::arg("layers"), py::arg("combine") = "concatenate", py::arg("output") = "sequence",
           py::arg("label") = "",
           "Runs recurrent layers over the source's positions (row by row, each position's channels one "
           "step's features). layers: a descriptor, or a list of descriptors (stacked) and "
           "(forward, backward) pairs joined by `combine`. output='last' gives the final state.")
      .def_property_readonly("last_only", &RNNNode::last_only);
}

}  // namespace nngraph::py_bind
