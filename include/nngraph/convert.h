#pragma once
// Image ⇄ matrix converters (MPSImageCopyToMatrix, MPSMatrixCopyToImage): each matrix row
// holds one image, its values in one of two orders. Their graph nodes are in src/ops/convert.h.
#include <string>

#include "nngraph/image.h"

namespace nngraph {

enum class DataLayout { FeatureChannelsHeightWidth, HeightWidthFeatureChannels };
DataLayout parse_data_layout(const std::string& name);  // "chw" or "hwc"

// destination row n = image n; destination must be N × (C·H·W), float32 like the source.
void image_copy_to_matrix(DataLayout layout, const Image& source, const Matrix& destination);
// destination image n = row n; the source must be N × (C·H·W) of the destination's images.
void matrix_copy_to_image(DataLayout layout, const Matrix& source, const Image& destination);

}  // namespace nngraph
