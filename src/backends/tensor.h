#pragma once
// What a kernel reads and writes: a typed, strided N×C×H×W view of device memory. Kernels
// take these, so a dtype or a layout is added per kernel: a kernel reads its storage type T
// (float, or a cuda half type) in NCHW through data_as<T>(), which refuses the rest
// (KernelRefusal); one that also reads channels-last images takes dense_as<T>() and layout().
// The two kernels that take bundles of buffers say their type once: a recurrent layer
// (RNNLayerGeometry::dtype) and an optimizer batch (float32 by design: master values and
// their state stay float32).
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "nngraph/error.h"
#include "nngraph/image.h"

namespace nngraph {

struct WeightsState;
struct EncodeArgs;

// A kernel given a dtype or layout it does not read. Its message starts "[kernel]"; a graph
// running a node names the node instead (reason() is the message without that start).
class KernelRefusal : public Unsupported {
 public:
  explicit KernelRefusal(const std::string& reason) : Unsupported("[kernel] " + reason), reason_(reason) {}
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

class Tensor {
 public:
  Tensor() = default;
  // Implicit: images are what kernels mostly take.
  // A view of some channels (Image::channels) is channels-last with its pixel stride.
  Tensor(const Image& image)  // NOLINT(google-explicit-constructor)
      : Tensor(image.empty() ? nullptr : image.data(), image.batch(), image.shape(), image.dtype(),
               image.pixel_stride() ? Layout::NHWC : Layout::NCHW, image.pixel_stride()) {}
  // N×C×H×W values of `dtype` at `data`, contiguous in `layout` (NHWC: pixels `pixel_stride`
  // values apart where that is given, more than C).
  Tensor(const void* data, int n, ImageShape shape, DType dtype = DType::Float32, Layout layout = Layout::NCHW,
         int pixel_stride = 0);
  // A graph's image as its step stores it: channels-last where the step's layout is and the
  // image has more than one channel and pixel (else the two layouts are the same memory).
  static Tensor image(const Image& image, Layout layout) {
    const ImageShape& s = image.shape();
    const bool last = (layout == Layout::NHWC && s.c > 1 && s.h * s.w > 1) || image.pixel_stride();
    return image.empty() ? Tensor() : Tensor(image.data(), image.batch(), s, image.dtype(), last ? Layout::NHWC : Layout::NCHW, image.pixel_stride());
  }
  // Channels-last pixels as rows: N·H·W × C × 1 × 1 over the same memory, strides()[0] apart
  // (per-channel kernels, batch normalization and softmax among them, read NHWC images so
  // unchanged).
  Tensor pixels() const {
    return layout_ == Layout::NHWC ? rows(data_, n_ * shape_.h * shape_.w, shape_.c, strides_[3], dtype_) : *this;
  }
  // `count` values in a row (parameters, their gradients, optimizer slots): 1×count×1×1.
  static Tensor vector(const void* data, size_t count, DType dtype = DType::Float32) {
    return Tensor(data, 1, ImageShape{static_cast<int>(count), 1, 1}, dtype);
  }
  static Tensor vector(const std::shared_ptr<Buffer>& buffer, size_t count) {
    return buffer ? vector(buffer->data(), count) : Tensor();
  }
  // Tensor i of a layer's parameters (or their gradients) as encode gets them, in its
  // descriptor's order (weights, biases; gamma, beta, ...); empty where w or the tensor is.
  // A channels-last filter copy (WeightsState::layouts) is a vector marked NHWC: dense_as
  // reads it, data_as refuses it.
  static Tensor parameter(const WeightsState* w, size_t i);
  // rows × columns values, each row contiguous and `ld` values after the one before
  // (matrices, time-major sequences): rows×columns×1×1 with a row stride.
  static Tensor rows(const void* data, int rows, int columns, int64_t ld, DType dtype = DType::Float32);

  // False for the empty view: an operand the kernel does not get (no bias, no dx wanted).
  explicit operator bool() const { return data_ != nullptr; }
  DType dtype() const { return dtype_; }
  Layout layout() const { return layout_; }
  int batch() const { return n_; }
  const ImageShape& shape() const { return shape_; }
  // Elements between neighbours along N, C, H and W.
  const std::array<int64_t, 4>& strides() const { return strides_; }
  size_t count() const { return static_cast<size_t>(n_) * shape_.count(); }
  size_t bytes() const { return count() * dtype_size(dtype_); }
  // Dense in `layout`: no gaps, axes in its order.
  bool contiguous(Layout layout) const;
  bool contiguous_nchw() const { return contiguous(Layout::NCHW); }
  void* data() const { return data_; }
  // The values as T, contiguous NCHW: Unsupported for any other view.
  template <class T>
  T* data_as() const {
    constexpr DType want = DTypeOf<std::remove_const_t<T>>::value;
    if (data_ && (dtype_ != want || !contiguous_nchw())) refuse(want);
    return static_cast<T*>(data_);
  }
  // The values as T, contiguous in their layout(), NCHW or NHWC.
  template <class T>
  T* dense_as() const {
    constexpr DType want = DTypeOf<std::remove_const_t<T>>::value;
    if (data_ && (dtype_ != want || !contiguous(layout_))) refuse(want);
    return static_cast<T*>(data_);
  }
  // The values as T in whatever strides() says (kernels that index by them).
  template <class T>
  T* view_as() const {
    constexpr DType want = DTypeOf<std::remove_const_t<T>>::value;
    if (data_ && dtype_ != want) refuse(want);
    return static_cast<T*>(data_);
  }
  // The same for a rows() view, whose rows are strides()[0] apart.
  template <class T>
  T* rows_as() const {
    constexpr DType want = DTypeOf<std::remove_const_t<T>>::value;
    if (data_ && (dtype_ != want || strides_[1] != 1 || shape_.h * shape_.w != 1)) refuse(want);
    return static_cast<T*>(data_);
  }

 private:
  [[noreturn]] void refuse(DType want) const;
  void* data_ = nullptr;
  int n_ = 0;
  ImageShape shape_;
  DType dtype_ = DType::Float32;
  Layout layout_ = Layout::NCHW;
  std::array<int64_t, 4> strides_{};
};

// An image of a step as its kernels read it: Tensor::image in the step's layout, and its
// pixels() view (what per-channel kernels take).
Tensor image_of(const EncodeArgs& a, const Image& image);
Tensor pixels(const EncodeArgs& a, const Image& image);

}  // namespace nngraph
