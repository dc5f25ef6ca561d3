#pragma once
// Max and average pooling: node, gradient node and kernels.
#include "backends/kernel.h"
#include "backends/math.h"
#include "ops/gradient.h"

namespace nngraph {

enum class PoolingMode { Max, Average };

// Window kh×kw whose taps lie dil_y, dil_x apart (dilated pooling), at strides sy, sx.
struct PoolGeometry {
  int kh, kw, sy, sx, pad_top, pad_left;
  bool count_include_pad;
  int dil_y = 1, dil_x = 1;
  // No two windows share a pixel.
  bool disjoint() const { return sy >= (kh - 1) * dil_y + 1 && sx >= (kw - 1) * dil_x + 1; }
  // 2×2 windows at stride 2 without padding or dilation (the common down-sampling): each
  // pixel lies in at most one window, with no bounds to check.
  bool halves() const {
    return kh == 2 && kw == 2 && sy == 2 && sx == 2 && pad_top == 0 && pad_left == 0 && dil_y == 1 && dil_x == 1;
  }
  // Windows that tile an h × w image exactly (stride = window, no padding or dilation, no
  // pixel left over; global pooling among them): each pixel lies in exactly one.
  bool tiles(int h, int w) const { return h % kh == 0 && w % kw == 0 && side_by_side(h, w, h / kh, w / kw); }
  // Windows side by side (stride = window, no padding or dilation) inside an h × w image: each
  // pixel lies in at most one.
  bool side_by_side(int h, int w, int oh, int ow) const {
    return sy == kh && sx == kw && pad_top == 0 && pad_left == 0 && dil_y == 1 && dil_x == 1 && oh * kh <= h &&
           ow * kw <= w;
  }
  // Max pooling's winners name taps k = ky·kw + kx of a window: the tap of output (oy, ox)'s
  // window at pixel p of a w-wide image, and the pixel of tap k (each backend's, host or device).
  NNGRAPH_HD int tap(int p, int w, int oy, int ox) const {
    return (p / w - oy * sy + pad_top) / dil_y * kw + (p % w - ox * sx + pad_left) / dil_x;
  }
  NNGRAPH_HD int pixel(int k, int w, int oy, int ox) const {
    return (oy * sy - pad_top + k / kw * dil_y) * w + ox * sx - pad_left + k % kw * dil_x;
  }
};

// Max pooling's winners (a training state): per output value, in y's dense order, one byte
// holding the tap ky·kw + kx of its window's first maximum (scan order); each image's bytes
// start winner_image() bytes (`winners.shape().count()` floats) after the one before.
inline size_t winner_image(const Tensor& winners) { return winners.shape().count() * sizeof(float); }

// x's layout is the kernel's: a channels-last y of one pixel per image is the same memory; a
// channels-last y may be a view of some channels of a wider image (Image::channels). Max
// pooling writes the winners where given.
struct PoolingKernel : KernelOf<void(Backend&, PoolingMode, const PoolGeometry&, const Tensor& x, const Tensor& y,
                                     const Tensor& winners)> {
  static constexpr const char* name = "pooling";
};
// Max routes each dy to the first maximum of its window in x; average spreads it evenly.
// Then dx ⊙ neuron'(x) when `neuron` is set: x is that neuron's output (a folded neuron gradient).
// With winners (max pooling) x's values are not read: each dy goes to its window's winner,
// times neuron'(y), the winner's value; channels-last dy and y may then be views of wider images.
struct PoolingGradientKernel
    : KernelOf<void(Backend&, PoolingMode, const PoolGeometry&, const Tensor& x, const Tensor& dy,
                    const Tensor& winners, const Tensor& y, const Tensor& dx, const NeuronDescriptor& neuron)> {
  static constexpr const char* name = "pooling_gradient";
};

class PoolingNode : public FilterNode {
 public:
  static constexpr const char* kKind = "pooling";
  // stride 0 means stride = kernel. Average pooling divides by the in-bounds count unless
  // count_include_pad. Dilation spreads the window's taps (MPSCNNDilatedPoolingMax).
  static std::shared_ptr<PoolingNode> create(ImageNodePtr source, PoolingMode mode, int kernel_height,
                                             int kernel_width, int stride_y, int stride_x, Padding padding,
                                             bool count_include_pad = false, int dilation_y = 1,
                                             int dilation_x = 1, std::string label = "");
  // One window over each whole image: C×1×1 (global average or max pooling).
  static std::shared_ptr<PoolingNode> create_global(ImageNodePtr source, PoolingMode mode, std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  Attributes attributes(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;
  bool channels_last(DeviceType device, const std::vector<ImageShape>&) const override {
    return reads_channels_last<PoolingKernel>(device);
  }
  bool writes_channel_view() const override { return true; }
  // Training: max windows (but global ones) keep their winners for the gradient, which then
  // reads neither this node's source nor its windows again, so the source need not outlive
  // the forward pass.
  size_t state_size(const std::vector<ImageShape>& sources) const override;
  bool keeps_winners() const;
  PoolingMode mode() const { return mode_; }
  PoolGeometry geometry(const ImageShape& in) const;

 protected:
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  PoolingNode(ImageNodePtr source, std::string label) : FilterNode({std::move(source)}, std::move(label), kKind) {}
  PoolingMode mode_ = PoolingMode::Max;
  int kh_ = 2, kw_ = 2, sy_ = 2, sx_ = 2, dil_y_ = 1, dil_x_ = 1;
  bool global_ = false;
  Padding padding_;
  bool count_include_pad_ = false;
};

// Sources: dY, X, and where the forward node keeps winners its state and Y (X then for its
// shape only). Takes a following neuron gradient into its pass (relu before max pooling).
class PoolingGradientNode : public GradientNode {
 public:
  static constexpr const char* kKind = "pooling_gradient";
  PoolingGradientNode(const ImageNodePtr& dy, std::shared_ptr<PoolingNode> forward);
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[1]; }
  void encode(const EncodeArgs& args) const override;
  bool accepts_fused_neuron_gradient() const override { return true; }
  bool reads_values(size_t source) const override { return source != 1 || !forward_->keeps_winners(); }
  // From winners it reads dY and Y as views of wider images (a concatenation's part).
  bool reads_channel_view(size_t source) const override {
    return forward_->keeps_winners() && (source == 0 || source == 3);
  }
  bool channels_last(DeviceType device, const std::vector<ImageShape>&) const override {
    return reads_channels_last<PoolingGradientKernel>(device);
  }

 private:
  std::shared_ptr<PoolingNode> forward_;
};

}  // namespace nngraph
