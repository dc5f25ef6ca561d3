// Gradient construction: every forward node's gradient nodes, and their kernels' dispatch.
#include "backends/backend.h"
#include "nngraph/error.h"
#include "ops/gradient_nodes.h"

namespace nngraph {

std::vector<FilterNodePtr> FilterNode::gradient_filters(const ImageNodePtr& source_gradient) {
  if (!source_gradient) fail("[", label(), "] gradient_filter needs a source gradient image");
  return make_gradients(source_gradient);
}

FilterNodePtr FilterNode::gradient_filter(const ImageNodePtr& source_gradient) {
  auto g = gradient_filters(source_gradient);
  if (g.size() != 1)
    fail("[", label(), "] has ", sources().size(), " sources: use gradient_filters for one gradient node each");
  return g[0];
}

std::vector<FilterNodePtr> FilterNode::make_gradients(const ImageNodePtr&) {
  fail<Unsupported>("[", label(), "] ", kind(), " has no gradient node");
}

GradientNode::GradientNode(std::vector<ImageNodePtr> sources, const FilterNode& forward, const char* kind)
    : FilterNode(std::move(sources), "", kind) {
  set_default_label(forward.label() + "_gradient");
}

std::vector<FilterNodePtr> GradientNode::make_gradients(const ImageNodePtr&) {
  fail<Unsupported>("[", label(), "] gradients of gradient nodes (second order) are not supported");
}

// ---- convolution / fully connected

std::vector<FilterNodePtr> ConvolutionNode::make_gradients(const ImageNodePtr& dy) {
  // The gradient sees the output alone, not the pre-activation.
  if (!desc_.neuron.derivative_from_output())
    fail<Unsupported>("[", label(), "] its fused ", desc_.neuron.name(), " neuron (a=", desc_.neuron.a,
                      ") has no gradient from its output: train it as a separate Neuron node");
  return {std::make_shared<ConvolutionGradientNode>(dy, std::static_pointer_cast<ConvolutionNode>(shared_from_this()))};
}

namespace {
std::vector<ImageNodePtr> conv_gradient_sources(const ImageNodePtr& dy, ConvolutionNode& f) {
  std::vector<ImageNodePtr> s{dy, f.sources()[0]};
  if (f.descriptor().neuron.type != NeuronType::None) s.push_back(f.result_image());
  return s;
}
}  // namespace

ConvolutionGradientNode::ConvolutionGradientNode(const ImageNodePtr& dy, std::shared_ptr<ConvolutionNode> forward)
    : GradientNode(conv_gradient_sources(dy, *forward), *forward, "convolution_gradient"),
      forward_(std::move(forward)),
      fully_connected_(dynamic_cast<FullyConnectedNode*>(forward_.get()) != nullptr) {}

void ConvolutionGradientNode::encode(const EncodeArgs& a) const {
  const auto& d = forward_->descriptor();
  const Image& dy = *a.sources[0];
  const Image& x = *a.sources[1];
  const Image* y = a.sources.size() > 2 ? a.sources[2] : nullptr;
  const Image* dx = a.result.empty() ? nullptr : &a.result;
  const float* w = static_cast<const float*>(a.weights->weights->data());
  float* dw = a.gradients ? static_cast<float*>(a.gradients->weights->data()) : nullptr;
  float* db = a.gradients && a.gradients->biases ? static_cast<float*>(a.gradients->biases->data()) : nullptr;
  if (!dx && !dw) return;
  if (fully_connected_) {
    a.backend.fully_connected_gradient(x, w, dy, y, d.neuron, dx, dw, db, a.allow_tf32);
  } else {
    ConvGeometry g = forward_->geometry(x.shape());
    g.tf32 = a.allow_tf32;
    a.backend.convolution_gradient(g, x, w, dy, y, d.neuron, dx, dw, db);
  }
}

// ---- pooling

std::vector<FilterNodePtr> PoolingNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<PoolingGradientNode>(dy, std::static_pointer_cast<PoolingNode>(shared_from_this()))};
}

