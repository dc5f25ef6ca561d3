#pragma once
// Concatenation along feature channels: node, gradient node and kernels.
#include "backends/kernel.h"
#include "ops/gradient.h"

namespace nngraph {

// Channels [offset, offset + C_part) of `whole` as rows of values: one row per image (NCHW)
// or per pixel (NHWC), `columns` values at `skip` into rows `ld` apart (a whole that is itself
// a view of a wider image's channels has its pixel stride); the part's rows are dense. Both
// layouts are the same copy, so each backend has one kernel for both.
struct ChannelRows {
  size_t rows, columns, ld, skip;
};
inline ChannelRows channel_rows(const Tensor& whole, const Tensor& part, int offset) {
  const ImageShape& w = whole.shape();
  const bool last = whole.layout() == Layout::NHWC;
  const size_t plane = last ? 1 : static_cast<size_t>(w.h) * w.w;
  return {part.count() / (part.shape().c * plane), part.shape().c * plane,
          static_cast<size_t>(last ? whole.strides()[3] : whole.strides()[0]), offset * plane};
}

// Writes x into channels [offset, offset + C_x) of y.
struct CopyChannelsKernel : KernelOf<void(Backend&, const Tensor& x, const Tensor& y, int channel_offset)> {
  static constexpr const char* name = "concatenation";
};
// y = channels [offset, offset + C_y) of x.
struct SliceChannelsKernel : KernelOf<void(Backend&, const Tensor& x, int channel_offset, const Tensor& y)> {
  static constexpr const char* name = "concatenation_gradient";
};

// Joins sources along feature channels; all share H×W.
class ConcatenationNode : public FilterNode {
 public:
  static constexpr const char* kKind = "concatenation";
  static std::shared_ptr<ConcatenationNode> create(std::vector<ImageNodePtr> sources, std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;
  bool channels_last(DeviceType device, const std::vector<ImageShape>&) const override {
    return reads_channels_last<CopyChannelsKernel>(device);
  }
  bool concatenates() const override { return true; }
  // Copies only the sources not made in place; its copies may write into a view.
  bool writes_channel_view() const override { return true; }

 protected:
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  using FilterNode::FilterNode;
};

// d/d(source i): channels [offset, offset + C_i) of dY. Sources: dY and forward sources
// 0..i, whose channel counts give the offset.
class SliceGradientNode : public GradientNode {
 public:
  static constexpr const char* kKind = "concatenation_gradient";
  SliceGradientNode(std::vector<ImageNodePtr> sources, const FilterNode& forward);
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources.back(); }
  void encode(const EncodeArgs& args) const override;
  bool reads_values(size_t source) const override { return source == 0; }
  int slices_channels(const std::vector<ImageShape>& sources) const override;
  bool reads_channel_view(size_t source) const override { return source == 0; }
  bool channels_last(DeviceType device, const std::vector<ImageShape>&) const override {
    return reads_channels_last<SliceChannelsKernel>(device);
  }
};

}  // namespace nngraph
