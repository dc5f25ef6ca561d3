#include "backends/tensor.h"

#include "nngraph/data_source.h"
#include "nngraph/nodes.h"

namespace nngraph {

Tensor::Tensor(const void* data, int n, ImageShape shape, DType dtype, Layout layout, int pixel_stride)
    : data_(const_cast<void*>(data)), n_(n), shape_(shape), dtype_(dtype), layout_(layout) {
  const int64_t c = shape.c, h = shape.h, w = shape.w, p = pixel_stride ? pixel_stride : c;
  strides_ = layout == Layout::NCHW ? std::array<int64_t, 4>{c * h * w, h * w, w, 1}
                                    : std::array<int64_t, 4>{p * h * w, 1, w * p, p};
}

Tensor Tensor::rows(const void* data, int rows, int columns, int64_t ld, DType dtype) {
  Tensor t(data, rows, ImageShape{columns, 1, 1}, dtype);
  t.strides_[0] = ld;
  return t;
}

bool Tensor::contiguous(Layout layout) const {
  const int64_t c = shape_.c, h = shape_.h, w = shape_.w;
  return strides_ == (layout == Layout::NCHW ? std::array<int64_t, 4>{c * h * w, h * w, w, 1}
                                             : std::array<int64_t, 4>{c * h * w, 1, w * c, c});
}

void Tensor::refuse(DType want) const {
  throw KernelRefusal(cat("this kernel reads ", dtype_name(want), " NCHW, got ", dtype_name(dtype_),
                           layout_ == Layout::NHWC ? " NHWC" : " NCHW"));
}

Tensor image_of(const EncodeArgs& a, const Image& image) { return Tensor::image(image, a.layout); }

Tensor pixels(const EncodeArgs& a, const Image& image) { return image_of(a, image).pixels(); }

Tensor Tensor::parameter(const WeightsState* w, size_t i) {
  if (!w || i >= w->tensors.size() || !w->tensors[i]) return Tensor();
  return Tensor(w->tensors[i]->data(), 1, ImageShape{static_cast<int>(w->counts[i]), 1, 1}, w->dtype(i),
                w->layout(i));
}

}  // namespace nngraph
