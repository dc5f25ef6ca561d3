// Convolution and fully connected: shape rules, gradient wiring and kernel dispatch.
#include "ops/conv.h"

#include <string_view>

#include "nngraph/error.h"
#include "ops/cast.h"

namespace nngraph {
namespace {

const NeuronDescriptor& effective_neuron(const ConvolutionDescriptor& d, const EncodeArgs& a) {
  return d.neuron.type != NeuronType::None ? d.neuron : a.fused;
}


std::vector<ImageNodePtr> gradient_sources(const ImageNodePtr& dy, ConvolutionNode& f) {
  std::vector<ImageNodePtr> s{dy, f.sources()[0]};
  if (f.descriptor().neuron.type != NeuronType::None) s.push_back(f.result_image());
  return s;
}

}  // namespace

ConvolutionNode::ConvolutionNode(ImageNodePtr source, std::shared_ptr<DataSource> weights,
                                 Padding padding, std::string label, const char* kind)
    : FilterNode({std::move(source)}, std::move(label), kind), source_(std::move(weights)),
      padding_(padding) {
  if (!source_) fail("[", this->label().empty() ? kind : this->label(), "] needs a data source");
  set_default_label(source_->label().empty() ? kind : source_->label());
  desc_ = descriptor_as<ConvolutionDescriptor>(*source_, this->label().empty() ? kind : this->label());
  desc_.validate(this->label().empty() ? kind : this->label());
  if (desc_.transposed)
    fail("[", this->label(), "] its weights are a ConvolutionTranspose's (transposed=True); a ", kind,
         " takes output × input/groups × kh × kw");
}

std::shared_ptr<ConvolutionNode> ConvolutionNode::create(ImageNodePtr source,
                                                         std::shared_ptr<DataSource> weights,
                                                         Padding padding, std::string label) {
  return std::shared_ptr<ConvolutionNode>(
      new ConvolutionNode(std::move(source), std::move(weights), padding, std::move(label), kKind));
}

ImageShape ConvolutionNode::infer(const std::vector<ImageShape>& s) const {
  const ImageShape& in = s[0];
  const auto& d = desc_;
  if (in.c != d.input_feature_channels)
    fail("[", label(), "] source has ", in.c, " feature channels, weights expect ",
         d.input_feature_channels);
  const Axis y = resolve_axis(in.h, d.kernel_height, d.stride_y, d.dilation_y, padding_.mode,
                              padding_.top, padding_.bottom);
  const Axis x = resolve_axis(in.w, d.kernel_width, d.stride_x, d.dilation_x, padding_.mode,
                              padding_.left, padding_.right);
  if (y.out < 1 || x.out < 1)
    fail("[", label(), "] ", d.kernel_height, "×", d.kernel_width, " kernel (dilation ",
         d.dilation_y, "×", d.dilation_x, ") does not fit a ", in.h, "×", in.w,
         " source with padding ", padding_.str());
  return {d.output_feature_channels, y.out, x.out};
}

Attributes ConvolutionNode::attributes(const std::vector<ImageShape>& s) const {
  const auto& d = desc_;
  const Axis y = resolve_axis(s[0].h, d.kernel_height, d.stride_y, d.dilation_y, padding_.mode, padding_.top,
                              padding_.bottom);
  const Axis x = resolve_axis(s[0].w, d.kernel_width, d.stride_x, d.dilation_x, padding_.mode, padding_.left,
                              padding_.right);
  return {{"kernel", std::vector<int64_t>{d.kernel_height, d.kernel_width}},
          {"stride", std::vector<int64_t>{d.stride_y, d.stride_x}},
          {"dilation", std::vector<int64_t>{d.dilation_y, d.dilation_x}},
          {"groups", int64_t(d.groups)},
          {"padding", std::vector<int64_t>{y.pad_before, y.pad_after, x.pad_before, x.pad_after}},
          {"neuron", d.neuron}};
}

AccumulatorPrecision accumulator_named(const std::string& name, const std::string& label) {
  if (name == "float") return AccumulatorPrecision::Float;
  if (name == "half") return AccumulatorPrecision::Half;
  fail("[", label, "] accumulator_precision must be 'float' or 'half', got '", name, "'");
}

const char* accumulator_name(AccumulatorPrecision p) { return p == AccumulatorPrecision::Half ? "half" : "float"; }

ConvGeometry ConvolutionNode::geometry(const ImageShape& in) const {
  const auto& d = desc_;
  const Axis y = resolve_axis(in.h, d.kernel_height, d.stride_y, d.dilation_y, padding_.mode,
                              padding_.top, padding_.bottom);
  const Axis x = resolve_axis(in.w, d.kernel_width, d.stride_x, d.dilation_x, padding_.mode,
                              padding_.left, padding_.right);
  return ConvGeometry{d.kernel_height, d.kernel_width, d.stride_y, d.stride_x, d.dilation_y,
                      d.dilation_x, d.groups, y.pad_before, x.pad_before};
}

bool ConvolutionNode::stacks_gradients() const {
  const auto& d = desc_;
  const Padding& p = padding_;
  return std::string_view(kind()) == kKind && !recomputes_neuron_input() && d.kernel_height == 1 &&
         d.kernel_width == 1 && d.stride_y == 1 && d.stride_x == 1 && d.groups == 1 && d.neuron.type == NeuronType::None &&
         (p.mode != PaddingMode::Explicit || (p.top == 0 && p.bottom == 0 && p.left == 0 && p.right == 0));
}

void ConvolutionNode::encode(const EncodeArgs& a) const {
  ConvGeometry g = geometry(a.sources[0]->shape());
  g.tf32 = a.allow_tf32;
  g.half = accumulator_ == AccumulatorPrecision::Half;
  const Tensor x = image_of(a, *a.sources[0]), w = Tensor::parameter(a.weights, 0), b = Tensor::parameter(a.weights, 1);
  const Tensor y = image_of(a, a.result);
  // An addend is joined where the backend has the kernel (accepts_addend); its neuron is the fused one.
  const Tensor addend = a.addend ? image_of(a, *a.addend) : Tensor();
  const NeuronDescriptor& neuron = a.addend ? a.fused : effective_neuron(desc_, a);
  if (a.prepared)
    return dispatch<PreparedConvolutionKernel>(a.backend, g, x, w, a.prepared, b, addend, neuron, y);
  if (addend) return dispatch<ConvolutionAddKernel>(a.backend, g, x, w, b, addend, neuron, y);
  dispatch<ConvolutionKernel>(a.backend, g, x, w, b, neuron, y);
}

size_t ConvolutionNode::prepared_filter_floats(Backend& backend, const ImageShape& in) const {
  if (!has_kernel<PrepareFilterKernel>(backend.device().type())) return 0;
  return dispatch<PrepareFilterKernel>(backend, geometry(in), in, infer({in}), Tensor(), nullptr);
}

void ConvolutionNode::prepare_filter(Backend& backend, const WeightsState& weights, const ImageShape& in,
                                     float* prepared) const {
  dispatch<PrepareFilterKernel>(backend, geometry(in), in, infer({in}), Tensor::parameter(&weights, 0), prepared);
}

// cuDNN has no channels-last gradient algorithms accumulating in float16: those run NCHW.
bool ConvolutionNode::channels_last(DeviceType device, const std::vector<ImageShape>&) const {
  return accumulator_ == AccumulatorPrecision::Float && reads_channels_last<ConvolutionKernel>(device);
}

std::vector<FilterNodePtr> ConvolutionNode::make_gradients(const ImageNodePtr& dy) {
  // The gradient sees the output alone, not the pre-activation.
  if (!desc_.neuron.derivative_from_output())
    fail<Unsupported>("[", label(), "] its fused ", desc_.neuron.name(), " neuron (a=", desc_.neuron.a,
                      ") has no gradient from its output: train it as a separate Neuron node");
  return {std::make_shared<ConvolutionGradientNode>(dy, std::static_pointer_cast<ConvolutionNode>(shared_from_this()))};
}

// The neuron whose derivative the gradient applies to dY, of source 2: the descriptor's, or the
// one after this node whose gradient the planner passed to this step.
const NeuronDescriptor& ConvolutionNode::gradient_neuron(const EncodeArgs& a) const {
  return desc_.neuron.type != NeuronType::None ? desc_.neuron : a.fused;
}

// Sources: dY, X[, Y]. A gradient that nothing reads and weights that do not train are skipped.
void ConvolutionNode::encode_gradient(const EncodeArgs& a) const {
  const Tensor x = image_of(a, *a.sources[1]), dy = image_of(a, *a.sources[0]);
  const Tensor w = Tensor::parameter(a.weights, 0), dx = image_of(a, a.result);
  Tensor y = a.sources.size() > 2 ? image_of(a, *a.sources[2]) : Tensor();
  const Tensor dw = Tensor::parameter(a.gradients, 0), db = Tensor::parameter(a.gradients, 1);
  if (!dx && !dw && !db) return;
  ConvGeometry g = geometry(x.shape());
  g.tf32 = a.allow_tf32;
  g.half = accumulator_ == AccumulatorPrecision::Half;
  const NeuronDescriptor& neuron = gradient_neuron(a);
  std::shared_ptr<Buffer> recomputed;
  if (!y && neuron.type != NeuronType::None) {  // the neuron folded in: its input computed again
    const Tensor b = Tensor::parameter(a.weights, 1);
    if (!dx && !dw && has_kernel<ConvolutionBiasGradientKernel>(a.backend.device().type()) &&
        dispatch<ConvolutionBiasGradientKernel>(a.backend, g, x, w, b, dy, neuron, db))
      return;
    recomputed = a.backend.allocate(dy.bytes());
    y = Tensor(recomputed->data(), dy.batch(), dy.shape(), dy.dtype(), dy.layout());
    dispatch<ConvolutionKernel>(a.backend, g, x, w, b,
                                neuron.derivative_from_output() ? neuron : NeuronDescriptor{}, y);
  }
  dispatch<ConvolutionGradientKernel>(a.backend, g, x, w, dy, y, neuron, dx, dw, db);
}

ConvolutionGradientNode::ConvolutionGradientNode(const ImageNodePtr& dy, std::shared_ptr<ConvolutionNode> forward)
    : GradientNode(gradient_sources(dy, *forward), *forward, kKind), forward_(std::move(forward)) {}

StackedGradientNode::StackedGradientNode(const ImageNodePtr& dy, const ImageNodePtr& x,
                                         std::vector<std::shared_ptr<ConvolutionNode>> convolutions)
    : GradientNode({dy, x}, *convolutions.at(0), kKind), convolutions_(std::move(convolutions)) {
  set_default_label(x->label() + "_stacked_gradient");
}

std::vector<const FilterNode*> StackedGradientNode::reads_weights_of() const {
  std::vector<const FilterNode*> out;
  for (const auto& f : convolutions_) out.push_back(f.get());
  return out;
}

void StackedGradientNode::encode(const EncodeArgs& a) const {
  const Tensor x = image_of(a, *a.sources[1]), dy = image_of(a, *a.sources[0]), dx = image_of(a, a.result);
  const size_t c = x.shape().c;
  // Each sibling's tensor t of `states` (0: its 1×1 filter, K_i × C in OIHW and KRSC alike; 1:
  // its biases, K_i) at its rows of the stacked one, copied in or (where it has one) out.
  auto stack = [&](const std::vector<const WeightsState*>& states, size_t t, const Tensor& all, bool in) {
    size_t row = 0;
    for (size_t i = 0; i < convolutions_.size(); ++i) {
      const Tensor own = states[i] ? Tensor::parameter(states[i], t) : Tensor();
      const size_t per_row = t == 0 ? c : 1, at = row * per_row;
      row += convolutions_[i]->descriptor().output_feature_channels;
      if (!own) continue;
      const Tensor part = Tensor::vector(static_cast<char*>(all.data()) + at * dtype_size(all.dtype()), own.count(),
                                         all.dtype());
      const Tensor mine = Tensor::vector(own.data(), own.count(), own.dtype());
      in ? dispatch<CastKernel>(a.backend, mine, part) : dispatch<CastKernel>(a.backend, part, mine);
    }
  };
  // A buffer for tensor t stacked, `count` values typed and ordered as the first sibling's that has one.
  std::vector<std::shared_ptr<Buffer>> held;
  auto stacked = [&](const std::vector<const WeightsState*>& states, size_t t, size_t count) {
    for (const WeightsState* s : states) {
      const Tensor own = s ? Tensor::parameter(s, t) : Tensor();
      if (!own) continue;
      held.push_back(a.backend.allocate(count * dtype_size(own.dtype())));
      return Tensor(held.back()->data(), 1, ImageShape{static_cast<int>(count), 1, 1}, own.dtype(), own.layout());
    }
    return Tensor();
  };
  const std::vector<const WeightsState*> grads(a.read_gradients.begin(), a.read_gradients.end());
  const size_t k = dy.shape().c;
  // dW and db where some sibling trains them (the others' rows computed and dropped).
  const Tensor dw = stacked(grads, 0, k * c), db = stacked(grads, 1, k);
  if (!dx && !dw && !db) return;
  const Tensor w = dx ? stacked(a.read_weights, 0, k * c) : Tensor();
  if (w) stack(a.read_weights, 0, w, true);
  ConvGeometry g = convolutions_[0]->geometry(x.shape());
  g.tf32 = a.allow_tf32;
  g.half = convolutions_[0]->accumulator_precision() == AccumulatorPrecision::Half;
  dispatch<ConvolutionGradientKernel>(a.backend, g, x, w, dy, Tensor(), NeuronDescriptor{}, dx, dw, db);
  if (dw) stack(grads, 0, dw, false);
  if (db) stack(grads, 1, db, false);
}

std::shared_ptr<FullyConnectedNode> FullyConnectedNode::create(ImageNodePtr source,
                                                               std::shared_ptr<DataSource> weights,
                                                               std::string label) {
  std::shared_ptr<FullyConnectedNode> node(new FullyConnectedNode(
      std::move(source), std::move(weights), Padding{}, std::move(label), kKind));
  const auto& d = node->desc_;
  if (d.groups != 1 || d.stride_x != 1 || d.stride_y != 1 || d.dilation_x != 1 || d.dilation_y != 1)
    fail("[", node->label(), "] fully connected weights take no groups, stride or dilation");
  return node;
}

ImageShape FullyConnectedNode::infer(const std::vector<ImageShape>& s) const {
  const ImageShape& in = s[0];
  const auto& d = desc_;
  const bool whole = d.kernel_height == in.h && d.kernel_width == in.w && d.input_feature_channels == in.c;
  const bool flat = d.kernel_height == 1 && d.kernel_width == 1 &&
                    static_cast<size_t>(d.input_feature_channels) == in.count();
  if (!whole && !flat)
    fail("[", label(), "] source is ", in.str(), " but weights expect ", d.input_feature_channels,
         "×", d.kernel_height, "×", d.kernel_width,
         " (a fully connected kernel covers the whole source, or is 1×1 over C·H·W inputs)");
  return {d.output_feature_channels, 1, 1};
}

void FullyConnectedNode::encode(const EncodeArgs& a) const {
  dispatch<FullyConnectedKernel>(a.backend, *a.sources[0], Tensor::parameter(a.weights, 0), Tensor::parameter(a.weights, 1),
                            effective_neuron(desc_, a), a.result, a.allow_tf32,
                                 accumulator_ == AccumulatorPrecision::Half);
}

void FullyConnectedNode::encode_gradient(const EncodeArgs& a) const {
  const Tensor y = a.sources.size() > 2 ? Tensor(*a.sources[2]) : Tensor();
  const Tensor dw = Tensor::parameter(a.gradients, 0), db = Tensor::parameter(a.gradients, 1);
  if (a.result.empty() && !dw && !db) return;
  dispatch<FullyConnectedGradientKernel>(a.backend, *a.sources[1], Tensor::parameter(a.weights, 0), *a.sources[0], y,
                                         gradient_neuron(a), a.result, dw, db, a.allow_tf32,
                                         accumulator_ == AccumulatorPrecision::Half);
}

}  // namespace nngraph
