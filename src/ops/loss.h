#pragma once
// Loss nodes: labels enter as states (MPSCNNLossNode, MPSCNNLossLabels). The result image of
// a loss node is d(loss)/d(source), which starts the gradient pass.
#include <string>

#include "backends/kernel.h"
#include "nngraph/loss.h"
#include "nngraph/nodes.h"

namespace nngraph {

// Per-image losses (summed over the image, times its weight and the descriptor's) and
// d(loss)/d(x) scaled by `scale` (the reduction's 1/divisor) and by *loss_scale (a float16
// graph's loss scaling, in the backend's memory; null: 1).
struct LossKernel : KernelOf<void(Backend&, const LossDescriptor&, double scale, const float* loss_scale, const Tensor& x,
                                  const Tensor& labels, const Tensor& weights, const Tensor& gradient,
                                  const Tensor& losses)> {
  static constexpr const char* name = "loss";
};

class LossNode : public FilterNode {
 public:
  static std::shared_ptr<LossNode> create(ImageNodePtr source, LossDescriptor descriptor,
                                          std::string label = "");
  static constexpr const char* kKind = "loss";
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;
  bool is_gradient() const override { return true; }
  const LossDescriptor& descriptor() const { return descriptor_; }
  // The state inputs a graph binds to each encode's LossLabels.
  const ImageNodePtr& labels() const { return sources()[1]; }
  const ImageNodePtr& label_weights() const { return sources()[2]; }
  // The divisor `mean` applies for a batch of n images of this shape.
  double reduction_divisor(int n, const ImageShape& shape) const;

 protected:
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  using FilterNode::FilterNode;
  LossDescriptor descriptor_;
};

}  // namespace nngraph
