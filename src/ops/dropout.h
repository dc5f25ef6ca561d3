#pragma once
// Dropout: node, gradient node and kernel.
#include "backends/kernel.h"
#include "ops/gradient.h"

namespace nngraph {

// y = x · mask / keep, mask drawn from (seed, *step, element index): the same call with the
// same seed and step reproduces the mask, so the gradient pass needs no stored state. `step`
// lives in the backend's memory, so a captured step reads each encode's value.
struct DropoutKernel : KernelOf<void(Backend&, float keep, uint64_t seed, const uint64_t* step, const Tensor& x,
                                     const Tensor& y)> {
  static constexpr const char* name = "dropout";
};

// Keeps each value with keep_probability (scaled by 1/keep_probability) when training;
// the identity at inference.
class DropoutNode : public FilterNode {
 public:
  static constexpr const char* kKind = "dropout";
  static std::shared_ptr<DropoutNode> create(ImageNodePtr source, float keep_probability, uint64_t seed,
                                             std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[0]; }
  Attributes attributes(const std::vector<ImageShape>&) const override {
    return {{"keep_probability", double(keep_probability_)}, {"seed", int64_t(seed_)}};
  }
  void encode(const EncodeArgs& args) const override;
  bool identity(bool training) const override { return !training; }
  float keep_probability() const { return keep_probability_; }
  uint64_t seed() const { return seed_; }

 protected:
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  using FilterNode::FilterNode;
  float keep_probability_ = 0.5f;
  uint64_t seed_ = 0;
};

// Sources: dY. Regenerates the forward mask from (seed, step).
class DropoutGradientNode : public GradientNode {
 public:
  static constexpr const char* kKind = "dropout_gradient";
  DropoutGradientNode(const ImageNodePtr& dy, const DropoutNode& forward);
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[0]; }
  void encode(const EncodeArgs& args) const override;

 private:
  float keep_;
  uint64_t seed_;
};

}  // namespace nngraph
