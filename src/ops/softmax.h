#pragma once
// Softmax and log-softmax across feature channels: node, gradient node and kernels.
#include "backends/kernel.h"
#include "ops/gradient.h"

namespace nngraph {

// Across feature channels at each pixel.
struct SoftMaxKernel : KernelOf<void(Backend&, bool log, const Tensor& x, const Tensor& y)> {
  static constexpr const char* name = "softmax";
};
struct SoftMaxGradientKernel : KernelOf<void(Backend&, bool log, const Tensor& y, const Tensor& dy, const Tensor& dx)> {
  static constexpr const char* name = "softmax_gradient";
};

// Softmax (or log-softmax) across feature channels, at every pixel of every image; with
// groups, across each group of C / groups channels apart (attention's heads).
class SoftMaxNode : public FilterNode {
 public:
  static constexpr const char* kSoftMax = "softmax";
  static constexpr const char* kLogSoftMax = "log_softmax";
  static std::shared_ptr<SoftMaxNode> create(ImageNodePtr source, bool log, int groups = 1, std::string label = "");
  bool log() const { return log_; }
  int groups() const { return groups_; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  Attributes attributes(const std::vector<ImageShape>&) const override { return {{"groups", int64_t(groups_)}}; }
  void encode(const EncodeArgs& args) const override;
  // Reads channels-last images as rows of pixels (Tensor::pixels).
  bool channels_last(DeviceType, const std::vector<ImageShape>&) const override { return true; }

 protected:
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  using FilterNode::FilterNode;
  bool log_ = false;
  int groups_ = 1;
};

// Sources: dY, Y.
class SoftMaxGradientNode : public GradientNode {
 public:
  SoftMaxGradientNode(const ImageNodePtr& dy, const ImageNodePtr& y, const SoftMaxNode& forward);
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[1]; }
  void encode(const EncodeArgs& args) const override;
  // Reads channels-last images as rows of pixels (Tensor::pixels).
  bool channels_last(DeviceType, const std::vector<ImageShape>&) const override { return true; }

 private:
  bool log_;
  int groups_;
};

}  // namespace nngraph
