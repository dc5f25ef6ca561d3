#pragma once
// Neuron (activation) layers: node, gradient node and kernels.
#include "backends/kernel.h"
#include "ops/gradient.h"

namespace nngraph {

struct NeuronKernel : KernelOf<void(Backend&, const NeuronDescriptor&, const Tensor& x, const Tensor& y)> {
  static constexpr const char* name = "neuron";
};
// dx = dy ⊙ neuron.derivative(v), v the forward output (or its input where the derivative
// cannot come from the output).
struct NeuronGradientKernel
    : KernelOf<void(Backend&, const NeuronDescriptor&, const Tensor& v, const Tensor& dy, const Tensor& dx)> {
  static constexpr const char* name = "neuron_gradient";
};

class NeuronNode : public FilterNode {
 public:
  static constexpr const char* kKind = "neuron";
  static std::shared_ptr<NeuronNode> create(ImageNodePtr source, NeuronDescriptor neuron, std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[0]; }
  Attributes attributes(const std::vector<ImageShape>&) const override { return {{"neuron", neuron_}}; }
  void encode(const EncodeArgs& args) const override;
  const NeuronDescriptor& neuron() const { return neuron_; }
  // Elementwise: any layout is the same to it.
  bool channels_last(DeviceType, const std::vector<ImageShape>&) const override { return true; }
  // A training graph folds one whose derivative needs its input only into a producer that
  // recomputes it (the planner checks).
  const NeuronDescriptor* fusable_neuron() const override { return &neuron_; }

 protected:
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  using FilterNode::FilterNode;
  NeuronDescriptor neuron_;
};

// Sources: dY and Y (X where the derivative needs the input).
class NeuronGradientNode : public GradientNode {
 public:
  static constexpr const char* kKind = "neuron_gradient";
  NeuronGradientNode(const ImageNodePtr& dy, std::shared_ptr<NeuronNode> forward);
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[1]; }
  void encode(const EncodeArgs& args) const override;
  const NeuronDescriptor& neuron() const { return neuron_; }
  const NeuronNode* forward() const { return forward_; }
  const NeuronDescriptor* fusable_neuron_gradient() const override { return &neuron_; }
  // Elementwise: any layout is the same to it.
  bool channels_last(DeviceType, const std::vector<ImageShape>&) const override { return true; }

 private:
  NeuronDescriptor neuron_;
  const NeuronNode* forward_;  // identifies the forward node to the planner; never read
};

}  // namespace nngraph
