// Loss nodes: shape rule and kernel dispatch; the node starts the gradient pass itself.
#include "ops/loss.h"

#include "nngraph/error.h"

namespace nngraph {

std::shared_ptr<LossNode> LossNode::create(ImageNodePtr source, LossDescriptor descriptor, std::string label) {
  descriptor.validate();
  const std::string base = label.empty() ? "loss" : label;
  auto labels = std::make_shared<ImageNode>(std::nullopt, base + "_labels");
  auto weights = std::make_shared<ImageNode>(std::nullopt, base + "_weights");
  std::shared_ptr<LossNode> node(new LossNode({std::move(source), labels, weights}, std::move(label), kKind));
  node->set_default_label("loss");
  node->descriptor_ = descriptor;
  return node;
}

ImageShape LossNode::infer(const std::vector<ImageShape>& s) const {
  if (s[1] != s[0])
    fail("[", label(), "] labels are ", s[1].str(), " per image but the source is ", s[0].str());
  if (s[2] != ImageShape{1, 1, 1}) fail("[", label(), "] label weights must be one value per image");
  return s[0];
}

double LossNode::reduction_divisor(int n, const ImageShape& shape) const {
  if (descriptor_.reduction != Reduction::Mean) return 1.0;
  if (descriptor_.type == LossType::CosineDistance) return n;
  if (descriptor_.per_image()) return static_cast<double>(n) * shape.h * shape.w;
  return static_cast<double>(n) * shape.count();
}

void LossNode::encode(const EncodeArgs& a) const {
  const Image& x = *a.sources[0];
  dispatch<LossKernel>(a.backend, descriptor_, 1.0 / reduction_divisor(x.batch(), x.shape()), a.loss_scale, x,
                       *a.sources[1], *a.sources[2], a.result, *a.losses);
}

std::vector<FilterNodePtr> LossNode::make_gradients(const ImageNodePtr&) {
  fail<Unsupported>("[", label(), "] a loss node's result image is already the gradient that starts the "
                                  "gradient pass; use training_graph()");
}

}  // namespace nngraph
