#include "nngraph/image.h"

#include <cctype>
#include <vector>

#include "backends/backend.h"
#include "ops/cast.h"
#include "nngraph/error.h"

namespace nngraph {

std::shared_ptr<Buffer> Buffer::allocate(size_t bytes, const Device& device) {
  return backend_for(device).allocate(bytes);
}

const char* layout_name(Layout layout) {
  return layout == Layout::NCHW ? "NCHW" : layout == Layout::NHWC ? "NHWC" : "auto";
}

Layout layout_named(const std::string& name, const char* what) {
  std::string upper = name;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  for (Layout l : {Layout::NCHW, Layout::NHWC})
    if (upper == layout_name(l)) return l;
  if (upper == "AUTO") return Layout::Auto;
  fail("[", what, "] layout must be 'NCHW', 'NHWC' or 'auto', got '", name, "'");
}

Image Image::channels(int first, int count) const {
  if (pixel_stride_ || first < 0 || count < 1 || first + count > desc_.shape.c)
    fail("[image] channels ", first, "..", first + count, " of ", desc_.str());
  Image part = *this;
  part.desc_.shape.c = count;
  part.offset_ += static_cast<size_t>(first) * dtype_size(desc_.dtype);
  part.pixel_stride_ = desc_.shape.c;
  return part;
}

std::string ImageShape::str() const { return cat(c, "×", h, "×", w); }

std::string ImageDescriptor::str() const {
  return cat(n, "×", shape.str(), " ", dtype_name(dtype));
}

Image::Image(ImageDescriptor desc, std::shared_ptr<Buffer> buffer, size_t offset_bytes)
    : desc_(desc), buffer_(std::move(buffer)), offset_(offset_bytes) {
  if (!buffer_) fail("[image] no buffer");
  if (offset_ + desc_.bytes() > buffer_->bytes())
    fail("[image] ", desc_.str(), " at offset ", offset_, " does not fit a buffer of ",
         buffer_->bytes(), " bytes");
}

Image Image::allocate(const ImageDescriptor& desc, const Device& device) {
  return Image(desc, Buffer::allocate(desc.bytes(), device));
}

Image Image::from_host(const ImageDescriptor& desc, const Device& device, const std::function<void(void*)>& fill) {
  return from_host(std::vector<ImageDescriptor>{desc}, device, [&](size_t, void* host) { fill(host); })[0];
}

std::vector<Image> Image::from_host(const std::vector<ImageDescriptor>& descs, const Device& device,
                                    const std::function<void(size_t, void*)>& fill) {
  constexpr size_t kAlign = 256;  // what device kernels' vector loads may assume of an image
  std::vector<size_t> offsets;
  size_t bytes = 0;
  for (const auto& d : descs) {
    offsets.push_back(bytes);
    bytes += (d.bytes() + kAlign - 1) / kAlign * kAlign;
  }
  auto buffer = backend_for(device).upload(bytes, [&](void* host) {
    for (size_t i = 0; i < descs.size(); ++i) fill(i, static_cast<char*>(host) + offsets[i]);
  });
  std::vector<Image> out;
  for (size_t i = 0; i < descs.size(); ++i) out.emplace_back(descs[i], buffer, offsets[i]);
  return out;
}

void Image::copy_from_host(const void* src) const {
  backend_for(device()).copy_from_host(data(), src, desc_.bytes());
}

void Image::fill_from_host(const std::function<void(void*)>& fill) const {
  backend_for(device()).fill_from_host(data(), desc_.bytes(), fill);
}

void Image::copy_to_host(void* dst) const {
  backend_for(device()).copy_to_host(dst, data(), desc_.bytes());
}

Image Image::converted(DType dtype) const {
  ImageDescriptor d = desc_;
  d.dtype = dtype;
  Image out = allocate(d, device());
  Backend& b = backend_for(device());
  dispatch<CastKernel>(b, *this, out);
  return out;
}

Matrix::Matrix(int rows, int columns, int row_stride, DType dtype, std::shared_ptr<Buffer> buffer,
               size_t offset_bytes)
    : rows_(rows), columns_(columns), row_stride_(row_stride), dtype_(dtype),
      buffer_(std::move(buffer)), offset_(offset_bytes) {
  if (rows < 0 || columns < 0 || row_stride < columns)
    fail("[matrix] bad geometry ", rows, "×", columns, " with row stride ", row_stride);
  if (!buffer_) fail("[matrix] no buffer");
  const size_t need = rows ? (static_cast<size_t>(rows - 1) * row_stride + columns) * dtype_size(dtype) : 0;
  if (offset_ + need > buffer_->bytes())
    fail("[matrix] ", rows, "×", columns, " does not fit a buffer of ", buffer_->bytes(), " bytes");
}

Matrix Matrix::allocate(int rows, int columns, DType dtype, const Device& device) {
  return Matrix(rows, columns, columns, dtype,
                Buffer::allocate(static_cast<size_t>(rows) * columns * dtype_size(dtype), device));
}

void Matrix::copy_from_host(const void* src) const {
  auto& b = backend_for(device());
  const size_t row = static_cast<size_t>(columns_) * dtype_size(dtype_);
  const size_t stride = static_cast<size_t>(row_stride_) * dtype_size(dtype_);
  if (row == stride) return b.copy_from_host(data(), src, row * rows_);
  for (int r = 0; r < rows_; ++r)
    b.copy_from_host(static_cast<char*>(data()) + r * stride, static_cast<const char*>(src) + r * row, row);
}

void Matrix::copy_to_host(void* dst) const {
  auto& b = backend_for(device());
  const size_t row = static_cast<size_t>(columns_) * dtype_size(dtype_);
  const size_t stride = static_cast<size_t>(row_stride_) * dtype_size(dtype_);
  if (row == stride) return b.copy_to_host(dst, data(), row * rows_);
  for (int r = 0; r < rows_; ++r)
    b.copy_to_host(static_cast<char*>(dst) + r * row, static_cast<const char*>(data()) + r * stride, row);
}

}  // namespace nngraph
