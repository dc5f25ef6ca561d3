#pragma once
// Device helpers shared by our convolution kernels (direct_conv.cu, tensor_conv.cu).
#include "kernels.cuh"

namespace nngraph::cuda {

// A place in an input image: element offset, and the row and column a bounds check sees.
struct Place {
  int base, y, x;
};

__device__ inline bool inside(int y, int x, int h, int w) {
  return static_cast<unsigned>(y) < static_cast<unsigned>(h) && static_cast<unsigned>(x) < static_cast<unsigned>(w);
}

// The element offset of (image, channel, y, x) in images of c channels of h × w, NCHW or
// channels-last (kLast): linear in each index, so a window's origin and a tap's offset add.
template <bool kLast>
__device__ inline int offset(int image, int ch, int y, int x, int c, int h, int w) {
  return kLast ? ((image * h + y) * w + x) * c + ch : ((image * c + ch) * h + y) * w + x;
}

// Tap (ky, kx) = (tap / kw, tap % kw) of input channel ch, relative to a window's origin.
template <bool kLast>
__device__ inline Place window_tap(const ConvShape& g, int ch, int tap) {
  const int ky = tap / g.kw, kx = tap - ky * g.kw, y = ky * g.dy, x = kx * g.dx;
  return {offset<kLast>(0, ch, y, x, g.c, g.h, g.w), y, x};
}

}  // namespace nngraph::cuda
