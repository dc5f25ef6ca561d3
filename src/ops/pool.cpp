// Pooling: shape rule, gradient wiring and kernel dispatch.
#include "ops/pool.h"

#include <algorithm>

#include "nngraph/error.h"

namespace nngraph {

std::shared_ptr<PoolingNode> PoolingNode::create(ImageNodePtr source, PoolingMode mode, int kh,
                                                 int kw, int sy, int sx, Padding padding,
                                                 bool count_include_pad, int dil_y, int dil_x, std::string label) {
  std::shared_ptr<PoolingNode> node(new PoolingNode(std::move(source), std::move(label)));
  node->set_default_label(mode == PoolingMode::Max ? "max_pooling" : "average_pooling");
  if (kh < 1 || kw < 1) fail("[", node->label(), "] kernel must be at least 1×1, got ", kh, "×", kw);
  if (sy < 0 || sx < 0) fail("[", node->label(), "] stride must be >= 1 (0: the kernel size)");
  if (dil_y < 1 || dil_x < 1) fail("[", node->label(), "] dilation must be >= 1, got ", dil_y, "×", dil_x);
  const int span_y = (kh - 1) * dil_y + 1, span_x = (kw - 1) * dil_x + 1;
  if (padding.mode == PaddingMode::Explicit &&
      (padding.top >= span_y || padding.bottom >= span_y || padding.left >= span_x || padding.right >= span_x))
    fail("[", node->label(), "] explicit padding ", padding.str(), " must be smaller than the ",
         span_y, "×", span_x, " window");
  node->mode_ = mode;
  node->dil_y_ = dil_y;
  node->dil_x_ = dil_x;
  node->kh_ = kh;
  node->kw_ = kw;
  node->sy_ = sy ? sy : kh;
  node->sx_ = sx ? sx : kw;
  node->padding_ = padding;
  node->count_include_pad_ = count_include_pad;
  return node;
}

std::shared_ptr<PoolingNode> PoolingNode::create_global(ImageNodePtr source, PoolingMode mode, std::string label) {
  std::shared_ptr<PoolingNode> node(new PoolingNode(std::move(source), std::move(label)));
  node->set_default_label(mode == PoolingMode::Max ? "global_max_pooling" : "global_average_pooling");
  node->mode_ = mode;
  node->global_ = true;
  return node;
}

ImageShape PoolingNode::infer(const std::vector<ImageShape>& s) const {
  const ImageShape& in = s[0];
  if (global_) return {in.c, 1, 1};
  const Axis y = resolve_axis(in.h, kh_, sy_, dil_y_, padding_.mode, padding_.top, padding_.bottom);
  const Axis x = resolve_axis(in.w, kw_, sx_, dil_x_, padding_.mode, padding_.left, padding_.right);
  if (y.out < 1 || x.out < 1)
    fail("[", label(), "] ", kh_, "×", kw_, " window", dil_y_ * dil_x_ > 1 ? " (dilated)" : "", " does not fit a ",
         in.h, "×", in.w, " source with padding ", padding_.str());
  return {in.c, y.out, x.out};
}

Attributes PoolingNode::attributes(const std::vector<ImageShape>& s) const {
  const ImageShape& in = s[0];
  const ImageShape out = infer(s);
  const PoolGeometry g = geometry(in);
  // Padding after: what the last window reaches beyond the source (none where it stops short).
  const auto after = [](int in, int out, int k, int st, int dil, int before) {
    return int64_t(std::max(0, (out - 1) * st + (k - 1) * dil + 1 - in - before));
  };
  return {{"mode", std::string(mode_ == PoolingMode::Max ? "max" : "average")},
          {"global", int64_t(global_)},
          {"kernel", std::vector<int64_t>{g.kh, g.kw}},
          {"stride", std::vector<int64_t>{g.sy, g.sx}},
          {"dilation", std::vector<int64_t>{g.dil_y, g.dil_x}},
          {"padding", std::vector<int64_t>{g.pad_top, after(in.h, out.h, g.kh, g.sy, g.dil_y, g.pad_top), g.pad_left,
                                           after(in.w, out.w, g.kw, g.sx, g.dil_x, g.pad_left)}},
          {"count_include_pad", int64_t(g.count_include_pad)}};
}

PoolGeometry PoolingNode::geometry(const ImageShape& in) const {
  if (global_) return PoolGeometry{in.h, in.w, in.h, in.w, 0, 0, false};
  const Axis y = resolve_axis(in.h, kh_, sy_, dil_y_, padding_.mode, padding_.top, padding_.bottom);
  const Axis x = resolve_axis(in.w, kw_, sx_, dil_x_, padding_.mode, padding_.left, padding_.right);
  return PoolGeometry{kh_, kw_, sy_, sx_, y.pad_before, x.pad_before, count_include_pad_, dil_y_, dil_x_};
}

bool PoolingNode::keeps_winners() const { return mode_ == PoolingMode::Max && !global_ && kh_ * kw_ <= 256; }

size_t PoolingNode::state_size(const std::vector<ImageShape>& sources) const {
  if (!keeps_winners()) return 0;
  const size_t bytes = infer(sources).count();
  return (bytes + 15) / 16 * 4;  // whole 16-byte blocks: each image's winners aligned for packed loads
}

void PoolingNode::encode(const EncodeArgs& a) const {
  const bool winners = a.training && a.state && !a.state->empty();
  dispatch<PoolingKernel>(a.backend, mode_, geometry(a.sources[0]->shape()), image_of(a, *a.sources[0]),
                          image_of(a, a.result), winners ? Tensor(*a.state) : Tensor());
}

std::vector<FilterNodePtr> PoolingNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<PoolingGradientNode>(dy, std::static_pointer_cast<PoolingNode>(shared_from_this()))};
}

namespace {
std::vector<ImageNodePtr> gradient_sources(const ImageNodePtr& dy, PoolingNode& forward) {
  if (!forward.keeps_winners()) return {dy, forward.sources()[0]};
  return {dy, forward.sources()[0], forward.state_image(), forward.result_image()};
}
}  // namespace

PoolingGradientNode::PoolingGradientNode(const ImageNodePtr& dy, std::shared_ptr<PoolingNode> forward)
    : GradientNode(gradient_sources(dy, *forward), *forward, kKind), forward_(std::move(forward)) {}

void PoolingGradientNode::encode(const EncodeArgs& a) const {
  const Image& x = *a.sources[1];
  const bool winners = a.sources.size() > 2;
  dispatch<PoolingGradientKernel>(a.backend, forward_->mode(), forward_->geometry(x.shape()), image_of(a, x),
                                  image_of(a, *a.sources[0]), winners ? Tensor(*a.sources[2]) : Tensor(),
                                  winners ? image_of(a, *a.sources[3]) : Tensor(), image_of(a, a.result), a.fused);
}

}  // namespace nngraph
