#pragma once
// Upsampling by integer factors (nearest, bilinear): node, gradient node and kernels.
#include "backends/kernel.h"
#include "ops/gradient.h"

namespace nngraph {

// y[n, c, i, j] = Σ weights of x along each axis (math::upsample_source).
struct UpsamplingKernel
    : KernelOf<void(Backend&, UpsamplingMode, bool align_corners, const Tensor& x, const Tensor& y)> {
  static constexpr const char* name = "upsampling";
};
// dx[i, j] = Σ over the outputs reading (i, j) of their weight · dy.
struct UpsamplingGradientKernel
    : KernelOf<void(Backend&, UpsamplingMode, bool align_corners, const Tensor& dy, const Tensor& dx)> {
  static constexpr const char* name = "upsampling_gradient";
};

class UpsamplingNode : public FilterNode {
 public:
  static constexpr const char* kKind = "upsampling";
  // Throws InvalidInput, naming the node, on a scale below 1 or align_corners with nearest.
  static std::shared_ptr<UpsamplingNode> create(ImageNodePtr source, UpsamplingMode mode, int scale_y, int scale_x,
                                                bool align_corners = false, std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  Attributes attributes(const std::vector<ImageShape>&) const override {
    return {{"mode", std::string(mode_ == UpsamplingMode::Nearest ? "nearest" : "bilinear")},
            {"scale", std::vector<int64_t>{sy_, sx_}},
            {"align_corners", int64_t(align_corners_)}};
  }
  void encode(const EncodeArgs& args) const override;
  UpsamplingMode mode() const { return mode_; }
  bool align_corners() const { return align_corners_; }
  int scale_y() const { return sy_; }
  int scale_x() const { return sx_; }

 protected:
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  using FilterNode::FilterNode;
  UpsamplingMode mode_ = UpsamplingMode::Nearest;
  int sy_ = 2, sx_ = 2;
  bool align_corners_ = false;
};

// Sources: dY alone (the source's shape is dY's divided by the scales).
class UpsamplingGradientNode : public GradientNode {
 public:
  static constexpr const char* kKind = "upsampling_gradient";
  UpsamplingGradientNode(const ImageNodePtr& dy, std::shared_ptr<UpsamplingNode> forward);
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;

 private:
  std::shared_ptr<UpsamplingNode> forward_;
};

}  // namespace nngraph
