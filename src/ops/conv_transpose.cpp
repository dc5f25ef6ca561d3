// Transpose convolution: shape rule, gradient wiring and dispatch to the convolution kernels.
#include "ops/conv_transpose.h"

#include "nngraph/error.h"

namespace nngraph {

std::shared_ptr<ConvolutionTransposeNode> ConvolutionTransposeNode::create(ImageNodePtr source,
                                                                           std::shared_ptr<DataSource> weights,
                                                                           Padding padding, int op_y, int op_x,
                                                                           int out_h, int out_w, std::string label) {
  std::shared_ptr<ConvolutionTransposeNode> node(new ConvolutionTransposeNode({std::move(source)}, std::move(label), kKind));
  if (!weights) fail("[", node->label().empty() ? kKind : node->label(), "] needs a data source");
  node->set_default_label(weights->label().empty() ? kKind : weights->label());
  const std::string& name = node->label();
  node->desc_ = descriptor_as<ConvolutionDescriptor>(*weights, name);
  node->desc_.validate(name);
  const ConvolutionDescriptor& d = node->desc_;
  if (!d.transposed)
    fail("[", name, "] needs a transposed ConvolutionDescriptor (weights input × output/groups × kh × kw)");
  if (padding.mode == PaddingMode::Full) fail("[", name, "] padding 'full' has no transpose; use explicit amounts");
  if (op_y < 0 || op_x < 0 || op_y >= d.stride_y || op_x >= d.stride_x)
    fail("[", name, "] output padding ", op_y, "×", op_x, " must be below the stride ", d.stride_y, "×", d.stride_x);
  if (out_h < 0 || out_w < 0) fail("[", name, "] output size must be positive");
  node->source_ = std::move(weights);
  node->padding_ = padding;
  node->op_y_ = op_y, node->op_x_ = op_x, node->out_h_ = out_h, node->out_w_ = out_w;
  return node;
}

Axis ConvolutionTransposeNode::axis(int in, int k, int s, int dil, int before, int after, int op, int size) const {
  const int span = (k - 1) * dil + 1;
  Axis a;
  if (padding_.mode == PaddingMode::Same) {  // C pads as a 'same' convolution of in × s
    const int total = span > s ? span - s : 0;
    before = total / 2, after = total - total / 2;
    op += span < s ? s - span : 0;
  } else if (padding_.mode == PaddingMode::Valid) {
    before = after = 0;
  }
  const int base = (in - 1) * s + span - before - after;
  if (size) {
    if (size < base || size >= base + s)
      fail("[", label(), "] output size ", size, " is out of reach: a ", in, "-long source gives ", base, " to ",
           base + s - 1);
    op = size - base;
  }
  if (op >= s) fail("[", label(), "] output padding ", op, " must be below the stride ", s);
  a.out = base + op;
  a.pad_before = before;
  a.pad_after = after;
  if (a.out < 1) fail("[", label(), "] padding ", padding_.str(), " leaves no output of a ", in, "-long source");
  return a;
}

ImageShape ConvolutionTransposeNode::infer(const std::vector<ImageShape>& s) const {
  const ImageShape& in = s[0];
  const auto& d = desc_;
  if (in.c != d.input_feature_channels)
    fail("[", label(), "] source has ", in.c, " feature channels, weights expect ", d.input_feature_channels);
  const Axis y = axis(in.h, d.kernel_height, d.stride_y, d.dilation_y, padding_.top, padding_.bottom, op_y_, out_h_);
  const Axis x = axis(in.w, d.kernel_width, d.stride_x, d.dilation_x, padding_.left, padding_.right, op_x_, out_w_);
  return {d.output_feature_channels, y.out, x.out};
}

Attributes ConvolutionTransposeNode::attributes(const std::vector<ImageShape>& s) const {
  const auto& d = desc_;
  const ImageShape& in = s[0];
  const Axis y = axis(in.h, d.kernel_height, d.stride_y, d.dilation_y, padding_.top, padding_.bottom, op_y_, out_h_);
  const Axis x = axis(in.w, d.kernel_width, d.stride_x, d.dilation_x, padding_.left, padding_.right, op_x_, out_w_);
  // What the result has beyond (in − 1)·stride + span − padding: the output padding.
  const auto extra = [](const Axis& a, int in, int k, int st, int dil) {
    return int64_t(a.out - ((in - 1) * st + (k - 1) * dil + 1 - a.pad_before - a.pad_after));
  };
  return {{"kernel", std::vector<int64_t>{d.kernel_height, d.kernel_width}},
          {"stride", std::vector<int64_t>{d.stride_y, d.stride_x}},
          {"dilation", std::vector<int64_t>{d.dilation_y, d.dilation_x}},
          {"groups", int64_t(d.groups)},
          {"padding", std::vector<int64_t>{y.pad_before, y.pad_after, x.pad_before, x.pad_after}},
          {"output_padding", std::vector<int64_t>{extra(y, in.h, d.kernel_height, d.stride_y, d.dilation_y),
                                                  extra(x, in.w, d.kernel_width, d.stride_x, d.dilation_x)}},
          {"neuron", d.neuron}};
}

ConvGeometry ConvolutionTransposeNode::geometry(const ImageShape& in) const {
  const auto& d = desc_;
  const Axis y = axis(in.h, d.kernel_height, d.stride_y, d.dilation_y, padding_.top, padding_.bottom, op_y_, out_h_);
  const Axis x = axis(in.w, d.kernel_width, d.stride_x, d.dilation_x, padding_.left, padding_.right, op_x_, out_w_);
  return ConvGeometry{d.kernel_height, d.kernel_width, d.stride_y, d.stride_x, d.dilation_y,
                      d.dilation_x, d.groups, y.pad_before, x.pad_before};
}

void ConvolutionTransposeNode::encode(const EncodeArgs& a) const {
  const Image& x = *a.sources[0];
  ConvGeometry g = geometry(x.shape());
  g.tf32 = a.allow_tf32;
  g.half = accumulator_ == AccumulatorPrecision::Half;
  // y = Cᵀx: C's input gradient for output gradient x (y stands in for C's input, unread).
  dispatch<ConvolutionGradientKernel>(a.backend, g, a.result, Tensor::parameter(a.weights, 0), x, Tensor(), NeuronDescriptor{},
                                      a.result, Tensor(), Tensor());
  const NeuronDescriptor& n = desc_.neuron.type != NeuronType::None ? desc_.neuron : a.fused;
  const Tensor bias = Tensor::parameter(a.weights, 1);
  if (bias || n.type != NeuronType::None) dispatch<BiasNeuronKernel>(a.backend, bias, n, a.result);
}

std::vector<FilterNodePtr> ConvolutionTransposeNode::make_gradients(const ImageNodePtr& dy) {
  if (!desc_.neuron.derivative_from_output())
    fail<Unsupported>("[", label(), "] its fused ", desc_.neuron.name(),
                      " neuron has no gradient from its output: train it as a separate Neuron node");
  return {std::make_shared<ConvolutionTransposeGradientNode>(
      dy, std::static_pointer_cast<ConvolutionTransposeNode>(shared_from_this()))};
}

void ConvolutionTransposeNode::encode_gradient(const EncodeArgs& a) const {
  const Image &dy = *a.sources[0], &x = *a.sources[1];
  const Tensor y = a.sources.size() > 2 ? Tensor(*a.sources[2]) : Tensor();
  const Tensor dw = Tensor::parameter(a.gradients, 0), db = Tensor::parameter(a.gradients, 1);
  if (a.result.empty() && !dw && !db) return;
  ConvGeometry g = geometry(x.shape());
  g.tf32 = a.allow_tf32;
  g.half = accumulator_ == AccumulatorPrecision::Half;
  Tensor dz = dy;
  std::shared_ptr<Buffer> scratch;
  if (y) {  // dz = dy ⊙ f'(y), in scratch
    scratch = a.backend.allocate(Tensor(dy).bytes());
    dz = Tensor(scratch->data(), dy.batch(), dy.shape(), dy.dtype());
  }
  if (y || db) dispatch<BiasNeuronGradientKernel>(a.backend, dy, y, desc_.neuron, y ? dz : Tensor(), db);
  const Tensor w = Tensor::parameter(a.weights, 0);
  if (!a.result.empty()) dispatch<ConvolutionKernel>(a.backend, g, dz, w, Tensor(), NeuronDescriptor{}, a.result);
  // dW: C's weight gradient for input dz and output gradient x.
  if (dw) dispatch<ConvolutionGradientKernel>(a.backend, g, dz, w, x, Tensor(), NeuronDescriptor{}, Tensor(), dw, Tensor());
}

ConvolutionTransposeGradientNode::ConvolutionTransposeGradientNode(const ImageNodePtr& dy,
                                                                   std::shared_ptr<ConvolutionTransposeNode> forward)
    : GradientNode(forward->descriptor().neuron.type != NeuronType::None
                       ? std::vector<ImageNodePtr>{dy, forward->sources()[0], forward->result_image()}
                       : std::vector<ImageNodePtr>{dy, forward->sources()[0]},
                   *forward, kKind),
      forward_(std::move(forward)) {}

}  // namespace nngraph
