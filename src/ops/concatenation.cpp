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
  const Tensor whole = image_of(a, a.result);
  int offset = 0;
  for (const Image* s : a.sources) {
    const Tensor part = image_of(a, *s);
    const char* place = static_cast<const char*>(whole.data()) + channel_rows(whole, part, offset).skip * dtype_size(part.dtype());
    if (part.data() != place) dispatch<CopyChannelsKernel>(a.backend, part, whole, offset);  // else made in place
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

int SliceGradientNode::slices_channels(const std::vector<ImageShape>& s) const {
  int offset = 0;
  for (size_t i = 1; i + 1 < s.size(); ++i) offset += s[i].c;
  return offset;
}

void SliceGradientNode::encode(const EncodeArgs& a) const {
  std::vector<ImageShape> shapes;
  for (const Image* s : a.sources) shapes.push_back(s->shape());
  dispatch<SliceChannelsKernel>(a.backend, image_of(a, *a.sources[0]), slices_channels(shapes), image_of(a, a.result));
}

}  // namespace nngraph
