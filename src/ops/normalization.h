#pragma once
// Batch normalization (MPSCNNBatchNormalization): node, gradient node and kernels.
#include "backends/kernel.h"
#include "ops/gradient.h"

namespace nngraph {

// The batch state a training step keeps per channel (C floats each, in this order): the
// batch mean, inverse deviation 1/sqrt(var + eps) and biased variance, then the gradient's
// two sums Σdy and Σdy·x̂ where the step keeps no gamma and beta gradients; then what a
// backend may keep for its passes (cuda: each channel's scale and shift, and the input
// gradient's two coefficients, so its elementwise passes load them instead of computing them).
constexpr size_t kBatchNormStatistics = 9;

// y = gamma·(x − mean)/sqrt(var + eps) + beta per channel (+ addend, of y's shape and layout
// where given), then neuron. With `batch` (training) mean and var are the batch's over N×H×W,
// written into it (`replay`: already there, y computed again as that pass computed it);
// without, the running mean and variance.
struct BatchNormalizationKernel
    : KernelOf<void(Backend&, float epsilon, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                    const Tensor& mean, const Tensor& variance, const Tensor& batch, bool replay,
                    const Tensor& addend, const NeuronDescriptor&, const Tensor& y)> {
  static constexpr const char* name = "batch_normalization";
};
// From the batch statistics: dbeta = Σdy, dgamma = Σdy·x̂ (into batch's sums where empty) and
// dx = gamma·inv/M·(M·dy − dbeta − x̂·dgamma), M = N·H·W (skipped where dx is empty). With a
// neuron (the one the forward pass applied after it), dy first becomes dy ⊙ f'(neuron(y)), y
// the normalized x recomputed as the forward pass computed it.
struct BatchNormalizationGradientKernel
    : KernelOf<void(Backend&, const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& beta,
                    const Tensor& batch, const NeuronDescriptor& neuron, const Tensor& dx, const Tensor& dgamma,
                    const Tensor& dbeta)> {
  static constexpr const char* name = "batch_normalization_gradient";
};
// One node's running statistics as a step moves them: running ← (1 − momentum)·running +
// momentum·batch, the variance unbiased (× unbias = M/(M − 1); 0: the variance stays).
struct RunningStatistics {
  float momentum, unbias;
  Tensor batch, mean, variance;
};
// Every node's of a step at once (on cuda one launch for up to 90 nodes).
struct BatchNormalizationStatisticsKernel : KernelOf<void(Backend&, const std::vector<RunningStatistics>&)> {
  static constexpr const char* name = "batch_normalization_statistics";
};

// Folds the running statistics into the convolution before (inference): per output channel o,
// s = gamma/sqrt(var + eps), folded_weights[o] = weights[o]·s (each channel's block of
// weights.count()/C values) and folded_bias[o] = (bias[o] − mean[o])·s + beta[o] (bias may be
// empty: 0).
struct BatchNormalizationFoldKernel
    : KernelOf<void(Backend&, float epsilon, const Tensor& weights, const Tensor& bias, const Tensor& gamma,
                    const Tensor& beta, const Tensor& mean, const Tensor& variance, const Tensor& folded_weights,
                    const Tensor& folded_bias)> {
  static constexpr const char* name = "batch_normalization_fold";
};

// Training graphs normalize with the batch's statistics and, once the step's checks passed,
// move the data source's running mean and variance toward them (PyTorch's momentum
// convention); inference graphs normalize with the running statistics.
class BatchNormalizationNode : public FilterNode {
 public:
  static constexpr const char* kKind = "batch_normalization";
  static std::shared_ptr<BatchNormalizationNode> create(ImageNodePtr source, std::shared_ptr<DataSource> parameters,
                                                        float epsilon = 1e-5f, float momentum = 0.1f,
                                                        std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  Attributes attributes(const std::vector<ImageShape>&) const override {
    return {{"epsilon", double(epsilon_)}, {"momentum", double(momentum_)}};
  }
  void encode(const EncodeArgs& args) const override;
  std::vector<WeightSource> weight_sources() const override { return {{source_.get(), desc_}}; }
  size_t batch_state_size(const std::vector<ImageShape>& sources) const override;
  void commit(const EncodeArgs& args, std::vector<RunningStatistics>& out) const override;
  bool accepts_fused_neuron() const override { return true; }
  // A residual addition after it (its gradient reads x, not the sum, so nothing changes there).
  bool accepts_addend(DeviceType) const override { return true; }
  bool writes_channel_view() const override { return true; }
  bool replays_result() const override { return true; }
  // Its gradient recomputes x·scale + shift from x, so any neuron folds in while training.
  bool recomputes_neuron_input() const override { return true; }
  // Reads channels-last images as rows of pixels (Tensor::pixels).
  bool channels_last(DeviceType, const std::vector<ImageShape>&) const override { return true; }
  // Into a convolution or fully connected layer without a neuron of its own: its running
  // statistics, gamma and beta scale and shift that layer's weights and biases.
  bool folds_into(const FilterNode& producer) const override;
  void fold(Backend& backend, const WeightsState& conv, const WeightsState& norm,
            const WeightsState& folded) const override;
  float epsilon() const { return epsilon_; }
  float momentum() const { return momentum_; }
  int feature_channels() const { return desc_.feature_channels; }

 protected:
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  BatchNormalizationNode(ImageNodePtr source, std::string label)
      : FilterNode({std::move(source)}, std::move(label), kKind) {}
  std::shared_ptr<DataSource> source_;
  NormalizationDescriptor desc_;
  float epsilon_ = 1e-5f, momentum_ = 0.1f;
};

// Sources: dY, X and the forward node's state image, which holds no values (the statistics are
// its batch state) but keeps the forward pass in the graph and before this node. Writes dX and
// the gamma and beta gradients.
class BatchNormalizationGradientNode : public GradientNode {
 public:
  static constexpr const char* kKind = "batch_normalization_gradient";
  BatchNormalizationGradientNode(const ImageNodePtr& dy, std::shared_ptr<BatchNormalizationNode> forward);
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[1]; }
  void encode(const EncodeArgs& args) const override;
  const FilterNode* trains() const override { return forward_.get(); }
  // Takes a relu's (any neuron's) gradient between it and the next layer's into its own passes.
  const FilterNode* takes_neuron_gradient_of() const override { return forward_.get(); }
  bool channels_last(DeviceType, const std::vector<ImageShape>&) const override { return true; }
  bool reads_channel_view(size_t source) const override { return source == 0; }
  // dX straight into its channels of a concatenation (sibling convolutions' stacked dY).
  bool writes_channel_view() const override { return true; }

 private:
  std::shared_ptr<BatchNormalizationNode> forward_;
};

}  // namespace nngraph
