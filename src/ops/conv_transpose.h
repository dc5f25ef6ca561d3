#pragma once
// Transpose convolution (MPSCNNConvolutionTranspose): node and gradient node. It runs on the
// convolution kernels: its forward pass is the input gradient of the convolution C it
// transposes (from its result's shape to its source's), its input gradient is C itself.
#include "ops/conv.h"

namespace nngraph {

class ConvolutionTransposeNode : public FilterNode {
 public:
  static constexpr const char* kKind = "convolution_transpose";
  // `weights` describes a transposed ConvolutionDescriptor (input channels: the source's).
  // padding: valid, same (result = source × stride) or explicit; output_padding (each below
  // the stride) adds rows and columns after, or output_height/width (0: not given) pick it.
  static std::shared_ptr<ConvolutionTransposeNode> create(ImageNodePtr source, std::shared_ptr<DataSource> weights,
                                                          Padding padding, int output_padding_y = 0,
                                                          int output_padding_x = 0, int output_height = 0,
                                                          int output_width = 0, std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  Attributes attributes(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;
  std::vector<WeightSource> weight_sources() const override { return {{source_.get(), desc_}}; }
  const ConvolutionDescriptor& descriptor() const { return desc_; }
  bool accepts_fused_neuron() const override { return desc_.neuron.type == NeuronType::None; }
  // C's geometry for a source of shape `in`, padding resolved.
  ConvGeometry geometry(const ImageShape& in) const;
  // The gradient node's pass: dY, X[, Y] in; dX, dW and db out.
  void encode_gradient(const EncodeArgs& args) const;
  AccumulatorPrecision accumulator_precision() const { return accumulator_; }
  void set_accumulator_precision(AccumulatorPrecision p) { accumulator_ = p; }

 protected:
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  using FilterNode::FilterNode;
  // One axis: the result's size and C's padding before it.
  Axis axis(int in, int kernel, int stride, int dilation, int before, int after, int output_padding,
            int output_size) const;
  std::shared_ptr<DataSource> source_;
  ConvolutionDescriptor desc_;
  Padding padding_;
  int op_y_ = 0, op_x_ = 0, out_h_ = 0, out_w_ = 0;
  AccumulatorPrecision accumulator_ = AccumulatorPrecision::Float;
};

// Sources: dY, X[, Y when the descriptor has a neuron].
class ConvolutionTransposeGradientNode : public GradientNode {
 public:
  static constexpr const char* kKind = "convolution_transpose_gradient";
  ConvolutionTransposeGradientNode(const ImageNodePtr& dy, std::shared_ptr<ConvolutionTransposeNode> forward);
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[1]; }
  void encode(const EncodeArgs& args) const override { forward_->encode_gradient(args); }
  const FilterNode* trains() const override { return forward_.get(); }

 private:
  std::shared_ptr<ConvolutionTransposeNode> forward_;
};

}  // namespace nngraph
