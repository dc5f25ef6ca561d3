// Padding and cropping: shape rules, gradient wiring and kernel dispatch.
#include "ops/padding.h"

#include <cmath>

#include "nngraph/error.h"

namespace nngraph {
namespace {

// Channels-last images for the kernels' NCHW padding: a constant padding of the channels alone
// pads each pixel's row of C values (N·H·W one-row images), and one of the rows and columns
// alone pads rows of W·C values (N one-channel images of H rows), a pixel's C values moving
// together. Other paddings (both at once; reflect and edge) read NCHW copies.
bool channels_alone(const PadGeometry& g) { return g.top == 0 && g.bottom == 0 && g.left == 0 && g.right == 0; }

bool reads_nhwc(PadMode mode, const PadGeometry& g) {
  return mode == PadMode::Constant && (channels_alone(g) || (g.front == 0 && g.back == 0));
}

Tensor nhwc_view(const EncodeArgs& a, const Image& image, const PadGeometry& g) {
  const Tensor t = image_of(a, image);
  if (!t) return t;
  const ImageShape& s = t.shape();
  return channels_alone(g) ? Tensor(t.data(), t.batch() * s.h * s.w, ImageShape{1, 1, s.c}, t.dtype())
                           : Tensor(t.data(), t.batch(), ImageShape{1, s.h, s.w * s.c}, t.dtype());
}

// The amounts over those images; c, the channels, which a padding of rows and columns keeps.
PadGeometry nhwc_amounts(const PadGeometry& g, int c) {
  return channels_alone(g) ? PadGeometry{0, 0, 0, 0, g.front, g.back}
                           : PadGeometry{0, 0, g.top, g.bottom, g.left * c, g.right * c};
}

}  // namespace

std::shared_ptr<PaddingNode> PaddingNode::create(ImageNodePtr source, PadMode mode, PadGeometry pads, float value,
                                                 std::string label) {
  std::shared_ptr<PaddingNode> node(new PaddingNode({std::move(source)}, std::move(label), kKind));
  node->set_default_label("padding");
  if (mode != PadMode::Constant) {
    if (pads.front || pads.back) fail("[", node->label(), "] only constant padding pads channels");
    if (pads.top < 0 || pads.bottom < 0 || pads.left < 0 || pads.right < 0)
      fail("[", node->label(), "] negative amounts ", pads.str(), " crop, which only constant padding does");
  }
  if (!std::isfinite(value)) fail("[", node->label(), "] the constant must be finite, got ", value);
  node->mode_ = mode;
  node->pads_ = pads;
  node->value_ = value;
  return node;
}

std::shared_ptr<PaddingNode> PaddingNode::crop(ImageNodePtr source, CropWindow window, std::string label) {
  std::shared_ptr<PaddingNode> node(new PaddingNode({std::move(source)}, std::move(label), kKind));
  node->set_default_label("crop");
  if (window.y < 0 || window.x < 0 || window.channel < 0 || window.height < 0 || window.width < 0 ||
      window.channels < 0)
    fail("[", node->label(), "] the window's origin and size must not be negative");
  node->window_ = window;
  return node;
}

PadGeometry PaddingNode::geometry(const ImageShape& in) const {
  if (!window_) return pads_;
  const CropWindow& w = *window_;
  const int h = w.height ? w.height : in.h - w.y, wd = w.width ? w.width : in.w - w.x;
  const int c = w.channels ? w.channels : in.c - w.channel;
  return {-w.channel, -(in.c - w.channel - c), -w.y, -(in.h - w.y - h), -w.x, -(in.w - w.x - wd)};
}

Attributes PaddingNode::attributes(const std::vector<ImageShape>& s) const {
  const PadGeometry g = geometry(s[0]);
  const char* mode = mode_ == PadMode::Reflect ? "reflect" : mode_ == PadMode::Edge ? "edge" : "constant";
  return {{"mode", std::string(mode)},
          {"value", double(value_)},
          {"padding", std::vector<int64_t>{g.front, g.back, g.top, g.bottom, g.left, g.right}}};
}

ImageShape PaddingNode::infer(const std::vector<ImageShape>& s) const {
  const ImageShape& in = s[0];
  const PadGeometry g = geometry(in);
  const ImageShape out{in.c + g.front + g.back, in.h + g.top + g.bottom, in.w + g.left + g.right};
  if (window_ && (g.front > 0 || g.back > 0 || g.top > 0 || g.bottom > 0 || g.left > 0 || g.right > 0))
    fail("[", label(), "] the window (rows ", window_->y, "+", in.h + g.top + g.bottom, ", columns ", window_->x, "+",
         in.w + g.left + g.right, ", channels ", window_->channel, "+", in.c + g.front + g.back,
         ") does not lie inside the ", in.str(), " source");
  if (out.c < 1 || out.h < 1 || out.w < 1)
    fail("[", label(), "] amounts ", g.str(), " leave nothing of the ", in.str(), " source");
  if (mode_ == PadMode::Reflect && (g.top >= in.h || g.bottom >= in.h || g.left >= in.w || g.right >= in.w))
    fail("[", label(), "] reflect padding ", g.str(), " must be smaller than the ", in.h, "×", in.w, " source");
  return out;
}

bool PaddingNode::channels_last(DeviceType, const std::vector<ImageShape>& s) const {
  return reads_nhwc(mode_, geometry(s[0]));
}

void PaddingNode::encode(const EncodeArgs& a) const {
  const PadGeometry g = geometry(a.sources[0]->shape());
  if (a.layout == Layout::NHWC)
    dispatch<PaddingKernel>(a.backend, mode_, nhwc_amounts(g, a.sources[0]->shape().c), value_,
                            nhwc_view(a, *a.sources[0], g), nhwc_view(a, a.result, g));
  else
    dispatch<PaddingKernel>(a.backend, mode_, g, value_, *a.sources[0], a.result);
}

std::vector<FilterNodePtr> PaddingNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<PaddingGradientNode>(dy, std::static_pointer_cast<PaddingNode>(shared_from_this()))};
}

