// Softmax: gradient wiring and kernel dispatch.
#include "ops/softmax.h"

#include "nngraph/error.h"

namespace nngraph {

namespace {

// A group of channels as the channels of an image of its own: both layouts' pixels (NCHW
// images, channels-last rows) are dense here, so each group follows the one before.
Tensor grouped(const Tensor& t, int groups) {
  if (groups == 1) return t;
  const ImageShape& s = t.shape();
  if (t.strides()[0] != static_cast<int64_t>(s.count())) fail("[softmax] channel groups of a strided view");
  return Tensor(t.data(), t.batch() * groups, ImageShape{s.c / groups, s.h, s.w}, t.dtype());
}

}  // namespace

std::shared_ptr<SoftMaxNode> SoftMaxNode::create(ImageNodePtr source, bool log, int groups, std::string label) {
  std::shared_ptr<SoftMaxNode> node(
      new SoftMaxNode({std::move(source)}, std::move(label), log ? kLogSoftMax : kSoftMax));
  node->log_ = log;
  node->set_default_label(node->kind());
  if (groups < 1) fail("[", node->label(), "] groups must be at least 1, got ", groups);
  node->groups_ = groups;
  return node;
}

ImageShape SoftMaxNode::infer(const std::vector<ImageShape>& s) const {
  if (s[0].c % groups_) fail("[", label(), "] ", s[0].c, " channels do not fall into ", groups_, " groups");
  return s[0];
}

void SoftMaxNode::encode(const EncodeArgs& a) const {
  dispatch<SoftMaxKernel>(a.backend, log_, grouped(pixels(a, *a.sources[0]), groups_), grouped(pixels(a, a.result), groups_));
}

std::vector<FilterNodePtr> SoftMaxNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<SoftMaxGradientNode>(dy, result_image(), *this)};
}

SoftMaxGradientNode::SoftMaxGradientNode(const ImageNodePtr& dy, const ImageNodePtr& y, const SoftMaxNode& forward)
    : GradientNode({dy, y}, forward, forward.log() ? "log_softmax_gradient" : "softmax_gradient"),
      log_(forward.log()), groups_(forward.groups()) {}

void SoftMaxGradientNode::encode(const EncodeArgs& a) const {
  dispatch<SoftMaxGradientKernel>(a.backend, log_, grouped(pixels(a, *a.sources[1]), groups_),
                                  grouped(pixels(a, *a.sources[0]), groups_), grouped(pixels(a, a.result), groups_));
}

}  // namespace nngraph
