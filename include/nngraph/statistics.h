#pragma once
// Statistics of image data computed where the images are.
#include <vector>

#include "nngraph/image.h"

namespace nngraph {

// Σ p·pᵀ over every kh×kw patch p (stride 1, no padding) of the first `count` images (all
// where count < 0), computed on their device (any dtype, summed in float32 per patch block and
// float64 across blocks): (C·kh·kw)² values, row-major, p's values in (channel, row, column)
// order, as a convolution's OIHW weights read them. At most 64 values per patch.
std::vector<double> patch_moments(const Image& images, int kh, int kw, int count = -1);

}  // namespace nngraph