PaddingGradientNode::PaddingGradientNode(const ImageNodePtr& dy, std::shared_ptr<PaddingNode> forward)
    : GradientNode(forward->is_crop() ? std::vector<ImageNodePtr>{dy, forward->sources()[0]} : std::vector<ImageNodePtr>{dy},
                   *forward, kKind),
      forward_(std::move(forward)) {}

ImageShape PaddingGradientNode::infer(const std::vector<ImageShape>& s) const {
  if (forward_->is_crop()) return s[1];
  const PadGeometry g = forward_->geometry(s[0]);  // a padding's amounts do not depend on the shape
  const ImageShape in{s[0].c - g.front - g.back, s[0].h - g.top - g.bottom, s[0].w - g.left - g.right};
  if (in.c < 1 || in.h < 1 || in.w < 1)
    fail("[", label(), "] the incoming gradient's ", s[0].str(), " is smaller than the padding ", g.str());
  return in;
}

bool PaddingGradientNode::channels_last(DeviceType, const std::vector<ImageShape>& s) const {
  return reads_nhwc(forward_->mode(), forward_->geometry(forward_->is_crop() ? s[1] : s[0]));
}

void PaddingGradientNode::encode(const EncodeArgs& a) const {
  if (a.result.empty()) return;
  const PadGeometry g = forward_->geometry(a.result.shape());
  if (a.layout == Layout::NHWC)
    dispatch<PaddingGradientKernel>(a.backend, forward_->mode(), nhwc_amounts(g, a.result.shape().c),
                                    nhwc_view(a, *a.sources[0], g), nhwc_view(a, a.result, g));
  else
    dispatch<PaddingGradientKernel>(a.backend, forward_->mode(), g, *a.sources[0], a.result);
}

}  // namespace nngraph
