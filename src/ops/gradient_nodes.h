#pragma once
// Gradient nodes made by FilterNode::gradient_filters. Each lists as sources the incoming
// gradient first, then the forward tensors it reads, so the planner keeps those alive.
#include "nngraph/nodes.h"

namespace nngraph {

class GradientNode : public FilterNode {
 public:
  bool is_gradient() const override { return true; }

 protected:
  GradientNode(std::vector<ImageNodePtr> sources, const FilterNode& forward, const char* kind);
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;
};

// Convolution and fully connected: d/d(source) into the result (skipped when unused),
// d/d(weights) and d/d(biases) into the step's gradient state. Sources: dY, X[, Y when the
// descriptor has a fused neuron].
class ConvolutionGradientNode : public GradientNode {
 public:
  ConvolutionGradientNode(const ImageNodePtr& dy, std::shared_ptr<ConvolutionNode> forward);
  const char* kind() const override { return "convolution_gradient"; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[1]; }
  void encode(const EncodeArgs& args) const override;
  const FilterNode* trains() const override { return forward_.get(); }

 private:
  std::shared_ptr<ConvolutionNode> forward_;
  bool fully_connected_;
};

// Sources: dY, X.
class PoolingGradientNode : public GradientNode {
 public:
  PoolingGradientNode(const ImageNodePtr& dy, std::shared_ptr<PoolingNode> forward);
  const char* kind() const override { return "pooling_gradient"; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[1]; }
  void encode(const EncodeArgs& args) const override;
  bool accepts_fused_neuron_gradient() const override { return true; }

 private:
  std::shared_ptr<PoolingNode> forward_;
};

// Sources: dY and Y (X for absolute).
class NeuronGradientNode : public GradientNode {
 public:
  NeuronGradientNode(const ImageNodePtr& dy, std::shared_ptr<NeuronNode> forward);
  const char* kind() const override { return "neuron_gradient"; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[1]; }
  void encode(const EncodeArgs& args) const override;
  const NeuronDescriptor& neuron() const { return neuron_; }

 private:
  NeuronDescriptor neuron_;
};

// Sources: dY, Y.
class SoftMaxGradientNode : public GradientNode {
 public:
  SoftMaxGradientNode(const ImageNodePtr& dy, const ImageNodePtr& y, const SoftMaxNode& forward);
  const char* kind() const override { return "softmax_gradient"; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[1]; }
  void encode(const EncodeArgs& args) const override;

 private:
  bool log_;
};

// Sources: dY. Regenerates the forward mask from (seed, step).
class DropoutGradientNode : public GradientNode {
 public:
  DropoutGradientNode(const ImageNodePtr& dy, const DropoutNode& forward);
  const char* kind() const override { return "dropout_gradient"; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[0]; }
  void encode(const EncodeArgs& args) const override;

 private:
  float keep_;
  uint64_t seed_;
};

// d/d(source) of an addition is the incoming gradient itself. Sources: dY.
class PassGradientNode : public GradientNode {
 public:
  PassGradientNode(const ImageNodePtr& dy, const FilterNode& forward);
  const char* kind() const override { return "addition_gradient"; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[0]; }
  void encode(const EncodeArgs& args) const override;
  bool identity(bool) const override { return true; }
};

// d/d(source i) of a concatenation: channels [offset, offset + C_i) of dY. Sources: dY and
// forward sources 0..i, whose channel counts give the offset.
class SliceGradientNode : public GradientNode {
 public:
  SliceGradientNode(std::vector<ImageNodePtr> sources, const FilterNode& forward);
  const char* kind() const override { return "concatenation_gradient"; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources.back(); }
  void encode(const EncodeArgs& args) const override;
};

}  // namespace nngraph
