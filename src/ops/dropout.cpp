// Dropout: gradient wiring and kernel dispatch.
#include "ops/dropout.h"

#include "nngraph/error.h"

namespace nngraph {

std::shared_ptr<DropoutNode> DropoutNode::create(ImageNodePtr source, float keep_probability, uint64_t seed,
                                                 std::string label) {
  std::shared_ptr<DropoutNode> node(new DropoutNode({std::move(source)}, std::move(label), kKind));
  node->set_default_label(kKind);
  if (!(keep_probability > 0.f && keep_probability <= 1.f))
    fail("[", node->label(), "] keep_probability must be in (0, 1], got ", keep_probability);
  node->keep_probability_ = keep_probability;
  node->seed_ = seed;
  return node;
}

// Runs only in training graphs; inference graphs alias dropout away.
void DropoutNode::encode(const EncodeArgs& a) const {
  dispatch<DropoutKernel>(a.backend, keep_probability_, seed_, a.step, *a.sources[0], a.result);
}

std::vector<FilterNodePtr> DropoutNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<DropoutGradientNode>(dy, *this)};
}

DropoutGradientNode::DropoutGradientNode(const ImageNodePtr& dy, const DropoutNode& forward)
    : GradientNode({dy}, forward, kKind), keep_(forward.keep_probability()), seed_(forward.seed()) {}

void DropoutGradientNode::encode(const EncodeArgs& a) const {
  dispatch<DropoutKernel>(a.backend, keep_, seed_, a.step, *a.sources[0], a.result);
}

}  // namespace nngraph
