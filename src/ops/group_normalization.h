#pragma once
// Group, instance and layer normalization: one node (statistics per image, over groups of
// channels or over the channels at each position), its gradient node and kernels.
#include "backends/kernel.h"
#include "backends/geometry.h"
#include "ops/gradient.h"

namespace nngraph {

// y = gamma[c]·(x − mean)·inv + beta[c], mean and inv = 1/sqrt(var + eps) per statistic of
// `span`; written into `stats` (mean, inv per statistic) where given (training). An empty y
// (a gradient pass needs the statistics alone) computes the statistics only.
struct GroupNormalizationKernel
    : KernelOf<void(Backend&, const math::NormSpan&, float epsilon, const Tensor& x, const Tensor& gamma,
                    const Tensor& beta, const Tensor& stats, const Tensor& y)> {
  static constexpr const char* name = "group_normalization";
};
// dx = inv·(gamma·dy − mean(gamma·dy) − x̂·mean(gamma·dy·x̂)) over each statistic's values
// (skipped where dx is empty); dgamma = Σ dy·x̂ and dbeta = Σ dy per channel (where given).
struct GroupNormalizationGradientKernel
    : KernelOf<void(Backend&, const math::NormSpan&, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                    const Tensor& stats, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta)> {
  static constexpr const char* name = "group_normalization_gradient";
};

class GroupNormalizationNode : public FilterNode {
 public:
  static constexpr const char* kKind = "group_normalization";
  // groups 0: one per channel (instance normalization); per_position: over the channels at
  // each position (layer normalization over C). `parameters` describes a
  // NormalizationDescriptor without statistics (gamma and beta).
  static std::shared_ptr<GroupNormalizationNode> create(ImageNodePtr source, std::shared_ptr<DataSource> parameters,
                                                        int groups, bool per_position, float epsilon = 1e-5f,
                                                        std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  Attributes attributes(const std::vector<ImageShape>&) const override {
    return {{"groups", int64_t(groups())}, {"per_position", int64_t(per_position_)}, {"epsilon", double(epsilon_)}};
  }
  void encode(const EncodeArgs& args) const override;
  std::vector<WeightSource> weight_sources() const override { return {{source_.get(), desc_}}; }
  size_t state_size(const std::vector<ImageShape>& sources) const override;
  math::NormSpan span(const ImageShape& in) const;
  // What its kernels read of an image of a step: over the channels at each position, a
  // channels-last image as its pixels' rows; else the image.
  Tensor view(const EncodeArgs& a, const Image& image) const;
  bool channels_last(DeviceType, const std::vector<ImageShape>&) const override { return per_position_; }
  int groups() const { return groups_ ? groups_ : desc_.feature_channels; }
  bool per_position() const { return per_position_; }
  float epsilon() const { return epsilon_; }

 protected:
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  using FilterNode::FilterNode;
  std::shared_ptr<DataSource> source_;
  NormalizationDescriptor desc_;
  int groups_ = 0;
  bool per_position_ = false;
  float epsilon_ = 1e-5f;
};

// Sources: dY, X and the forward node's state (mean and inverse deviation per statistic).
class GroupNormalizationGradientNode : public GradientNode {
 public:
  static constexpr const char* kKind = "group_normalization_gradient";
  GroupNormalizationGradientNode(const ImageNodePtr& dy, std::shared_ptr<GroupNormalizationNode> forward);
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[1]; }
  void encode(const EncodeArgs& args) const override;
  bool channels_last(DeviceType, const std::vector<ImageShape>&) const override { return forward_->per_position(); }
  const FilterNode* trains() const override { return forward_.get(); }

 private:
  std::shared_ptr<GroupNormalizationNode> forward_;
};

}  // namespace nngraph