PoolingGradientNode::PoolingGradientNode(const ImageNodePtr& dy, std::shared_ptr<PoolingNode> forward)
    : GradientNode({dy, forward->sources()[0]}, *forward, "pooling_gradient"), forward_(std::move(forward)) {}

void PoolingGradientNode::encode(const EncodeArgs& a) const {
  const Image& x = *a.sources[1];
  a.backend.pooling_gradient(forward_->mode(), forward_->geometry(x.shape()), x, *a.sources[0], a.result, a.fused);
}

// ---- neuron

std::vector<FilterNodePtr> NeuronNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<NeuronGradientNode>(dy, std::static_pointer_cast<NeuronNode>(shared_from_this()))};
}

NeuronGradientNode::NeuronGradientNode(const ImageNodePtr& dy, std::shared_ptr<NeuronNode> forward)
    : GradientNode({dy, forward->neuron().derivative_from_output() ? forward->result_image() : forward->sources()[0]},
                   *forward, "neuron_gradient"),
      neuron_(forward->neuron()) {}

void NeuronGradientNode::encode(const EncodeArgs& a) const {
  a.backend.neuron_gradient(neuron_, *a.sources[1], *a.sources[0], a.result);
}

// ---- softmax

std::vector<FilterNodePtr> SoftMaxNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<SoftMaxGradientNode>(dy, result_image(), *this)};
}

SoftMaxGradientNode::SoftMaxGradientNode(const ImageNodePtr& dy, const ImageNodePtr& y, const SoftMaxNode& forward)
    : GradientNode({dy, y}, forward, "softmax_gradient"), log_(forward.log()) {}

void SoftMaxGradientNode::encode(const EncodeArgs& a) const {
  a.backend.softmax_gradient(log_, *a.sources[1], *a.sources[0], a.result);
}

// ---- dropout

std::vector<FilterNodePtr> DropoutNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<DropoutGradientNode>(dy, *this)};
}

DropoutGradientNode::DropoutGradientNode(const ImageNodePtr& dy, const DropoutNode& forward)
    : GradientNode({dy}, forward, "dropout_gradient"), keep_(forward.keep_probability()), seed_(forward.seed()) {}

void DropoutGradientNode::encode(const EncodeArgs& a) const {
  a.backend.dropout(keep_, seed_, a.step, *a.sources[0], a.result);
}

// ---- addition and concatenation

std::vector<FilterNodePtr> AdditionNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<PassGradientNode>(dy, *this), std::make_shared<PassGradientNode>(dy, *this)};
}

PassGradientNode::PassGradientNode(const ImageNodePtr& dy, const FilterNode& forward)
    : GradientNode({dy}, forward, "addition_gradient") {}

void PassGradientNode::encode(const EncodeArgs& a) const {
  a.backend.copy(a.result.data(), a.sources[0]->data(), a.result.descriptor().bytes());
}

std::vector<FilterNodePtr> ConcatenationNode::make_gradients(const ImageNodePtr& dy) {
  std::vector<FilterNodePtr> out;
  std::vector<ImageNodePtr> srcs{dy};
  for (const auto& s : sources()) {
    srcs.push_back(s);
    out.push_back(std::make_shared<SliceGradientNode>(srcs, *this));
  }
  return out;
}

SliceGradientNode::SliceGradientNode(std::vector<ImageNodePtr> sources, const FilterNode& forward)
    : GradientNode(std::move(sources), forward, "concatenation_gradient") {}

void SliceGradientNode::encode(const EncodeArgs& a) const {
  int offset = 0;
  for (size_t i = 1; i + 1 < a.sources.size(); ++i) offset += a.sources[i]->shape().c;
  a.backend.slice_channels(*a.sources[0], offset, a.result);
}

}  // namespace nngraph
