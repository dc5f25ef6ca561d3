#pragma once
// Image ⇄ matrix converters (MPSImageCopyToMatrix, MPSMatrixCopyToImage): each matrix row
// holds one image, its values in one of two orders. Also as graph nodes, where the "matrix"
// is an N × (C·H·W) × 1 × 1 image.
#include <string>

#include "nngraph/image.h"
#include "nngraph/nodes.h"

namespace nngraph {

enum class DataLayout { FeatureChannelsHeightWidth, HeightWidthFeatureChannels };
DataLayout parse_data_layout(const std::string& name);  // "chw" or "hwc"

// destination row n = image n; destination must be N × (C·H·W), float32 like the source.
void image_copy_to_matrix(DataLayout layout, const Image& source, const Matrix& destination);
// destination image n = row n; the source must be N × (C·H·W) of the destination's images.
void matrix_copy_to_image(DataLayout layout, const Matrix& source, const Image& destination);

class ImageCopyToMatrixNode : public FilterNode {
 public:
  static std::shared_ptr<ImageCopyToMatrixNode> create(ImageNodePtr source, DataLayout layout, std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;
  DataLayout layout() const { return layout_; }
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  using FilterNode::FilterNode;
  DataLayout layout_ = DataLayout::FeatureChannelsHeightWidth;
};

class MatrixCopyToImageNode : public FilterNode {
 public:
  static std::shared_ptr<MatrixCopyToImageNode> create(ImageNodePtr source, ImageShape shape, DataLayout layout,
                                                       std::string label = "");
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;
  DataLayout layout() const { return layout_; }
  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;

 private:
  using FilterNode::FilterNode;
  ImageShape shape_;
  DataLayout layout_ = DataLayout::FeatureChannelsHeightWidth;
};

}  // namespace nngraph
