#pragma once
// What the pooling kernels share (pool.cu forward, pool_gradient.cu backward): where an
// element of an NCHW or (Last) NHWC batch lies, and the taps of an output's window.
#include "backends/geometry.h"
#include "common.cuh"
#include "ops/pool.h"

namespace nngraph::cuda {

// Element i of a batch of c × h × w images: its plane (image·c + channel) and pixel.
template <class I>
struct Site {
  I plane;
  int y, x;
};
template <bool Last, class I>
__device__ inline Site<I> site_of(I i, int c, int h, int w) {
  const I pixel = Last ? i / c : i;
  const int x = static_cast<int>(pixel % w), y = static_cast<int>((pixel / w) % h);
  const I plane = Last ? (pixel / (I(h) * w)) * c + i % c : i / (I(h) * w);
  return {plane, y, x};
}
// Where plane `plane` of images of hw pixels starts; its pixels lie pixel_step<Last>(c) apart.
template <bool Last, class I>
__device__ inline I plane_start(I plane, int c, int hw) {
  return Last ? (plane / c) * hw * c + plane % c : plane * hw;
}
template <bool Last>
__device__ inline int pixel_step(int c) {
  return Last ? c : 1;
}

// f(index, k) for each in-bounds pixel of output (oy, ox)'s window, in scan order, k its tap
// ky·kw + kx (what max pooling's winners name); returns the count. Unrolled along rows, so
// that a large window's reads are in flight together. The taps are counted here: finding them
// again from each winner's pixel took integer divisions for every channel.
template <class F>
__device__ inline int each_window_tap(const PoolGeometry& g, int oy, int ox, int h, int w, F f) {
  const math::Taps ty = math::window_taps(oy, g.sy, g.pad_top, g.kh, g.dil_y, h);
  const math::Taps tx = math::window_taps(ox, g.sx, g.pad_left, g.kw, g.dil_x, w);
  const int skip_y = ty.first - (oy * g.sy - g.pad_top), skip_x = tx.first - (ox * g.sx - g.pad_left);
  const int ky = g.dil_y == 1 ? skip_y : skip_y / g.dil_y, kx = g.dil_x == 1 ? skip_x : skip_x / g.dil_x;
  for (int i = 0, iy = ty.first; i < ty.count; ++i, iy += g.dil_y)
#pragma unroll 4
    for (int j = 0; j < tx.count; ++j) f(iy * w + tx.first + j * g.dil_x, (ky + i) * g.kw + kx + j);
  return g.count_include_pad ? g.kh * g.kw : ty.count * tx.count;
}
// f(index) for each in-bounds pixel of output (oy, ox)'s window, in scan order; returns the count.
template <class F>
__device__ inline int each_tap(const PoolGeometry& g, int oy, int ox, int h, int w, F f) {
  return each_window_tap(g, oy, ox, h, w, [&](int p, int) { f(p); });
}

// V winner bytes copied in one access (V-aligned: channels in whole packs, images 16-byte
// blocks apart; local arrays declared alignas(V)).
template <int V>
__device__ inline void copy_winners(const uint8_t* from, uint8_t* to) {
  if constexpr (V == 8) {
    *reinterpret_cast<uint2*>(to) = *reinterpret_cast<const uint2*>(from);
  } else if constexpr (V == 4) {
    *reinterpret_cast<uint32_t*>(to) = *reinterpret_cast<const uint32_t*>(from);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) to[k] = from[k];
  }
}

}  // namespace nngraph::cuda
