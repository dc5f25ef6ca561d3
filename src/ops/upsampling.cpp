// Upsampling: shape rule, gradient wiring and kernel dispatch.
#include "ops/upsampling.h"

#include "nngraph/error.h"

namespace nngraph {

std::shared_ptr<UpsamplingNode> UpsamplingNode::create(ImageNodePtr source, UpsamplingMode mode, int sy, int sx,
                                                       bool align_corners, std::string label) {
  std::shared_ptr<UpsamplingNode> node(new UpsamplingNode({std::move(source)}, std::move(label), kKind));
  node->set_default_label(mode == UpsamplingMode::Nearest ? "upsampling_nearest" : "upsampling_bilinear");
  if (sy < 1 || sx < 1) fail("[", node->label(), "] scale factors must be at least 1, got ", sy, "×", sx);
  if (align_corners && mode == UpsamplingMode::Nearest)
    fail("[", node->label(), "] align_corners applies to bilinear upsampling only");
  node->mode_ = mode;
  node->sy_ = sy;
  node->sx_ = sx;
  node->align_corners_ = align_corners;
  return node;
}

ImageShape UpsamplingNode::infer(const std::vector<ImageShape>& s) const {
  const int64_t h = static_cast<int64_t>(s[0].h) * sy_, w = static_cast<int64_t>(s[0].w) * sx_;
  if (h > (1 << 30) || w > (1 << 30)) fail("[", label(), "] a ", h, "×", w, " result is too large");
  return {s[0].c, static_cast<int>(h), static_cast<int>(w)};
}

void UpsamplingNode::encode(const EncodeArgs& a) const {
  dispatch<UpsamplingKernel>(a.backend, mode_, align_corners_, *a.sources[0], a.result);
}

std::vector<FilterNodePtr> UpsamplingNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<UpsamplingGradientNode>(dy, std::static_pointer_cast<UpsamplingNode>(shared_from_this()))};
}

UpsamplingGradientNode::UpsamplingGradientNode(const ImageNodePtr& dy, std::shared_ptr<UpsamplingNode> forward)
    : GradientNode({dy}, *forward, kKind), forward_(std::move(forward)) {}

ImageShape UpsamplingGradientNode::infer(const std::vector<ImageShape>& s) const {
  const int sy = forward_->scale_y(), sx = forward_->scale_x();
  if (s[0].h % sy || s[0].w % sx)
    fail("[", label(), "] the incoming gradient's ", s[0].h, "×", s[0].w, " is not a multiple of the ", sy, "×", sx,
         " scale");
  return {s[0].c, s[0].h / sy, s[0].w / sx};
}

void UpsamplingGradientNode::encode(const EncodeArgs& a) const {
  dispatch<UpsamplingGradientKernel>(a.backend, forward_->mode(), forward_->align_corners(), *a.sources[0], a.result);
}

}  // namespace nngraph
