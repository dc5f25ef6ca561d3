#pragma once
// Padding and cropping: one node (a crop is a padding by negative amounts), its gradient node
// and kernels.
#include <optional>

#include "backends/kernel.h"
#include "ops/gradient.h"

namespace nngraph {

// y[n, c, i, j] = x[n, c − front, src(i − top), src(j − left)], the constant where there is
// none (math::pad_source).
struct PaddingKernel
    : KernelOf<void(Backend&, PadMode, const PadGeometry&, float value, const Tensor& x, const Tensor& y)> {
  static constexpr const char* name = "padding";
};
// dx[i] = Σ dy over the outputs whose source is i (math::pad_preimage).
struct PaddingGradientKernel
    : KernelOf<void(Backend&, PadMode, const PadGeometry&, const Tensor& dy, const Tensor& dx)> {
  static constexpr const char* name = "padding_gradient";
};

// A window of the source: rows [y, y + height), columns [x, x + width), channels
// [channel, channel + channels); a size of 0 runs to the source's edge.
struct CropWindow {
  int y = 0, x = 0, height = 0, width = 0, channel = 0, channels = 0;
};

class PaddingNode : public FilterNode {
 public:
  static constexpr const char* kKind = "padding";
  // Throws InvalidInput, naming the node, on negative amounts outside constant mode.
  static std::shared_ptr<PaddingNode> create(ImageNodePtr source, PadMode mode, PadGeometry pads, float value = 0.f,
                                             std::string label = "");
  // The window of the source (MPSNNSlice; a padding by negative amounts).
  static std::shared_ptr<PaddingNode> crop(ImageNodePtr source, CropWindow window, std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  Attributes attributes(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;
  PadMode mode() const { return mode_; }
  bool is_crop() const { return window_.has_value(); }
  float value() const { return value_; }
  // The amounts for a source of this shape (a crop's window resolved).
  PadGeometry geometry(const ImageShape& in) const;
  // Channels-last graphs: a constant padding or crop of the channels alone (the qkv split of an
  // imported transformer), or of the rows and columns alone, reads NHWC images.
  bool channels_last(DeviceType device, const std::vector<ImageShape>& sources) const override;

 protected:
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  using FilterNode::FilterNode;
  PadMode mode_ = PadMode::Constant;
  PadGeometry pads_;
  std::optional<CropWindow> window_;
  float value_ = 0.f;
};

// Sources: dY, and X for a crop (for its shape only: a padding's follows from dY's).
class PaddingGradientNode : public GradientNode {
 public:
  static constexpr const char* kKind = "padding_gradient";
  PaddingGradientNode(const ImageNodePtr& dy, std::shared_ptr<PaddingNode> forward);
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;
  bool channels_last(DeviceType device, const std::vector<ImageShape>& sources) const override;

 private:
  std::shared_ptr<PaddingNode> forward_;
};

}  // namespace nngraph
