// Batch normalization: shape rule, gradient wiring and kernel dispatch.
#include "ops/normalization.h"

#include <cmath>

#include "nngraph/error.h"
#include "ops/conv.h"

namespace nngraph {
namespace {

Tensor batch_tensor(const EncodeArgs& a, int channels) {
  return a.batch_state ? Tensor::vector(a.batch_state->data(), kBatchNormStatistics * channels) : Tensor();
}

}  // namespace

std::shared_ptr<BatchNormalizationNode> BatchNormalizationNode::create(ImageNodePtr source,
                                                                       std::shared_ptr<DataSource> parameters,
                                                                       float epsilon, float momentum,
                                                                       std::string label) {
  std::shared_ptr<BatchNormalizationNode> node(new BatchNormalizationNode(std::move(source), std::move(label)));
  if (!parameters) fail("[", node->label().empty() ? kKind : node->label(), "] needs a data source");
  node->set_default_label(parameters->label().empty() ? kKind : parameters->label());
  const std::string& name = node->label();
  if (!(epsilon > 0.f) || !std::isfinite(epsilon)) fail("[", name, "] epsilon must be finite and > 0, got ", epsilon);
  if (!(momentum >= 0.f && momentum <= 1.f)) fail("[", name, "] momentum must be in [0, 1], got ", momentum);
  node->desc_ = descriptor_as<NormalizationDescriptor>(*parameters, name);
  node->desc_.validate(name);
  if (!node->desc_.statistics)
    fail("[", name, "] keeps running statistics: its NormalizationDescriptor needs statistics=True");
  node->source_ = std::move(parameters);
  node->epsilon_ = epsilon;
  node->momentum_ = momentum;
  return node;
}

ImageShape BatchNormalizationNode::infer(const std::vector<ImageShape>& s) const {
  if (s[0].c != desc_.feature_channels)
    fail("[", label(), "] source has ", s[0].c, " feature channels, its data source describes ",
         desc_.feature_channels);
  return s[0];
}

size_t BatchNormalizationNode::batch_state_size(const std::vector<ImageShape>& s) const {
  return kBatchNormStatistics * static_cast<size_t>(s[0].c);
}

void BatchNormalizationNode::encode(const EncodeArgs& a) const {
  const int c = desc_.feature_channels;
  const Tensor batch = a.training ? batch_tensor(a, c) : Tensor();
  if (a.training && !batch) fail("[", label(), "] a training step gave no batch state");
  dispatch<BatchNormalizationKernel>(a.backend, epsilon_, pixels(a, *a.sources[0]), Tensor::parameter(a.weights, 0),
                                     Tensor::parameter(a.weights, 1), Tensor::parameter(a.weights, 2),
                                     Tensor::parameter(a.weights, 3), batch, a.replay,
                                     a.addend ? pixels(a, *a.addend) : Tensor(), a.fused, pixels(a, a.result));
}

// A batch of one value per channel has no unbiased variance, so only the mean moves then.
void BatchNormalizationNode::commit(const EncodeArgs& a, std::vector<RunningStatistics>& out) const {
  const Image& x = *a.sources[0];
  const double m = static_cast<double>(x.batch()) * x.shape().h * x.shape().w;
  out.push_back({momentum_, m > 1 ? static_cast<float>(m / (m - 1)) : 0.f, batch_tensor(a, desc_.feature_channels),
                 Tensor::parameter(a.weights, 2), Tensor::parameter(a.weights, 3)});
}

bool BatchNormalizationNode::folds_into(const FilterNode& producer) const {
  const auto* conv = dynamic_cast<const ConvolutionNode*>(&producer);
  return conv && conv->descriptor().neuron.type == NeuronType::None;
}

void BatchNormalizationNode::fold(Backend& backend, const WeightsState& conv, const WeightsState& norm,
                                  const WeightsState& folded) const {
  if (folded.weight_count() != conv.weight_count() || folded.bias_count() != static_cast<size_t>(desc_.feature_channels))
    fail("[", label(), "] folded parameters of the wrong size");
  dispatch<BatchNormalizationFoldKernel>(backend, epsilon_, Tensor::parameter(&conv, 0), Tensor::parameter(&conv, 1),
                                         Tensor::parameter(&norm, 0), Tensor::parameter(&norm, 1),
                                         Tensor::parameter(&norm, 2), Tensor::parameter(&norm, 3),
                                         Tensor::parameter(&folded, 0), Tensor::parameter(&folded, 1));
}

std::vector<FilterNodePtr> BatchNormalizationNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<BatchNormalizationGradientNode>(
      dy, std::static_pointer_cast<BatchNormalizationNode>(shared_from_this()))};
}

BatchNormalizationGradientNode::BatchNormalizationGradientNode(const ImageNodePtr& dy,
                                                               std::shared_ptr<BatchNormalizationNode> forward)
    : GradientNode({dy, forward->sources()[0], forward->state_image()}, *forward, kKind),
      forward_(std::move(forward)) {}

void BatchNormalizationGradientNode::encode(const EncodeArgs& a) const {
  if (a.result.empty() && !Tensor::parameter(a.gradients, 0) && !Tensor::parameter(a.gradients, 1)) return;
  dispatch<BatchNormalizationGradientKernel>(a.backend, pixels(a, *a.sources[1]), pixels(a, *a.sources[0]),
                                             Tensor::parameter(a.weights, 0), Tensor::parameter(a.weights, 1),
                                             batch_tensor(a, forward_->feature_channels()), a.fused,
                                             pixels(a, a.result),
                                             Tensor::parameter(a.gradients, 0), Tensor::parameter(a.gradients, 1));
}

}  // namespace nngraph
