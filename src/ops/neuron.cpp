// Neuron layers: gradient wiring and kernel dispatch.
#include "ops/neuron.h"

namespace nngraph {

std::shared_ptr<NeuronNode> NeuronNode::create(ImageNodePtr source, NeuronDescriptor neuron, std::string label) {
  std::shared_ptr<NeuronNode> node(new NeuronNode({std::move(source)}, std::move(label), kKind));
  node->set_default_label(neuron.name());
  node->neuron_ = neuron;
  return node;
}

void NeuronNode::encode(const EncodeArgs& a) const { dispatch<NeuronKernel>(a.backend, neuron_, *a.sources[0], a.result); }

std::vector<FilterNodePtr> NeuronNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<NeuronGradientNode>(dy, std::static_pointer_cast<NeuronNode>(shared_from_this()))};
}

NeuronGradientNode::NeuronGradientNode(const ImageNodePtr& dy, std::shared_ptr<NeuronNode> forward)
    : GradientNode({dy, forward->neuron().derivative_from_output() ? forward->result_image() : forward->sources()[0]},
                   *forward, kKind),
      neuron_(forward->neuron()), forward_(forward.get()) {}

void NeuronGradientNode::encode(const EncodeArgs& a) const {
  dispatch<NeuronGradientKernel>(a.backend, neuron_, *a.sources[1], *a.sources[0], a.result);
}

}  // namespace nngraph
