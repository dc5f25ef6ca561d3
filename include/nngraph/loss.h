#pragma once
// Loss nodes: labels enter as states (MPSCNNLossNode, MPSCNNLossLabels). The result image of
// a loss node is d(loss)/d(source), which starts the gradient pass.
#include <string>

#include "nngraph/nodes.h"

namespace nngraph {

// Labels (same shape as the predictions) and per-image weights (N×1×1×1) for one encode.
struct LossLabels {
  Image labels;
  Image weights;  // one per image; empty: every image weighs 1
};

class LossNode : public FilterNode {
 public:
  static std::shared_ptr<LossNode> create(ImageNodePtr source, LossDescriptor descriptor,
                                          std::string label = "");
  const char* kind() const override { return "loss"; }
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
