#pragma once
// The base of gradient nodes, which FilterNode::gradient_filters makes. Each lists as sources
// the incoming gradient first, then the forward tensors it reads, so the planner keeps those
// alive.
#include "nngraph/nodes.h"

namespace nngraph {

class GradientNode : public FilterNode {
 public:
  bool is_gradient() const override { return true; }

 protected:
  GradientNode(std::vector<ImageNodePtr> sources, const FilterNode& forward, const char* kind);
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;
};

}  // namespace nngraph
