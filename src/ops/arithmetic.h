#pragma once
// Arithmetic of two images (MPSNNAdditionNode and its siblings), with broadcasting: each of
// an operand's axes N, C, H, W equals the result's or is 1, as in (1,C,1,1), (N,1,1,1) or
// (1,1,1,1) beside N×C×H×W.
#include "backends/kernel.h"
#include "ops/gradient.h"

namespace nngraph {

// y = neuron(a op b), each operand read with stride 0 along its axes of extent 1; where
// `through` (of y's shape) is given, y = (a op b)·f'(through) instead: a neuron's gradient,
// through its output, folded into the sum of the gradients that output receives.
struct ArithmeticKernel : KernelOf<void(Backend&, ArithmeticOp, const Tensor& a, const Tensor& b,
                                        const NeuronDescriptor& neuron, const Tensor& through, const Tensor& y)> {
  static constexpr const char* name = "arithmetic";
};
// d(loss)/d(operand) for operand 0 (a) or 1 (b): dy ⊙ ∂(a op b)/∂operand, summed over the
// axes the operand broadcasts along; dx has the operand's shape.
struct ArithmeticGradientKernel : KernelOf<void(Backend&, ArithmeticOp, int operand, const Tensor& a,
                                                const Tensor& b, const Tensor& dy, const Tensor& dx)> {
  static constexpr const char* name = "arithmetic_gradient";
};

class ArithmeticNode : public FilterNode {
 public:
  static std::shared_ptr<ArithmeticNode> create(ArithmeticOp op, ImageNodePtr a, ImageNodePtr b,
                                                std::string label = "");
  ArithmeticOp op() const { return op_; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;
  bool broadcasts_batch(size_t) const override { return true; }
  // Elementwise where no operand broadcasts within an image.
  bool channels_last(DeviceType, const std::vector<ImageShape>& sources) const override;
  // A neuron after it (a residual block's relu) runs in the same pass; a sum (of gradients)
  // also takes a neuron's gradient, reading that neuron's output as a third source.
  bool accepts_fused_neuron() const override { return true; }
  bool sums_sources() const override { return op_ == ArithmeticOp::Add; }

 protected:
  ArithmeticNode(ArithmeticOp op, ImageNodePtr a, ImageNodePtr b, std::string label);
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  ArithmeticOp op_;
};

// One class per op, so each is its own Python class.
template <ArithmeticOp Op>
class ArithmeticNodeOf final : public ArithmeticNode {
 public:
  static std::shared_ptr<ArithmeticNodeOf> create(ImageNodePtr a, ImageNodePtr b, std::string label = "") {
    return std::shared_ptr<ArithmeticNodeOf>(new ArithmeticNodeOf(std::move(a), std::move(b), std::move(label)));
  }

 private:
  ArithmeticNodeOf(ImageNodePtr a, ImageNodePtr b, std::string label)
      : ArithmeticNode(Op, std::move(a), std::move(b), std::move(label)) {}
};
using AdditionNode = ArithmeticNodeOf<ArithmeticOp::Add>;
using SubtractionNode = ArithmeticNodeOf<ArithmeticOp::Subtract>;
using MultiplicationNode = ArithmeticNodeOf<ArithmeticOp::Multiply>;
using DivisionNode = ArithmeticNodeOf<ArithmeticOp::Divide>;

// d/d(operand i) of any arithmetic node. Sources: dY, A, B, or dY and operand i for sums and
// differences (its shape alone). An addend with the result's shape passes dY on unchanged:
// the plan aliases it and no kernel runs.
class ArithmeticGradientNode : public GradientNode {
 public:
  ArithmeticGradientNode(const ImageNodePtr& dy, const ArithmeticNode& forward, int operand);
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;
  bool passes_through(const std::vector<ImageShape>& sources) const override;
  bool channels_last(DeviceType, const std::vector<ImageShape>& sources) const override;
  bool reads_values(size_t source) const override { return source == 0 || sources().size() == 3; }
  // The other operand may broadcast; the one whose gradient it computes may not (its
  // gradient would need a sum over the batch).
  bool broadcasts_batch(size_t source) const override {
    return sources().size() == 3 && source == static_cast<size_t>(2 - operand_);
  }

 private:
  ArithmeticOp op_;
  int operand_;
};

// y = the sum of the sources, each of y's shape; where `through` (of y's shape) is given,
// times f'(through) for the neuron: as ArithmeticKernel's sum.
struct SumKernel : KernelOf<void(Backend&, const std::vector<Tensor>& sources, const NeuronDescriptor& neuron,
                                 const Tensor& through, const Tensor& y)> {
  static constexpr const char* name = "sum";
};

// The sum of three or more images of one shape in one pass: the gradient a result read by as
// many nodes receives (build_gradient_pass), where additions in a row read and wrote a whole
// image for each addend. Elementwise, so in either layout. As an addition's, a neuron's
// gradient folds into it, its output read as one more source.
class SumNode : public FilterNode {
 public:
  static constexpr const char* kKind = "sum";
  static std::shared_ptr<SumNode> create(std::vector<ImageNodePtr> sources, std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;
  bool channels_last(DeviceType, const std::vector<ImageShape>&) const override { return true; }
  bool sums_sources() const override { return true; }

 private:
  using FilterNode::FilterNode;
};

// The shape of the result of an operand's broadcast, or an InvalidInput naming `node`.
ImageShape broadcast_shape(const ImageShape& a, const ImageShape& b, const std::string& node);

}  // namespace nngraph
