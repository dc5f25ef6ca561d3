#pragma once
// Concatenation along feature channels: node, gradient node and kernels.
#include "backends/kernel.h"
#include "ops/gradient.h"

namespace nngraph {

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
};

}  // namespace nngraph
