#pragma once
// Products of images read as matrices: each image's channels fall into groups, and a group is
// a matrix of its channels (rows) by its pixels (columns). Attention's products are these, a
// head to a group.
#include "backends/kernel.h"
#include "ops/gradient.h"

namespace nngraph {

// out_g = op(x_g)·op(y_g) for every image and group g, op the transpose where asked; out's
// groups hold the products' rows as channels and their columns as pixels.
struct MatrixProductKernel : KernelOf<void(Backend&, int groups, const Tensor& x, bool tx, const Tensor& y, bool ty,
                                           const Tensor& out, bool tf32)> {
  static constexpr const char* name = "matrix_product";
};

// left_g · right_g (either transposed) for each of `groups` channel groups of both sources.
// The result has groups × (the product's rows) channels; its pixels are right's (H, W), or
// 1 × (right's channels in a group) where right is transposed.
class MatrixMultiplicationNode : public FilterNode {
 public:
  static constexpr const char* kKind = "matrix_multiplication";
  static std::shared_ptr<MatrixMultiplicationNode> create(ImageNodePtr left, ImageNodePtr right, int groups,
                                                          bool transpose_left, bool transpose_right,
                                                          std::string label = "");
  int groups() const { return groups_; }
  bool transpose_left() const { return tl_; }
  bool transpose_right() const { return tr_; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  Attributes attributes(const std::vector<ImageShape>&) const override {
    return {{"groups", int64_t(groups_)}, {"transpose_left", int64_t(tl_)}, {"transpose_right", int64_t(tr_)}};
  }
  void encode(const EncodeArgs& args) const override;
  // Channels-last images where the device's kernel reads them (each group's matrix transposed).
  bool channels_last(DeviceType device, const std::vector<ImageShape>&) const override {
    return reads_channels_last<MatrixProductKernel>(device);
  }

 protected:
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  using FilterNode::FilterNode;
  int groups_ = 1;
  bool tl_ = false, tr_ = false;
};

// d(loss)/d(source `operand`) of a matrix multiplication: a product of dY with the other
// source. Sources: dY, left, right (the operand's own for its shape alone).
class MatrixMultiplicationGradientNode : public GradientNode {
 public:
  MatrixMultiplicationGradientNode(const ImageNodePtr& dy, const MatrixMultiplicationNode& forward, int operand);
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[1 + operand_]; }
  void encode(const EncodeArgs& args) const override;
  bool reads_values(size_t source) const override { return source != static_cast<size_t>(1 + operand_); }
  bool channels_last(DeviceType device, const std::vector<ImageShape>&) const override {
    return reads_channels_last<MatrixProductKernel>(device);
  }

 private:
  int groups_, operand_;
  bool tl_, tr_;
};

}  // namespace nngraph
