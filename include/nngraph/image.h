#pragma once
// Images (N×C×H×W in one buffer per batch) and matrices, both views of a device Buffer.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nngraph/device.h"
#include "nngraph/dtype.h"

namespace nngraph {

// Owns one allocation on a device; freed by the backend that made it.
class Buffer {
 public:
  using Deleter = void (*)(void* data, size_t bytes, const Device& device);
  Buffer(void* data, size_t bytes, Device device, Deleter deleter)
      : data_(data), bytes_(bytes), device_(device), deleter_(deleter) {}
  ~Buffer() {
    if (data_) deleter_(data_, bytes_, device_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  static std::shared_ptr<Buffer> allocate(size_t bytes, const Device& device);

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  const Device& device() const { return device_; }

 private:
  void* data_;
  size_t bytes_;
  Device device_;
  Deleter deleter_;
};

// How a batch of images lies in memory: NCHW, or channels-last NHWC (what tensor-core
// convolutions read). Auto, asked of a graph, is what its device runs fastest.
enum class Layout : uint8_t { NCHW, NHWC, Auto };
const char* layout_name(Layout layout);  // "NCHW", "NHWC", "auto"
// "NCHW", "NHWC" or "auto", any case; an error names `what`.
Layout layout_named(const std::string& name, const char* what);

// One image's shape; the batch size stays free until execution.
struct ImageShape {
  int c = 0, h = 0, w = 0;
  size_t count() const { return static_cast<size_t>(c) * h * w; }
  bool operator==(const ImageShape& o) const { return c == o.c && h == o.h && w == o.w; }
  bool operator!=(const ImageShape& o) const { return !(*this == o); }
  std::string str() const;  // "C×H×W"
};

struct ImageDescriptor {
  int n = 0;
  ImageShape shape;
  DType dtype = DType::Float32;
  size_t count() const { return static_cast<size_t>(n) * shape.count(); }
  size_t bytes() const { return count() * dtype_size(dtype); }
  std::string str() const;  // "N×C×H×W float32"
};

// A batch of images stored NCHW, contiguous, in one buffer (MPSImageBatch as one allocation).
class Image {
 public:
  Image() = default;
  Image(ImageDescriptor desc, std::shared_ptr<Buffer> buffer, size_t offset_bytes = 0);
  static Image allocate(const ImageDescriptor& desc, const Device& device);
  // A new image on `device` holding what `fill` writes into host memory (desc.bytes() of it).
  static Image from_host(const ImageDescriptor& desc, const Device& device, const std::function<void(void*)>& fill);
  // New images of `descs` in one buffer on `device`, image i holding what fill(i, host memory)
  // writes there, all sent in one transfer (a run's sources and labels cost one upload).
  static std::vector<Image> from_host(const std::vector<ImageDescriptor>& descs, const Device& device,
                                      const std::function<void(size_t, void*)>& fill);

  const ImageDescriptor& descriptor() const { return desc_; }
  const ImageShape& shape() const { return desc_.shape; }
  int batch() const { return desc_.n; }
  DType dtype() const { return desc_.dtype; }
  const Device& device() const { return buffer_->device(); }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  void* data() const { return static_cast<char*>(buffer_->data()) + offset_; }
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data());
  }
  bool empty() const { return !buffer_; }

  // Host transfers of the whole image in its own dtype.
  void copy_from_host(const void* src) const;
  void copy_to_host(void* dst) const;
  // copy_from_host of what `fill` writes into host memory the size of the image (on cpu the
  // image itself, elsewhere the device's staging memory).
  void fill_from_host(const std::function<void(void*)>& fill) const;
  // Same images converted to another dtype (a new buffer on the same device).
  Image converted(DType dtype) const;
  // Channels [first, first + count) of these channels-last images, in place: a graph's view
  // of a concatenation's part, whose pixels lie pixel_stride() values apart (0: dense).
  Image channels(int first, int count) const;
  int pixel_stride() const { return pixel_stride_; }

 private:
  ImageDescriptor desc_;
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;
  int pixel_stride_ = 0;
};
using ImageBatch = Image;

// rows × columns with a row stride in elements (MPSMatrix).
class Matrix {
 public:
  Matrix() = default;
  Matrix(int rows, int columns, int row_stride, DType dtype, std::shared_ptr<Buffer> buffer,
         size_t offset_bytes = 0);
  static Matrix allocate(int rows, int columns, DType dtype, const Device& device);

  int rows() const { return rows_; }
  int columns() const { return columns_; }
  int row_stride() const { return row_stride_; }
  DType dtype() const { return dtype_; }
  const Device& device() const { return buffer_->device(); }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  void* data() const { return static_cast<char*>(buffer_->data()) + offset_; }
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data());
  }

  // Host transfers of rows × columns, dense on the host side.
  void copy_from_host(const void* src) const;
  void copy_to_host(void* dst) const;

 private:
  int rows_ = 0, columns_ = 0, row_stride_ = 0;
  DType dtype_ = DType::Float32;
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;
};

}  // namespace nngraph
