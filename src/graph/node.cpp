#include "nngraph/error.h"
#include "nngraph/nodes.h"

namespace nngraph {

ImageNode::ImageNode(std::optional<ImageShape> shape, std::string label)
    : shape_(shape), label_(std::move(label)) {
  if (shape_ && (shape_->c < 1 || shape_->h < 1 || shape_->w < 1))
    fail("[", label_.empty() ? "image" : label_, "] declared shape must be positive, got ",
         shape_->str());
}

FilterNode::FilterNode(std::vector<ImageNodePtr> sources, std::string label, const char* kind)
    : sources_(std::move(sources)), result_({}, std::move(label)) {
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

}  // namespace nngraph
