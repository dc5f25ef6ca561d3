#include "nngraph/error.h"
#include "nngraph/nodes.h"
#include "ops/gradient.h"

namespace nngraph {

ImageNode::ImageNode(std::optional<ImageShape> shape, std::string label)
    : shape_(shape), label_(std::move(label)) {
  if (shape_ && (shape_->c < 1 || shape_->h < 1 || shape_->w < 1))
    fail("[", label_.empty() ? "image" : label_, "] declared shape must be positive, got ",
         shape_->str());
}

FilterNode::FilterNode(std::vector<ImageNodePtr> sources, std::string label, const char* kind)
    : sources_(std::move(sources)), result_({}, std::move(label)), kind_(kind) {
  result_.producer_ = this;
  state_.producer_ = this;
  state_.is_state_ = true;
  if (sources_.empty()) fail("[", this->label().empty() ? kind : this->label(), "] needs a source");
  for (size_t i = 0; i < sources_.size(); ++i)
    if (!sources_[i])
      fail("[", this->label().empty() ? kind : this->label(), "] source ", i, " is None");
}

ImageNodePtr FilterNode::result_image() { return ImageNodePtr(shared_from_this(), &result_); }

ImageNodePtr FilterNode::state_image() { return ImageNodePtr(shared_from_this(), &state_); }

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

void FilterNode::fold(Backend&, const WeightsState&, const WeightsState&, const WeightsState&) const {
  fail<Unsupported>("[", label(), "] ", kind(), " does not fold into another node");
}

void FilterNode::prepare_filter(Backend&, const WeightsState&, const ImageShape&, float*) const {
  fail<Unsupported>("[", label(), "] ", kind(), " has no prepared filter");
}

GradientNode::GradientNode(std::vector<ImageNodePtr> sources, const FilterNode& forward, const char* kind)
    : FilterNode(std::move(sources), "", kind) {
  set_default_label(forward.label() + "_gradient");
}

std::vector<FilterNodePtr> GradientNode::make_gradients(const ImageNodePtr&) {
  fail<Unsupported>("[", label(), "] gradients of gradient nodes (second order) are not supported");
}

}  // namespace nngraph
