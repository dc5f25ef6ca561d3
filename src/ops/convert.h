#pragma once
// The image↔matrix converter nodes, and the kernels they and the recurrent layers'
// time-major sequences use: strided row copies and three-axis permutations.
#include "backends/kernel.h"
#include "nngraph/convert.h"
#include "nngraph/nodes.h"

namespace nngraph {

// dst = src (add: dst += src), two Tensor::rows() views of the same rows × columns.
struct CopyRowsKernel : KernelOf<void(Backend&, const Tensor& dst, const Tensor& src, bool add)> {
  static constexpr const char* name = "copy_rows";
};
// out = in with its three axes (d0, d1, d2) reordered: out axis k is in axis perm[k].
// CopyRowsKernel over float32 rows at dst (dst_ld apart) and src (src_ld apart).
inline void copy_float_rows(Backend& b, float* dst, int dst_ld, const float* src, int src_ld, int rows, int columns,
                            bool add) {
  dispatch<CopyRowsKernel>(b, Tensor::rows(dst, rows, columns, dst_ld), Tensor::rows(src, rows, columns, src_ld), add);
}
struct PermuteKernel : KernelOf<void(Backend&, const Tensor& in, const Tensor& out, const int* dims, const int* perm)> {
  static constexpr const char* name = "permute";
};


// The converters as graph nodes, where the "matrix" is an N × (C·H·W) × 1 × 1 image. Each is
// the other's gradient.
class ConvertNode : public FilterNode {
 public:
  void encode(const EncodeArgs& args) const override;
  Attributes attributes(const std::vector<ImageShape>& sources) const override;
  DataLayout layout() const { return layout_; }

 protected:
  ConvertNode(ImageNodePtr source, std::string label, const char* kind, DataLayout layout, bool to_rows);
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  DataLayout layout_;
  bool to_rows_;  // images in, their rows out
};

class ImageCopyToMatrixNode : public ConvertNode {
 public:
  static constexpr const char* kKind = "image_copy_to_matrix";
  static std::shared_ptr<ImageCopyToMatrixNode> create(ImageNodePtr source, DataLayout layout, std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override;

 private:
  using ConvertNode::ConvertNode;
};

class MatrixCopyToImageNode : public ConvertNode {
 public:
  static constexpr const char* kKind = "matrix_copy_to_image";
  static std::shared_ptr<MatrixCopyToImageNode> create(ImageNodePtr source, ImageShape shape, DataLayout layout,
                                                       std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override;

 private:
  using ConvertNode::ConvertNode;
  ImageShape shape_;
};

}  // namespace nngraph
