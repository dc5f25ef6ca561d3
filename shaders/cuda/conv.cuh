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

// Tap (ky, kx) = (tap / kw, tap % kw) of input channel c, relative to a window's origin.
__device__ inline Place window_tap(const ConvShape& g, int c, int tap) {
  const int ky = tap / g.kw, kx = tap - ky * g.kw, y = ky * g.dy, x = kx * g.dx;
  return {(c * g.h + y) * g.w + x, y, x};
}

}  // namespace nngraph::cuda
