// Recurrent layer descriptors (SingleGate, LSTM, GRU, MGU) and the RNN graph node.
#include "bindings.h"
#include "nngraph/convert.h"
#include "nngraph/error.h"
#include "nngraph/rnn.h"
#include "ops/convert.h"
#include "ops/rnn.h"

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
    auto ds = std::make_shared<ArrayDataSource>(
        ld, std::vector<std::vector<float>>{ArrayDataSource::initial_weights(ld, Initializer::Glorot, seed),
                                            std::vector<float>(ld.rows, 0.f)},
        label);
    if (label.empty()) ds->set_label(RNNDescriptor::cell_name(cell), true);  // a graph numbers it where two meet
    d.layer_weights = ds;
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

// Matrices from a list of Matrix objects or 2-D arrays, or from one 3-D array (steps first).
std::vector<Matrix> matrices_arg(const py::object& obj, const Device& device, const char* what) {
  std::vector<Matrix> out;
  if (obj.is_none()) return out;
  auto one = [&](const py::handle& m) {
    if (py::isinstance<Matrix>(m)) return m.cast<Matrix>();
    py::array a = float_array(m, what);
    if (a.ndim() != 2) fail("[", what, "] expected 2-D arrays (rows, columns), got ", a.ndim(), "-D");
    a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(a);
    Matrix mat = Matrix::allocate(static_cast<int>(a.shape(0)), static_cast<int>(a.shape(1)), DType::Float32, device);
    mat.copy_from_host(a.data());
    return mat;
  };
  if (py::isinstance<py::array>(obj)) {
    py::array a = obj.cast<py::array>();
    if (a.ndim() != 3) fail("[", what, "] expected a 3-D array (steps, rows, columns) or a list of matrices");
    for (py::ssize_t t = 0; t < a.shape(0); ++t) out.push_back(one(obj[py::int_(t)]));
    return out;
  }
  for (const auto& m : obj.cast<py::list>()) out.push_back(one(m));
  return out;
}

py::list matrices_out(const std::vector<Matrix>& v) {
  py::list out;
  for (const auto& m : v) out.append(m.buffer() ? py::cast(m) : py::none());
  return out;
}

