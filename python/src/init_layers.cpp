// The shape layers of modern CNNs: padding and cropping, upsampling, transpose convolution.
#include "bindings.h"
#include "nngraph/error.h"
#include "ops/conv_transpose.h"
#include "ops/group_normalization.h"
#include "ops/padding.h"
#include "ops/upsampling.h"

namespace nngraph::py_bind {
namespace {

// An int (every side), a pair (rows, columns) or (top, bottom, left, right).
PadGeometry to_pads(const py::handle& p, std::pair<int, int> channels) {
  std::vector<int> v = py::isinstance<py::int_>(p) ? std::vector<int>{p.cast<int>()} : p.cast<std::vector<int>>();
  if (v.size() == 1) v = {v[0], v[0], v[0], v[0]};
  if (v.size() == 2) v = {v[0], v[0], v[1], v[1]};
  if (v.size() != 4) fail("[padding] padding is an int, (rows, columns) or (top, bottom, left, right)");
  return {channels.first, channels.second, v[0], v[1], v[2], v[3]};
}

PadMode pad_mode(const std::string& mode, float value) {
  if (mode == "zero") {
    if (value != 0.f) fail("[padding] mode 'zero' takes no value; use mode 'constant'");
    return PadMode::Constant;
  }
  if (mode == "constant") return PadMode::Constant;
  if (mode == "reflect") return PadMode::Reflect;
  if (mode == "edge") return PadMode::Edge;
  fail("[padding] mode must be 'zero', 'constant', 'reflect' or 'edge', got '", mode, "'");
}

}  // namespace

void init_layers(py::module_& m) {
  py::class_<ConvolutionTransposeNode, FilterNode, std::shared_ptr<ConvolutionTransposeNode>>(
      m, "ConvolutionTranspose",
      "The transpose (adjoint) of a convolution, which enlarges by the stride: weights is a data source of a "
      "ConvolutionDescriptor(..., transposed=True) (weights input × output/groups × kh × kw, PyTorch's "
      "layout; biases and neuron as a convolution's). padding: 'valid', 'same' (result = source × stride) "
      "or (top, bottom, left, right), cut from the result; output_padding (an int or (y, x), each below "
      "the stride) adds rows and columns after, or output_size=(h, w) picks it.")
      .def(py::init([](const py::object& src, const py::object& weights, const py::object& padding,
                       const py::object& output_padding, const py::object& output_size, std::string label,
                       const std::string& accumulator) {
             const auto [py_, px] = to_pair(output_padding, ConvolutionTransposeNode::kKind);
             const auto [oh, ow] = output_size.is_none() ? std::pair<int, int>{0, 0}
                                                         : to_pair(output_size, ConvolutionTransposeNode::kKind);
             if (!output_size.is_none() && (oh < 1 || ow < 1))
               fail("[", ConvolutionTransposeNode::kKind, "] output size must be positive");
             auto node = ConvolutionTransposeNode::create(to_image_node(src, ConvolutionTransposeNode::kKind),
                                                          hold_data_source(weights), to_padding(padding), py_, px, oh,
                                                          ow, std::move(label));
             node->set_accumulator_precision(accumulator_named(accumulator, node->label()));
             return node;
           }),
           py::arg("source"), py::arg("weights"), py::arg("padding") = "valid", py::arg("output_padding") = 0,
           py::arg("output_size") = py::none(), py::arg("label") = "", py::arg("accumulator_precision") = "float")
      .def_property_readonly(
          "accumulator_precision",
          [](const ConvolutionTransposeNode& n) { return accumulator_name(n.accumulator_precision()); },
          "'float' or 'half', as Convolution's.")
      .def_property_readonly("descriptor", &ConvolutionTransposeNode::descriptor,
                             "The transposed ConvolutionDescriptor its data source describes.");

  py::class_<PaddingNode, FilterNode, std::shared_ptr<PaddingNode>>(
      m, "Padding",
      "Pads each image: padding is an int, (rows, columns) or (top, bottom, left, right); mode 'zero', "
      "'constant' (value), 'reflect' (mirrored about the edge pixel, each amount below the size) or 'edge' "
      "(the edge pixel repeated); channels=(before, after) pads channels with the constant. Negative "
      "amounts crop (constant modes).")
      .def(py::init([](const py::object& src, const py::object& padding, const std::string& mode, float value,
                       std::pair<int, int> channels, std::string label) {
             return PaddingNode::create(to_image_node(src, PaddingNode::kKind), pad_mode(mode, value),
                                        to_pads(padding, channels), value, std::move(label));
           }),
           py::arg("source"), py::arg("padding"), py::arg("mode") = "zero", py::arg("value") = 0.f,
           py::arg("channels") = std::pair<int, int>{0, 0}, py::arg("label") = "");
  // A crop is a PaddingNode by negative amounts, resolved against the source's shape.
  m.def(
      "Crop",
      [](const py::object& src, const py::object& window, const py::object& channels, std::string label) {
        CropWindow w;
        if (!window.is_none()) {
          const auto v = window.cast<std::vector<int>>();
          if (v.size() != 4) fail("[crop] window is (y, x, height, width)");
          w.y = v[0], w.x = v[1], w.height = v[2], w.width = v[3];
          if (w.height < 1 || w.width < 1) fail("[crop] the window's height and width must be at least 1");
        }
        if (!channels.is_none()) {
          const auto [first, count] = channels.cast<std::pair<int, int>>();
          if (count < 1) fail("[crop] channels is (first, count) with count at least 1");
          w.channel = first, w.channels = count;
        }
        return PaddingNode::crop(to_image_node(src, "crop"), w, std::move(label));
      },
      py::arg("source"), py::arg("window") = py::none(), py::arg("channels") = py::none(), py::arg("label") = "",
      "The window (y, x, height, width) of each image (None: all of it) and channels (first, count) "
      "(None: all); the gradient puts dY back in place with zeros around it.");

  py::class_<UpsamplingNode, FilterNode, std::shared_ptr<UpsamplingNode>>(
      m, "Upsampling",
      "Enlarges each image by integer factors scale (an int or (y, x)): mode 'nearest' repeats pixels, "
      "'bilinear' interpolates; align_corners (bilinear) maps the corner pixels onto each other, else "
      "pixel centres scale (PyTorch's two conventions).")
      .def(py::init([](const py::object& src, const py::object& scale, const std::string& mode, bool align_corners,
                       std::string label) {
             if (mode != "nearest" && mode != "bilinear")
               fail("[", UpsamplingNode::kKind, "] mode must be 'nearest' or 'bilinear', got '", mode, "'");
             const auto [sy, sx] = to_pair(scale, UpsamplingNode::kKind);
             return UpsamplingNode::create(to_image_node(src, UpsamplingNode::kKind),
                                           mode == "nearest" ? UpsamplingMode::Nearest : UpsamplingMode::Bilinear, sy,
                                           sx, align_corners, std::move(label));
           }),
           py::arg("source"), py::arg("scale") = 2, py::arg("mode") = "nearest", py::arg("align_corners") = false,
           py::arg("label") = "")
      .def_property_readonly(
          "scale", [](const UpsamplingNode& n) { return std::make_pair(n.scale_y(), n.scale_x()); },
          "The factors (y, x).")
      .def_property_readonly("align_corners", &UpsamplingNode::align_corners,
                             "Whether bilinear upsampling maps the corner pixels onto each other.");

  py::class_<GroupNormalizationNode, FilterNode, std::shared_ptr<GroupNormalizationNode>>(
      m, "GroupNormalization",
      "y = gamma·(x − mean)/sqrt(var + epsilon) + beta, mean and var per image over each group of "
      "channels (all their pixels); gamma and beta per channel. parameters: a data source of a "
      "NormalizationDescriptor(C, statistics=False), or the channel count for an ArrayDataSource of ones and "
      "zeros. Training and inference graphs compute the same.")
      .def(py::init([](const py::object& src, int groups, const py::object& parameters, float epsilon,
                       std::string label) {
             if (groups < 1) fail("[", GroupNormalizationNode::kKind, "] groups must be at least 1, got ", groups);
             return GroupNormalizationNode::create(to_image_node(src, GroupNormalizationNode::kKind),
                                                   normalization_source(parameters, false), groups, false, epsilon,
                                                   std::move(label));
           }),
           py::arg("source"), py::arg("groups"), py::arg("parameters"), py::arg("epsilon") = 1e-5f,
           py::arg("label") = "")
      .def_property_readonly("groups", &GroupNormalizationNode::groups,
                             "Groups of channels (the channel count for instance normalization).")
      .def_property_readonly("per_position", &GroupNormalizationNode::per_position,
                             "Whether each position is normalized over its channels (layer normalization over C).")
      .def_property_readonly("epsilon", &GroupNormalizationNode::epsilon, "Added to the variance before its square root.");
  // Instance and layer normalization are GroupNormalization nodes.
  m.def(
      "InstanceNormalization",
      [](const py::object& src, const py::object& parameters, float epsilon, std::string label) {
        return GroupNormalizationNode::create(to_image_node(src, "instance_normalization"),
                                              normalization_source(parameters, false), 0, false, epsilon,
                                              std::move(label));
      },
      py::arg("source"), py::arg("parameters"), py::arg("epsilon") = 1e-5f, py::arg("label") = "",
      "Each channel of each image normalized over its pixels (MPSCNNInstanceNormalization); gamma and beta per "
      "channel, as GroupNormalization takes them.");
  m.def(
      "LayerNormalization",
      [](const py::object& src, const py::object& parameters, float epsilon, const std::string& over,
         std::string label) {
        if (over != "chw" && over != "c")
          fail("[layer_normalization] over must be 'chw' or 'c', got '", over, "'");
        return GroupNormalizationNode::create(to_image_node(src, "layer_normalization"),
                                              normalization_source(parameters, false), 1, over == "c", epsilon,
                                              std::move(label));
      },
      py::arg("source"), py::arg("parameters"), py::arg("epsilon") = 1e-5f, py::arg("over") = "chw",
      py::arg("label") = "",
      "Each image normalized over C×H×W (over='chw', GroupNormalization with one group) or each position over "
      "its channels (over='c', as a transformer's LayerNorm over the channel axis); gamma and beta per channel.");
}

}  // namespace nngraph::py_bind
