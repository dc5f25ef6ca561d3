#pragma once
// Convolution and fully connected layers: nodes, gradient node and kernels.
#include "backends/kernel.h"
#include "ops/gradient.h"

namespace nngraph {

struct ConvGeometry {
  int kh, kw, sy, sx, dy, dx, groups, pad_top, pad_left;
  bool tf32 = false;  // cuda: tensor cores may round float32 inputs to tf32
  bool half = false;  // cuda: float16 operands accumulate in float16 (accumulator_precision "half")
  // 1×k windows that tile each row without overlap (stride k, no padding): a product over
  // the windows reads the input in place, with no im2col.
  bool tiles_rows(const ImageShape& in, const ImageShape& out) const {
    return kh == 1 && sy == 1 && kw == sx && dx == 1 && pad_top == 0 && pad_left == 0 && out.h == in.h &&
           out.w * kw <= in.w;
  }
};

// Convolution of NCHW images (or, where the backend declares it, NHWC: x's layout is the
// kernel's), OIHW weights; bias (may be empty) then neuron.
struct ConvolutionKernel : KernelOf<void(Backend&, const ConvGeometry&, const Tensor& x, const Tensor& weights,
                                         const Tensor& bias, const NeuronDescriptor&, const Tensor& y)> {
  static constexpr const char* name = "convolution";
};
// y = neuron(x ⊛ w + bias + addend), addend of y's shape and layout: the residual addition
// after a convolution in its pass (where the backend has it; elsewhere the addition keeps its step).
struct ConvolutionAddKernel
    : KernelOf<void(Backend&, const ConvGeometry&, const Tensor& x, const Tensor& weights, const Tensor& bias,
                    const Tensor& addend, const NeuronDescriptor&, const Tensor& y)> {
  static constexpr const char* name = "convolution_add";
};
// Inference: a copy of the filter that the backend's convolutions over images of these shapes
// read beside it, made once per change of its values (FilterNode::prepared_filter_floats): the
// floats it takes, written to `prepared` where that is given; 0 where no copy pays.
struct PrepareFilterKernel : KernelOf<size_t(Backend&, const ConvGeometry&, const ImageShape& in,
                                             const ImageShape& out, const Tensor& weights, float* prepared)> {
  static constexpr const char* name = "prepare_filter";
};
// As ConvolutionAddKernel (addend may be empty), with the filter's prepared copy beside it.
struct PreparedConvolutionKernel
    : KernelOf<void(Backend&, const ConvGeometry&, const Tensor& x, const Tensor& weights, const float* prepared,
                    const Tensor& bias, const Tensor& addend, const NeuronDescriptor&, const Tensor& y)> {
  static constexpr const char* name = "prepared_convolution";
};
// dz = dy ⊙ neuron'(y) first when y is given; dx (may be empty: not needed), dw and db (empty:
// no bias) are overwritten.
struct ConvolutionGradientKernel
    : KernelOf<void(Backend&, const ConvGeometry&, const Tensor& x, const Tensor& weights, const Tensor& dy,
                    const Tensor& y, const NeuronDescriptor&, const Tensor& dx, const Tensor& dw, const Tensor& db)> {
  static constexpr const char* name = "convolution_gradient";
};
// db[o] = Σ over N, H, W of dy ⊙ neuron'(x ∗ W + b) for a neuron whose derivative comes from
// its input, which is computed again as dy is read, not stored (few taps:
// ConvolutionNode::recomputes_neuron_input). False, with nothing written, where the backend's
// kernel does not take the case; a backend may lack it.
struct ConvolutionBiasGradientKernel
    : KernelOf<bool(Backend&, const ConvGeometry&, const Tensor& x, const Tensor& weights, const Tensor& bias,
                    const Tensor& dy, const NeuronDescriptor&, const Tensor& db)> {
  static constexpr const char* name = "convolution_bias_gradient";
};
// y = neuron(y + b[channel]) in place (b may be empty).
struct BiasNeuronKernel : KernelOf<void(Backend&, const Tensor& bias, const NeuronDescriptor&, const Tensor& y)> {
  static constexpr const char* name = "bias_neuron";
};
// dz = dy ⊙ neuron'(y) where dz is given (y then too), and db[c] = Σ over N, H, W of dz (dy
// without dz) where db is given.
struct BiasNeuronGradientKernel : KernelOf<void(Backend&, const Tensor& dy, const Tensor& y, const NeuronDescriptor&,
                                                const Tensor& dz, const Tensor& db)> {
  static constexpr const char* name = "bias_neuron_gradient";
};
// y[n, o] = Σ_k x[n, k]·W[o, k] + b[o], then neuron; k runs over C·H·W of the source.
struct FullyConnectedKernel : KernelOf<void(Backend&, const Tensor& x, const Tensor& weights, const Tensor& bias,
                                             const NeuronDescriptor&, const Tensor& y, bool tf32, bool half)> {
  static constexpr const char* name = "fully_connected";
};
struct FullyConnectedGradientKernel
    : KernelOf<void(Backend&, const Tensor& x, const Tensor& weights, const Tensor& dy, const Tensor& y,
                    const NeuronDescriptor&, const Tensor& dx, const Tensor& dw, const Tensor& db, bool tf32,
                    bool half)> {
  static constexpr const char* name = "fully_connected_gradient";
};

// MPS's accumulatorPrecisionOption: Half lets a float16 graph's products accumulate in float16
// on cuda (faster, less precise, as the seed's FP16 accumulation); float32 and bfloat16 graphs
// and the cpu accumulate in float32 whatever is asked.
enum class AccumulatorPrecision { Float, Half };
// "float" or "half"; an error names `label`.
AccumulatorPrecision accumulator_named(const std::string& name, const std::string& label);
const char* accumulator_name(AccumulatorPrecision p);

class ConvolutionNode : public FilterNode {
 public:
  static constexpr const char* kKind = "convolution";
  static std::shared_ptr<ConvolutionNode> create(ImageNodePtr source, std::shared_ptr<DataSource> weights,
                                                 Padding padding, std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  Attributes attributes(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;
  bool channels_last(DeviceType device, const std::vector<ImageShape>& sources) const override;
  size_t prepared_filter_floats(Backend& backend, const ImageShape& in) const override;
  void prepare_filter(Backend& backend, const WeightsState& weights, const ImageShape& in,
                      float* prepared) const override;
  std::vector<WeightSource> weight_sources() const override { return {{source_.get(), desc_}}; }
  const ConvolutionDescriptor& descriptor() const { return desc_; }
  // Its epilogue applies a following neuron, unless its descriptor has one already; so a
  // residual addition (+ neuron) after it, which its gradient does not need apart.
  bool accepts_fused_neuron() const override { return desc_.neuron.type == NeuronType::None; }
  // With few taps per output (the speed run's 2×2 whitening over 3 channels: 12) the gradient
  // computes the result again from x, which it reads anyway and which is smaller, rather than
  // keep it: a GELU after it then folds into its epilogue in training too.
  static constexpr int kRecomputedTaps = 16;
  bool recomputes_neuron_input() const override {
    return accepts_fused_neuron() && desc_.groups == 1 &&
           desc_.input_feature_channels * desc_.kernel_height * desc_.kernel_width <= kRecomputedTaps;
  }
  bool accepts_addend(DeviceType device) const override {
    return desc_.neuron.type == NeuronType::None && has_kernel<ConvolutionAddKernel>(device);
  }
  const Padding& padding() const { return padding_; }
  // Kernel geometry for a source of shape `in` (padding resolved).
  ConvGeometry geometry(const ImageShape& in) const;
  // A plain convolution (not fully connected) with a 1×1 window, stride 1, no padding, one
  // group and no neuron of its own, whose gradient recomputes no neuron's input: its input
  // gradient is dY times its weights alone, so it may be stacked with its siblings'
  // (StackedGradientNode).
  bool stacks_gradients() const;
  // The gradient node's pass: x, dy and (with a neuron's gradient to apply) y in; dx, dw and db out.
  virtual void encode_gradient(const EncodeArgs& args) const;
  AccumulatorPrecision accumulator_precision() const { return accumulator_; }
  void set_accumulator_precision(AccumulatorPrecision p) { accumulator_ = p; }

 protected:
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;
  const NeuronDescriptor& gradient_neuron(const EncodeArgs& a) const;
  ConvolutionNode(ImageNodePtr source, std::shared_ptr<DataSource> weights, Padding padding, std::string label,
                  const char* kind);
  std::shared_ptr<DataSource> source_;
  ConvolutionDescriptor desc_;
  Padding padding_;
  AccumulatorPrecision accumulator_ = AccumulatorPrecision::Float;
};

// A convolution whose kernel covers the whole source: the descriptor's kernel equals the
// source's H×W with input channels C, or is 1×1 with input channels C·H·W (flattened).
class FullyConnectedNode : public ConvolutionNode {
 public:
  static constexpr const char* kKind = "fully_connected";
  static std::shared_ptr<FullyConnectedNode> create(ImageNodePtr source, std::shared_ptr<DataSource> weights,
                                                    std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;
  void encode_gradient(const EncodeArgs& args) const override;
  // Its weights flatten a source's C·H·W in NCHW order.
  bool channels_last(DeviceType, const std::vector<ImageShape>&) const override { return false; }
  bool accepts_addend(DeviceType) const override { return false; }
  bool recomputes_neuron_input() const override { return false; }
  size_t prepared_filter_floats(Backend&, const ImageShape&) const override { return 0; }  // a product

 private:
  using ConvolutionNode::ConvolutionNode;
};

// d/d(source) into the result (skipped when unused), d/d(weights) and d/d(biases) into the
// step's gradient state. Sources: dY, X[, Y when the descriptor has a fused neuron, or the
// planner passes a following neuron's gradient to this step (EncodeArgs::fused)]. Passed a
// neuron without Y, it computes the neuron's input again (takes_neuron_gradient_of).
class ConvolutionGradientNode : public GradientNode {
 public:
  static constexpr const char* kKind = "convolution_gradient";
  ConvolutionGradientNode(const ImageNodePtr& dy, std::shared_ptr<ConvolutionNode> forward);
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[1]; }
  void encode(const EncodeArgs& args) const override {
    if (!stacked_) forward_->encode_gradient(args);
  }
  const FilterNode* trains() const override { return forward_.get(); }
  bool channels_last(DeviceType device, const std::vector<ImageShape>& sources) const override {
    return forward_->channels_last(device, {sources[1]}) && reads_channels_last<ConvolutionGradientKernel>(device);
  }
  const FilterNode* takes_neuron_gradient_of() const override {
    return !stacked_ && forward_->recomputes_neuron_input() ? forward_.get() : nullptr;
  }
  // Where the descriptor has no neuron of its own (which would take that place).
  bool takes_neuron_gradient_of_result() const override {
    return !stacked_ && forward_->descriptor().neuron.type == NeuronType::None;
  }
  bool reads_values(size_t) const override { return !stacked_; }
  // A StackedGradientNode computes this convolution's gradients; this node only trains its
  // weights with them (its step runs no kernel).
  void leave_to_stack() { stacked_ = true; }

 private:
  std::shared_ptr<ConvolutionNode> forward_;
  bool stacked_ = false;
};

// The gradients of sibling pointwise convolutions reading one image X, each as one product over
// their weights and dY stacked: d/d(X) = Σ_i dY_i · W_i (a sum of their own input gradients
// would write X's gradient once per sibling and read each copy back; an Inception block has
// four) and every sibling's dW_i = dY_iᵀ · X (reading X once, not once per sibling), written
// into their gradients (EncodeArgs::read_gradients). Their own gradient nodes then only train
// them (ConvolutionGradientNode::leave_to_stack). Sources: the siblings' dY concatenated along
// channels in their order, and X.
class StackedGradientNode : public GradientNode {
 public:
  static constexpr const char* kKind = "stacked_gradient";
  StackedGradientNode(const ImageNodePtr& dy, const ImageNodePtr& x,
                      std::vector<std::shared_ptr<ConvolutionNode>> convolutions);
  // X's shape: the siblings read X, and dY is their results joined (build_gradient_pass makes both).
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[1]; }
  void encode(const EncodeArgs& args) const override;
  bool channels_last(DeviceType device, const std::vector<ImageShape>& sources) const override {
    return convolutions_[0]->channels_last(device, {sources[1]}) &&
           reads_channels_last<ConvolutionGradientKernel>(device);
  }
  std::vector<const FilterNode*> reads_weights_of() const override;

 private:
  std::vector<std::shared_ptr<ConvolutionNode>> convolutions_;
};

}  // namespace nngraph
