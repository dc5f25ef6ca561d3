// Softmax: gradient wiring and kernel dispatch.
#include "ops/softmax.h"

namespace nngraph {

std::shared_ptr<SoftMaxNode> SoftMaxNode::create(ImageNodePtr source, bool log, std::string label) {
  std::shared_ptr<SoftMaxNode> node(
      new SoftMaxNode({std::move(source)}, std::move(label), log ? kLogSoftMax : kSoftMax));
  node->log_ = log;
  node->set_default_label(node->kind());
  return node;
}

void SoftMaxNode::encode(const EncodeArgs& a) const { dispatch<SoftMaxKernel>(a.backend, log_, pixels(a, *a.sources[0]), pixels(a, a.result)); }

std::vector<FilterNodePtr> SoftMaxNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<SoftMaxGradientNode>(dy, result_image(), *this)};
}

SoftMaxGradientNode::SoftMaxGradientNode(const ImageNodePtr& dy, const ImageNodePtr& y, const SoftMaxNode& forward)
    : GradientNode({dy, y}, forward, forward.log() ? "log_softmax_gradient" : "softmax_gradient"),
      log_(forward.log()) {}

void SoftMaxGradientNode::encode(const EncodeArgs& a) const {
  dispatch<SoftMaxGradientKernel>(a.backend, log_, pixels(a, *a.sources[1]), pixels(a, *a.sources[0]),
                                  pixels(a, a.result));
}

}  // namespace nngraph
