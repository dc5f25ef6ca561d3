// Group, instance and layer normalization: shape rule, gradient wiring and kernel dispatch.
#include "ops/group_normalization.h"

#include <cmath>

#include "nngraph/error.h"

namespace nngraph {
namespace {

Tensor state_tensor(const Image* state) {
  return state && !state->empty() ? Tensor::vector(state->data(), state->batch() * state->shape().count()) : Tensor();
}

}  // namespace

std::shared_ptr<GroupNormalizationNode> GroupNormalizationNode::create(ImageNodePtr source,
                                                                       std::shared_ptr<DataSource> parameters,
                                                                       int groups, bool per_position, float epsilon,
                                                                       std::string label) {
  std::shared_ptr<GroupNormalizationNode> node(new GroupNormalizationNode({std::move(source)}, std::move(label), kKind));
  const char* kind = per_position || groups == 1 ? "layer_normalization"
                     : groups == 0              ? "instance_normalization"
                                                : kKind;
  if (!parameters) fail("[", node->label().empty() ? kind : node->label(), "] needs a data source");
  node->set_default_label(parameters->label().empty() ? kind : parameters->label());
  const std::string& name = node->label();
  if (!(epsilon > 0.f) || !std::isfinite(epsilon)) fail("[", name, "] epsilon must be finite and > 0, got ", epsilon);
  node->desc_ = descriptor_as<NormalizationDescriptor>(*parameters, name);
  node->desc_.validate(name);
  if (node->desc_.statistics)
    fail("[", name, "] normalizes with each image's own statistics: its NormalizationDescriptor takes "
         "statistics=False (gamma and beta only)");
  const int c = node->desc_.feature_channels;
  if (groups < 0 || (groups > 0 && c % groups))
    fail("[", name, "] groups=", groups, " must divide the ", c, " feature channels");
  node->source_ = std::move(parameters);
  node->groups_ = groups;
  node->per_position_ = per_position;
  node->epsilon_ = epsilon;
  return node;
}

ImageShape GroupNormalizationNode::infer(const std::vector<ImageShape>& s) const {
  if (s[0].c != desc_.feature_channels)
    fail("[", label(), "] source has ", s[0].c, " feature channels, its data source describes ",
         desc_.feature_channels);
  return s[0];
}

math::NormSpan GroupNormalizationNode::span(const ImageShape& in) const {
  return {in.c, in.h * in.w, groups(), per_position_};
}

size_t GroupNormalizationNode::state_size(const std::vector<ImageShape>& s) const {
  return 2 * static_cast<size_t>(span(s[0]).stats());
}

// Over the channels at each position, a channels-last image is its pixels' rows, each row a
// position of one channel-wide span (the statistics in the same order as NCHW's).
Tensor GroupNormalizationNode::view(const EncodeArgs& a, const Image& image) const {
  return per_position_ ? pixels(a, image) : Tensor(image);
}

void GroupNormalizationNode::encode(const EncodeArgs& a) const {
  const Tensor x = view(a, *a.sources[0]);
  dispatch<GroupNormalizationKernel>(a.backend, span(x.shape()), epsilon_, x, Tensor::parameter(a.weights, 0),
                                     Tensor::parameter(a.weights, 1), state_tensor(a.state), view(a, a.result));
}

std::vector<FilterNodePtr> GroupNormalizationNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<GroupNormalizationGradientNode>(
      dy, std::static_pointer_cast<GroupNormalizationNode>(shared_from_this()))};
}

GroupNormalizationGradientNode::GroupNormalizationGradientNode(const ImageNodePtr& dy,
                                                               std::shared_ptr<GroupNormalizationNode> forward)
    : GradientNode({dy, forward->sources()[0], forward->state_image()}, *forward, kKind),
      forward_(std::move(forward)) {}

void GroupNormalizationGradientNode::encode(const EncodeArgs& a) const {
  if (a.result.empty() && !Tensor::parameter(a.gradients, 0) && !Tensor::parameter(a.gradients, 1)) return;
  const Tensor x = forward_->view(a, *a.sources[1]);
  dispatch<GroupNormalizationGradientKernel>(a.backend, forward_->span(x.shape()), x, forward_->view(a, *a.sources[0]),
                                             Tensor::parameter(a.weights, 0), state_tensor(a.sources[2]),
                                             a.result.empty() ? Tensor() : forward_->view(a, a.result),
                                             Tensor::parameter(a.gradients, 0), Tensor::parameter(a.gradients, 1));
}

}  // namespace nngraph
