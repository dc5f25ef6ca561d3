// ImageNode and the filter nodes. A source argument takes an ImageNode or a filter node
// (standing for its result_image).
#include <tuple>
#include <variant>

#include "bindings.h"
#include "nngraph/error.h"
#include "ops/arithmetic.h"
#include "ops/concatenation.h"
#include "ops/conv.h"
#include "ops/dropout.h"
#include "ops/matrix_multiplication.h"
#include "ops/neuron.h"
#include "ops/normalization.h"
#include "ops/pool.h"
#include "ops/softmax.h"

namespace nngraph::py_bind {

Padding to_padding(const py::handle& p) {
  if (py::isinstance<py::str>(p)) return Padding::parse(p.cast<std::string>());
  auto v = p.cast<std::vector<int>>();
  if (v.size() != 4) fail("[padding] explicit padding is (top, bottom, left, right)");
  return Padding::explicit_(v[0], v[1], v[2], v[3]);
}

std::shared_ptr<DataSource> normalization_source(const py::object& parameters, bool statistics) {
  if (!py::isinstance<py::int_>(parameters)) return hold_data_source(parameters);
  const NormalizationDescriptor d{parameters.cast<int>(), statistics};
  d.validate("normalization");
  return std::make_shared<ArrayDataSource>(d, std::vector<std::vector<float>>(tensor_specs(d).size()), "");
}

namespace {

NeuronDescriptor to_neuron(const py::handle& n, std::optional<float> a, std::optional<float> b,
                           std::optional<float> c) {
  if (py::isinstance<NeuronDescriptor>(n)) return n.cast<NeuronDescriptor>();
  return NeuronDescriptor::make(NeuronDescriptor::parse(n.cast<std::string>()), a, b, c);
}

PoolingMode pooling_mode(const std::string& mode) {
  if (mode != "max" && mode != "average")
    fail("[", PoolingNode::kKind, "] mode must be 'max' or 'average', got '", mode, "'");
  return mode == "max" ? PoolingMode::Max : PoolingMode::Average;
}

std::vector<ImageShape> to_shapes(const std::vector<std::tuple<int, int, int>>& shapes) {
  std::vector<ImageShape> out;
  for (const auto& [c, h, w] : shapes) out.push_back({c, h, w});
  return out;
}

}  // namespace

ImageNodePtr to_image_node(const py::handle& obj, const std::string& what) {
  if (py::isinstance<ImageNode>(obj)) return obj.cast<ImageNodePtr>();
  if (py::isinstance<FilterNode>(obj)) return obj.cast<FilterNodePtr>()->result_image();
  if (obj.is_none()) fail("[", what, "] source is None");
  fail("[", what, "] expected an ImageNode or a filter node as source, got ",
       py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
}

namespace {

// Each operand's axes N, C, H, W equal the result's or are 1 (it broadcasts along them).
template <ArithmeticOp Op>
void bind_arithmetic(py::module_& m, const char* name, const char* formula) {
  py::class_<ArithmeticNodeOf<Op>, ArithmeticNode, std::shared_ptr<ArithmeticNodeOf<Op>>>(
      m, name, cat(formula, " of two images; either may broadcast: each of its axes equals the other's or is 1.").c_str())
      .def(py::init([name](const py::object& a, const py::object& b, std::string label) {
             return ArithmeticNodeOf<Op>::create(to_image_node(a, name), to_image_node(b, name), std::move(label));
           }),
           py::arg("a"), py::arg("b"), py::arg("label") = "");
}

}  // namespace

void init_nodes(py::module_& m) {
  py::class_<ImageNode, ImageNodePtr>(
      m, "ImageNode",
      "A data edge. Made directly it is a graph source; shape=(C, H, W) declares its images "
      "so the graph checks every shape when it is built.")
      .def(py::init([](std::optional<std::tuple<int, int, int>> shape, std::string label) {
             std::optional<ImageShape> s;
             if (shape) s = ImageShape{std::get<0>(*shape), std::get<1>(*shape), std::get<2>(*shape)};
             return std::make_shared<ImageNode>(s, std::move(label));
           }),
           py::arg("shape") = py::none(), py::arg("label") = "")
      .def_property("label", &ImageNode::label, &ImageNode::set_label)
      .def_property_readonly("shape", [](const ImageNode& n) -> py::object {
        if (!n.shape()) return py::none();
        return py::make_tuple(n.shape()->c, n.shape()->h, n.shape()->w);
      })
      .def_property_readonly("producer", [](const ImageNode& n) -> py::object {
        if (!n.producer()) return py::none();
        return py::cast(n.producer()->shared_from_this());
      })
      .def("__repr__", [](const ImageNode& n) { return "ImageNode('" + n.label() + "')"; });

  py::class_<FilterNode, FilterNodePtr>(m, "FilterNode", "An operation; result_image feeds the next node.")
      .def_property_readonly("result_image", &FilterNode::result_image)
      .def_property_readonly("sources", &FilterNode::sources)
      .def_property("label", &FilterNode::label, &FilterNode::set_label)
      .def_property_readonly("kind", &FilterNode::kind)
      .def("infer", [](const FilterNode& f, const std::vector<std::tuple<int, int, int>>& shapes) {
             if (shapes.size() != f.sources().size())
               fail("[", f.label(), "] has ", f.sources().size(), " sources, got ", shapes.size(), " shapes");
             const ImageShape r = f.infer(to_shapes(shapes));
             return std::make_tuple(r.c, r.h, r.w);
           }, py::arg("source_shapes"),
           "Its result's (C, H, W) for sources of these shapes; raises, naming the node, where they do not fit.")
      .def("attributes", [](const FilterNode& f, const std::vector<std::tuple<int, int, int>>& shapes) {
             if (shapes.size() != f.sources().size())
               fail("[", f.label(), "] has ", f.sources().size(), " sources, got ", shapes.size(), " shapes");
             const std::vector<ImageShape> s = to_shapes(shapes);
             f.infer(s);  // the shapes are checked first
             py::dict out;
             for (const auto& [name, value] : f.attributes(s))
               out[py::str(name)] = std::visit([](const auto& v) { return py::cast(v); }, value);
             return out;
           }, py::arg("source_shapes"),
           "Its parameters for sources of these shapes, as an export writes them: kernel, stride, dilation, "
           "groups, padding (top, bottom, left, right, resolved), neuron, ... by kind; {} for kinds without.")
      .def_property_readonly("data_sources", [](const FilterNode& f) {
             py::list out;
             for (const WeightSource& w : f.weight_sources())
               out.append(py::cast(w.source, py::return_value_policy::reference));
             return out;
           }, "The data sources its parameters come from, in the order the node reads them.")
      .def("gradient_filter", [](FilterNode& f, const py::object& g) {
             return f.gradient_filter(to_image_node(g, f.label()));
           }, py::arg("source_gradient"),
           "The gradient node: turns d(loss)/d(result) into d(loss)/d(source).")
      .def("gradient_filters", [](FilterNode& f, const py::object& g) {
             return f.gradient_filters(to_image_node(g, f.label()));
           }, py::arg("source_gradient"), "One gradient node per source (addition, concatenation).")
      .def("__repr__", [](const FilterNode& f) { return cat(f.kind(), "('", f.label(), "')"); });

  py::class_<ConvolutionNode, FilterNode, std::shared_ptr<ConvolutionNode>>(m, "Convolution")
      .def(py::init([](const py::object& src, const py::object& weights, const py::object& padding,
                       std::string label, const std::string& accumulator) {
             auto node = ConvolutionNode::create(to_image_node(src, ConvolutionNode::kKind), hold_data_source(weights),
                                                 to_padding(padding), std::move(label));
             node->set_accumulator_precision(accumulator_named(accumulator, node->label()));
             return node;
           }),
           py::arg("source"), py::arg("weights"), py::arg("padding") = "valid", py::arg("label") = "",
           py::arg("accumulator_precision") = "float",
           "padding: 'valid', 'same', 'full' or (top, bottom, left, right). accumulator_precision: 'float', or "
           "'half' to accumulate in float16 in a float16 graph on cuda (MPS's FP16 accumulation: faster, less "
           "precise; float32 and bfloat16 graphs and the cpu accumulate in float32).")
      .def_property_readonly(
          "accumulator_precision", [](const ConvolutionNode& n) { return accumulator_name(n.accumulator_precision()); },
          "'float' or 'half' (float16 graphs on cuda accumulate in float16), as constructed.");

  py::class_<FullyConnectedNode, ConvolutionNode, std::shared_ptr<FullyConnectedNode>>(m, "FullyConnected")
      .def(py::init([](const py::object& src, const py::object& weights, std::string label,
                       const std::string& accumulator) {
             auto node = FullyConnectedNode::create(to_image_node(src, FullyConnectedNode::kKind),
                                                    hold_data_source(weights), std::move(label));
             node->set_accumulator_precision(accumulator_named(accumulator, node->label()));
             return node;
           }),
           py::arg("source"), py::arg("weights"), py::arg("label") = "", py::arg("accumulator_precision") = "float");

  py::class_<BatchNormalizationNode, FilterNode, std::shared_ptr<BatchNormalizationNode>>(
      m, "BatchNormalization",
      "y = gamma·(x − mean)/sqrt(var + epsilon) + beta per channel. Training graphs use the batch's "
      "mean and variance over N×H×W and, after each step, move the running ones toward them: "
      "running ← (1 − momentum)·running + momentum·batch (the variance unbiased), as PyTorch does; "
      "inference graphs use the running ones.")
      .def(py::init([](const py::object& src, const py::object& parameters, float epsilon, float momentum,
                       std::string label) {
             return BatchNormalizationNode::create(to_image_node(src, BatchNormalizationNode::kKind),
                                                   normalization_source(parameters, true), epsilon, momentum,
                                                   std::move(label));
           }),
           py::arg("source"), py::arg("parameters"), py::arg("epsilon") = 1e-5f, py::arg("momentum") = 0.1f,
           py::arg("label") = "",
           "parameters: a data source of a NormalizationDescriptor (gamma, beta, mean, variance), or the "
           "channel count for an ArrayDataSource holding 1, 0, 0 and 1.")
      .def_property_readonly("epsilon", &BatchNormalizationNode::epsilon, "Added to the variance before its square root.")
      .def_property_readonly("momentum", &BatchNormalizationNode::momentum,
                             "How far each training step moves the running statistics toward the batch's.")
      .def_property_readonly("feature_channels", &BatchNormalizationNode::feature_channels,
                             "Channels normalized, as its data source describes.");

  py::class_<PoolingNode, FilterNode, std::shared_ptr<PoolingNode>>(m, "Pooling")
      .def(py::init([](const py::object& src, const std::string& mode, const py::object& kernel,
                       const py::object& stride, const py::object& padding, bool count_include_pad,
                       const py::object& dilation, std::string label) {
             auto [kh, kw] = to_pair(kernel, "pooling");
             auto [sy, sx] = stride.is_none() ? std::pair<int, int>{0, 0} : to_pair(stride, "pooling");
             if (!stride.is_none() && (sy < 1 || sx < 1)) fail("[", PoolingNode::kKind, "] stride must be >= 1");
             auto [dy, dx] = to_pair(dilation, "pooling");
             return PoolingNode::create(to_image_node(src, PoolingNode::kKind), pooling_mode(mode), kh, kw, sy, sx,
                                        to_padding(padding), count_include_pad, dy, dx, std::move(label));
           }),
           py::arg("source"), py::arg("mode") = "max", py::arg("kernel") = 2, py::arg("stride") = py::none(),
           py::arg("padding") = "valid", py::arg("count_include_pad") = false, py::arg("dilation") = 1,
           py::arg("label") = "",
           "stride defaults to the kernel size; dilation spreads the window's taps apart.");
  // Global pooling is a PoolingNode whose window is the whole image.
  m.def("GlobalAveragePooling", [](const py::object& src, std::string label) {
        return PoolingNode::create_global(to_image_node(src, "global_average_pooling"), PoolingMode::Average,
                                          std::move(label));
      },
      py::arg("source"), py::arg("label") = "", "The mean of each channel over the image: C×1×1.");
  m.def("GlobalMaxPooling", [](const py::object& src, std::string label) {
        return PoolingNode::create_global(to_image_node(src, "global_max_pooling"), PoolingMode::Max, std::move(label));
      },
      py::arg("source"), py::arg("label") = "", "The maximum of each channel over the image: C×1×1.");

  py::class_<NeuronNode, FilterNode, std::shared_ptr<NeuronNode>>(m, "Neuron")
      .def(py::init([](const py::object& src, const py::object& neuron, std::optional<float> a,
                       std::optional<float> b, std::optional<float> c, std::string label) {
             return NeuronNode::create(to_image_node(src, NeuronNode::kKind), to_neuron(neuron, a, b, c),
                                       std::move(label));
           }),
           py::arg("source"), py::arg("neuron") = "relu", py::arg("a") = py::none(), py::arg("b") = py::none(),
           py::arg("c") = py::none(), py::arg("label") = "")
      .def_property_readonly("neuron", &NeuronNode::neuron);

  py::class_<SoftMaxNode, FilterNode, std::shared_ptr<SoftMaxNode>>(
      m, "SoftMax", "Softmax across feature channels at every pixel; with groups, across each group of channels.")
      .def(py::init([](const py::object& src, int groups, std::string label) {
             return SoftMaxNode::create(to_image_node(src, SoftMaxNode::kSoftMax), false, groups, std::move(label));
           }),
           py::arg("source"), py::arg("groups") = 1, py::arg("label") = "")
      .def_property_readonly("groups", &SoftMaxNode::groups, "Groups of channels, each normalized alone (1: all).");
  // LogSoftMax is a SoftMaxNode in log mode; a factory keeps one C++ class.
  m.def("LogSoftMax", [](const py::object& src, int groups, std::string label) {
        return SoftMaxNode::create(to_image_node(src, SoftMaxNode::kLogSoftMax), true, groups, std::move(label));
      },
      py::arg("source"), py::arg("groups") = 1, py::arg("label") = "",
      "Log-softmax across feature channels (with groups, across each group of channels).");

  py::class_<MatrixMultiplicationNode, FilterNode, std::shared_ptr<MatrixMultiplicationNode>>(
      m, "MatrixMultiplication",
      "Each image's channels in `groups` groups, each group a matrix of its channels by its pixels: the result's\n"
      "group g is left_g · right_g (either transposed where asked), its rows as channels and its columns as\n"
      "pixels, laid out as right's H×W (1 × right's channels in a group where right is transposed).\n"
      "Attention's products: a head to a group.")
      .def(py::init([](const py::object& left, const py::object& right, int groups, bool transpose_left,
                       bool transpose_right, std::string label) {
             return MatrixMultiplicationNode::create(to_image_node(left, MatrixMultiplicationNode::kKind),
                                                     to_image_node(right, MatrixMultiplicationNode::kKind), groups,
                                                     transpose_left, transpose_right, std::move(label));
           }),
           py::arg("left"), py::arg("right"), py::arg("groups") = 1, py::arg("transpose_left") = false,
           py::arg("transpose_right") = false, py::arg("label") = "")
      .def_property_readonly("groups", &MatrixMultiplicationNode::groups,
                             "Groups of channels, each operand's group a matrix (attention's heads).")
      .def_property_readonly("transpose_left", &MatrixMultiplicationNode::transpose_left,
                             "Whether left's group matrices enter the product transposed.")
      .def_property_readonly("transpose_right", &MatrixMultiplicationNode::transpose_right,
                             "Whether right's group matrices enter the product transposed.");

  py::class_<DropoutNode, FilterNode, std::shared_ptr<DropoutNode>>(m, "Dropout")
      .def(py::init([](const py::object& src, float keep, uint64_t seed, std::string label) {
             return DropoutNode::create(to_image_node(src, DropoutNode::kKind), keep, seed, std::move(label));
           }),
           py::arg("source"), py::arg("keep_probability") = 0.5f, py::arg("seed") = 0, py::arg("label") = "")
      .def_property_readonly("keep_probability", &DropoutNode::keep_probability)
      .def_property_readonly("seed", &DropoutNode::seed);

  py::class_<ArithmeticNode, FilterNode, std::shared_ptr<ArithmeticNode>>(
      m, "Arithmetic", "The base of Addition, Subtraction, Multiplication and Division.");
  bind_arithmetic<ArithmeticOp::Add>(m, "Addition", "a + b");
  bind_arithmetic<ArithmeticOp::Subtract>(m, "Subtraction", "a - b");
  bind_arithmetic<ArithmeticOp::Multiply>(m, "Multiplication", "a * b");
  bind_arithmetic<ArithmeticOp::Divide>(m, "Division", "a / b");

  py::class_<ConcatenationNode, FilterNode, std::shared_ptr<ConcatenationNode>>(m, "Concatenation")
      .def(py::init([](const py::list& sources, std::string label) {
             if (sources.empty()) fail("[", ConcatenationNode::kKind, "] needs at least one source");
             std::vector<ImageNodePtr> nodes;
             for (const auto& s : sources) nodes.push_back(to_image_node(s, ConcatenationNode::kKind));
             return ConcatenationNode::create(std::move(nodes), std::move(label));
           }),
           py::arg("sources"), py::arg("label") = "");
}

}  // namespace nngraph::py_bind
