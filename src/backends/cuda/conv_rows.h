#pragma once
// Convolutions as matrix products over their windows' rows, for conv.cpp: which shapes may run
// so, and the rows and filters those products read.
#include <memory>

#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/conv.h"

namespace nngraph::conv_rows {

// A convolution whose 1×k windows tile each row (g.tiles_rows), as products over a matrix
// of the windows: cuDNN's general kernels are several times slower on such shapes.
inline bool windowed(const ConvGeometry& g, const ImageShape& in, const ImageShape& out) {
  return g.groups == 1 && g.kw > 1 && g.tiles_rows(in, out);
}
// Channels-last, windows that cover their rows whole are already the rows of that matrix,
// kw·c values each in a KRSC filter's order: the products read and write the images in place.
inline bool windowed_in_place(const ConvGeometry& g, const ImageShape& in, const ImageShape& out) {
  return windowed(g, in, out) && out.w * g.kw == in.w;
}

// Channels-last convolutions as matrix products over their windows' rows (cuda::windows) and
// the KRSC filters, each pass a timed candidate beside cuDNN's algorithms:
// - pointwise, a 1×1 window that reaches no padding: rows of c values, x itself where it reads
//   every pixel. cuDNN's kernels for strided ones (ResNet's downsampling shortcuts) ran several
//   times slower than the product; the input gradient places the rows' gradient back.
// - few taps (kh·kw·c at most kDirectMaxTaps: stems on a few channels): rows of the taps padded
//   to 8 values (16-byte rows of half values), forward and weight gradient.
inline bool pointwise(const ConvGeometry& g, const ImageShape& in, const ImageShape& out) {
  return g.groups == 1 && g.kh == 1 && g.kw == 1 && g.pad_top == 0 && g.pad_left == 0 &&
         (out.h - 1) * g.sy < in.h && (out.w - 1) * g.sx < in.w;
}
inline bool few_taps(const ConvGeometry& g, const ImageShape& in) {
  return g.groups == 1 && g.kh * g.kw > 1 && g.kh * g.kw * in.c <= cuda::kDirectMaxTaps;
}
// The values of a window's row: c for a pointwise convolution, else its taps rounded up to 8.
inline int row_values(const ConvGeometry& g, const ImageShape& in) {
  const int taps = g.kh * g.kw * in.c;
  return g.kh * g.kw == 1 ? taps : (taps + 7) / 8 * 8;
}
// Whether a pointwise convolution reads every pixel: x is its rows as it lies.
inline bool reads_every_pixel(const cuda::ConvShape& s) { return s.kh * s.kw == 1 && s.h == s.oh && s.w == s.ow; }
// The windows' rows, ld values each: x itself, or gathered into *rows.
template <class T>
const T* window_rows(CudaBackend& b, const cuda::ConvShape& s, const Tensor& x, int ld,
                     std::shared_ptr<Buffer>* rows) {
  if (reads_every_pixel(s)) return x.dense_as<const T>();
  *rows = b.allocate(static_cast<size_t>(s.n) * s.oh * s.ow * ld * sizeof(T));
  cuda::windows(b.stream(), s, x.dense_as<const T>(), (*rows)->data(), sizeof(T), ld);
  return static_cast<const T*>((*rows)->data());
}
// KRSC filters (o × k) as rows of ld values, zeros past k: w itself where ld is k.
template <class T>
const T* padded_filters(CudaBackend& b, const T* w, int o, int k, int ld, std::shared_ptr<Buffer>* padded) {
  if (ld == k) return w;
  *padded = b.allocate(static_cast<size_t>(o) * ld * sizeof(T));
  cuda_check(cudaMemsetAsync((*padded)->data(), 0, (*padded)->bytes(), b.stream()), "convolution");
  cuda::copy_rows(b.stream(), (*padded)->data(), ld * sizeof(T), w, k * sizeof(T), o, k * sizeof(T));
  return static_cast<const T*>((*padded)->data());
}

// Channels-last convolutions on a channel count that is not a multiple of 32 (the speed-run
// network's 24 whitened channels) as cuDNN's on the next multiple, with x copied into rows of
// that many values (zeros past c) and the filters padded alike: its bf16 kernels for 32 channels
// ran twice as fast as those for 24 on an H200, copy included; in tf32 its weight gradient on 24
// converts both operands first (282 of 643 µs). A timed candidate for each pass; 0 where none.
// From 16 channels on, so the copy is at most twice x (an RGB stem's would be ten times).
inline int widened_channels(const ConvGeometry& g, const ImageShape& in) {
  const bool fits =
      g.groups == 1 && g.kh * g.kw > 1 && in.c % 32 != 0 && in.c >= 16 && in.c < 256 && !few_taps(g, in);
  return fits ? (in.c + 31) / 32 * 32 : 0;
}
// x's pixels as rows of `wide` values, zeros past its channels, into *rows.
template <class T>
const T* widened_pixels(CudaBackend& b, const Tensor& x, int wide, std::shared_ptr<Buffer>* rows) {
  const ImageShape& s = x.shape();
  const cuda::ConvShape pixels{x.batch(), s.c, s.h, s.w, s.c, s.h, s.w, 1, 1, 1, 1, 1, 1, 0, 0};
  *rows = b.allocate(static_cast<size_t>(x.batch()) * s.h * s.w * wide * sizeof(T));
  cuda::windows(b.stream(), pixels, x.dense_as<const T>(), (*rows)->data(), sizeof(T), wide);
  return static_cast<const T*>((*rows)->data());
}
template <class T>
std::shared_ptr<Buffer> gather_windows(CudaBackend& b, const ConvGeometry& g, const Tensor& x, const ImageShape& out) {
  const auto& is = x.shape();
  auto win = b.allocate(static_cast<size_t>(x.batch()) * is.h * out.w * is.c * g.kw * sizeof(T));
  cuda::gather_windows(b.stream(), x.data_as<const T>(), static_cast<T*>(win->data()), x.batch(), is.c, is.h, is.w,
                       out.w, g.kw);
  return win;
}

}  // namespace nngraph::conv_rows