// The inference layer keeps the weights its data sources held when it was made; the
// training layer is the same C++ layer under its own Python name and methods.
struct InferenceLayer : RNNMatrixLayer {
  InferenceLayer(RNNStack stack, Device device)
      : RNNMatrixLayer(std::move(stack), device), weights(create_weight_matrices()) {}
  std::vector<Matrix> weights;
};
struct TrainingLayer : RNNMatrixLayer {
  using RNNMatrixLayer::RNNMatrixLayer;
};

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
      .def_readonly("gate_neuron", &RNNDescriptor::gate_neuron)
      .def_readonly("cell_neuron", &RNNDescriptor::cell_neuron)
      .def_readonly("cell_to_output_neuron", &RNNDescriptor::cell_to_output_neuron, "The LSTM's ψ in h = o⊙ψ(c).")
      .def_readonly("layer_weights", &RNNDescriptor::layer_weights,
                    "The one source of the layer's gate matrices [W | U (| P)], or None where they come per gate.")
      .def_readonly("input_weights", &RNNDescriptor::input_weights, "Per gate: its W source (H × I).")
      .def_readonly("recurrent_weights", &RNNDescriptor::recurrent_weights, "Per gate: its U source (H × H).")
      .def_readonly("memory_weights", &RNNDescriptor::memory_weights, "LSTM peepholes per gate i, f, o (diagonal).")
      .def_property_readonly("layer_descriptor", &RNNDescriptor::layer_descriptor,
                             "The MatrixDescriptor a one-source-per-layer data source has.")
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
             return RNNNode::create(to_image_node(src, RNNNode::kKind), stack_arg(layers, combine), output == "last",
                                    std::move(label));
           }),
           py::arg("source"), py::arg("layers"), py::arg("combine") = "concatenate", py::arg("output") = "sequence",
           py::arg("label") = "",
           "Runs recurrent layers over the source's positions (row by row, each position's channels one "
           "step's features). layers: a descriptor, or a list of descriptors (stacked) and "
           "(forward, backward) pairs joined by `combine`. output='last' gives the final state.")
      .def_property_readonly("last_only", &RNNNode::last_only)
      .def_property_readonly("layers", [](const RNNNode& n) { return n.stack().stages; },
                             "Its stages in order, each a list of one descriptor or a (forward, backward) pair.")
      .def_property_readonly("combine", [](const RNNNode& n) {
        return n.stack().combine == BidirectionalCombine::Sum ? "sum" : "concatenate";
      }, "How a (forward, backward) pair's outputs are joined.");

  py::class_<RNNMatrixLayer::TrainingState, std::shared_ptr<RNNMatrixLayer::TrainingState>>(
      m, "RNNMatrixTrainingState", "What a forward sequence leaves for its gradient sequence.")
      .def_readonly("steps", &RNNMatrixLayer::TrainingState::steps)
      .def_readonly("batch", &RNNMatrixLayer::TrainingState::batch);

  py::class_<InferenceLayer, std::shared_ptr<InferenceLayer>>(
      m, "RNNMatrixLayer",
      "Recurrent layers over sequences of matrices (one per step, one row per sequence), with the "
      "weights their data sources hold when it is made.")
      .def(py::init([](const py::object& layers, const std::string& combine, const py::object& device) {
             return std::make_shared<InferenceLayer>(stack_arg(layers, combine), to_device(device));
           }),
           py::arg("layers"), py::arg("combine") = "concatenate", py::arg("device") = "cpu")
      .def("encode_sequence",
           [](const InferenceLayer& l, const py::object& sources, const py::object& h0, const py::object& c0) {
             const Device& d = l.device();
             auto src = matrices_arg(sources, d, "source");
             auto hs = matrices_arg(h0, d, "initial state"), cs = matrices_arg(c0, d, "initial cell state");
             RNNMatrixLayer::Forward f;
             {
               py::gil_scoped_release release;
               f = l.forward(src, l.weights, hs, cs, false);
             }
             return py::make_tuple(matrices_out(f.outputs), matrices_out(f.h_final), matrices_out(f.c_final));
           },
           py::arg("sources"), py::arg("initial_states") = py::none(), py::arg("initial_cell_states") = py::none(),
           "→ (outputs per step, final state per layer, final cell state per layer (None but LSTM)).");

  py::class_<TrainingLayer, std::shared_ptr<TrainingLayer>>(
      m, "RNNMatrixTrainingLayer",
      "Recurrent layers over matrix sequences for training: weights as matrices "
      "(create_weight_matrices), a forward sequence leaving a training state, a gradient sequence "
      "giving input, initial-state and weight gradients.")
      .def(py::init([](const py::object& layers, const std::string& combine, const py::object& device) {
             return std::make_shared<TrainingLayer>(stack_arg(layers, combine), to_device(device));
           }),
           py::arg("layers"), py::arg("combine") = "concatenate", py::arg("device") = "cpu")
      .def("create_weight_matrices", &TrainingLayer::create_weight_matrices,
           "Per data source: its weights (O × I), then its biases (1 × O) if it has them.")
      .def("create_weight_gradient_matrices", &TrainingLayer::create_weight_gradient_matrices)
      .def("encode_forward_sequence",
           [](const TrainingLayer& l, const py::object& sources, const std::vector<Matrix>& weights,
              const py::object& h0, const py::object& c0) {
             const Device& d = l.device();
             auto src = matrices_arg(sources, d, "source");
             auto hs = matrices_arg(h0, d, "initial state"), cs = matrices_arg(c0, d, "initial cell state");
             RNNMatrixLayer::Forward f;
             {
               py::gil_scoped_release release;
               f = l.forward(src, weights, hs, cs, true);
             }
             return py::make_tuple(matrices_out(f.outputs), f.training_state, matrices_out(f.h_final),
                                   matrices_out(f.c_final));
           },
           py::arg("sources"), py::arg("weights"), py::arg("initial_states") = py::none(),
           py::arg("initial_cell_states") = py::none(),
           "→ (outputs, training state, final states, final cell states).")
      .def("encode_gradient_sequence",
           [](const TrainingLayer& l, const py::object& dy, const RNNMatrixLayer::TrainingState& ts,
              const std::vector<Matrix>& weights, const py::object& dw, bool accumulate, const py::object& dh,
              const py::object& dc) {
             const Device& d = l.device();
             auto dys = matrices_arg(dy, d, "output gradient");
             auto dws = dw.is_none() ? std::vector<Matrix>{} : dw.cast<std::vector<Matrix>>();
             auto dhs = matrices_arg(dh, d, "final state gradient"), dcs = matrices_arg(dc, d, "final cell state gradient");
             RNNMatrixLayer::Gradients g;
             {
               py::gil_scoped_release release;
               g = l.gradient(dys, ts, weights, dws, accumulate, dhs, dcs);
             }
             return py::make_tuple(matrices_out(g.sources), matrices_out(g.h0), matrices_out(g.c0));
           },
           py::arg("output_gradients"), py::arg("training_state"), py::arg("weights"),
           py::arg("weight_gradients") = py::none(), py::arg("accumulate") = false,
           py::arg("final_state_gradients") = py::none(), py::arg("final_cell_state_gradients") = py::none(),
           "Writes weight_gradients (adds to them with accumulate) → (source gradients, initial state "
           "gradients, initial cell state gradients).");

  py::class_<ImageCopyToMatrixNode, FilterNode, std::shared_ptr<ImageCopyToMatrixNode>>(m, "ImageCopyToMatrixNode")
      .def(py::init([](const py::object& src, const std::string& layout, std::string label) {
             return ImageCopyToMatrixNode::create(to_image_node(src, ImageCopyToMatrixNode::kKind), parse_data_layout(layout),
                                                  std::move(label));
           }),
           py::arg("source"), py::arg("data_layout") = "chw", py::arg("label") = "",
           "Each image as one row of C·H·W values (an N × C·H·W × 1 × 1 result), in 'chw' or 'hwc' order.");
  py::class_<MatrixCopyToImageNode, FilterNode, std::shared_ptr<MatrixCopyToImageNode>>(m, "MatrixCopyToImageNode")
      .def(py::init([](const py::object& src, std::tuple<int, int, int> shape, const std::string& layout,
                       std::string label) {
             return MatrixCopyToImageNode::create(to_image_node(src, MatrixCopyToImageNode::kKind),
                                                  {std::get<0>(shape), std::get<1>(shape), std::get<2>(shape)},
                                                  parse_data_layout(layout), std::move(label));
           }),
           py::arg("source"), py::arg("shape"), py::arg("data_layout") = "chw", py::arg("label") = "",
           "Rows of C·H·W values back to C×H×W images (shape), read in 'chw' or 'hwc' order.");

  m.def("image_copy_to_matrix", [](const Image& src, const std::string& layout, const py::object& dst) {
        Matrix out = dst.is_none() ? Matrix::allocate(src.batch(), static_cast<int>(src.shape().count()),
                                                      DType::Float32, src.device())
                                   : dst.cast<Matrix>();
        image_copy_to_matrix(parse_data_layout(layout), src, out);
        return out;
      },
      py::arg("source"), py::arg("data_layout") = "chw", py::arg("destination") = py::none(),
      "MPSImageCopyToMatrix: row n of the (new or given) matrix holds image n.");
  m.def("matrix_copy_to_image", [](const Matrix& src, const py::object& shape_or_image, const std::string& layout) {
        Image out;
        if (py::isinstance<Image>(shape_or_image)) {
          out = shape_or_image.cast<Image>();
        } else {
          auto [c, h, w] = shape_or_image.cast<std::tuple<int, int, int>>();
          out = Image::allocate({src.rows(), {c, h, w}, DType::Float32}, src.device());
        }
        matrix_copy_to_image(parse_data_layout(layout), src, out);
        return out;
      },
      py::arg("source"), py::arg("destination"), py::arg("data_layout") = "chw",
      "MPSMatrixCopyToImage: image n from row n; destination is an Image or a (C, H, W) shape.");
}

}  // namespace nngraph::py_bind
