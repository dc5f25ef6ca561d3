// Concatenation: shape rule, gradient wiring and kernel dispatch.
#include "ops/concatenation.h"

#include "nngraph/error.h"

namespace nngraph {

std::shared_ptr<ConcatenationNode> ConcatenationNode::create(std::vector<ImageNodePtr> sources, std::string label) {
  std::shared_ptr<ConcatenationNode> node(new ConcatenationNode(std::move(sources), std::move(label), kKind));
  node->set_default_label(kKind);
  return node;
}

ImageShape ConcatenationNode::infer(const std::vector<ImageShape>& s) const {
  ImageShape out{0, s[0].h, s[0].w};
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].h != out.h || s[i].w != out.w)
      fail("[", label(), "] source ", i, " is ", s[i].str(), " but source 0 is ", s[0].str(),
           " (concatenation needs equal height and width)");
    out.c += s[i].c;
  }
  return out;
}

void ConcatenationNode::encode(const EncodeArgs& a) const {
  int offset = 0;
  for (const Image* s : a.sources) {
    dispatch<CopyChannelsKernel>(a.backend, image_of(a, *s), image_of(a, a.result), offset);
    offset += s->shape().c;
  }
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
    : GradientNode(std::move(sources), forward, kKind) {}

void SliceGradientNode::encode(const EncodeArgs& a) const {
  int offset = 0;
  for (size_t i = 1; i + 1 < a.sources.size(); ++i) offset += a.sources[i]->shape().c;
  dispatch<SliceChannelsKernel>(a.backend, image_of(a, *a.sources[0]), offset, image_of(a, a.result));
}

}  // namespace nngraph
