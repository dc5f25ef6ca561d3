// Image ⇄ matrix converters and their graph nodes.
#include "ops/convert.h"

#include "nngraph/error.h"
#include "ops/gradient.h"

namespace nngraph {
namespace {

// N images of C×P values (P = H·W) of dtype `t` into rows of stride `ld`, in `layout` order.
void to_rows(Backend& b, DataLayout layout, DType dt, const void* in, void* out, int ld, int n, int c, int p) {
  const int k = c * p;
  const Tensor x = Tensor::rows(in, n, k, k, dt), y = Tensor::rows(out, n, k, ld, dt);
  if (layout == DataLayout::FeatureChannelsHeightWidth) return dispatch<CopyRowsKernel>(b, y, x, false);
  const int dims[3] = {n, c, p}, perm[3] = {0, 2, 1};
  if (ld == k) return dispatch<PermuteKernel>(b, x, y, dims, perm);
  auto tmp = b.allocate(size_t(n) * k * dtype_size(dt));
  const Tensor t = Tensor::rows(tmp->data(), n, k, k, dt);
  dispatch<PermuteKernel>(b, x, t, dims, perm);
  dispatch<CopyRowsKernel>(b, y, t, false);
}

void from_rows(Backend& b, DataLayout layout, DType dt, const void* in, int ld, void* out, int n, int c, int p) {
  const int k = c * p;
  const Tensor x = Tensor::rows(in, n, k, ld, dt), y = Tensor::rows(out, n, k, k, dt);
  if (layout == DataLayout::FeatureChannelsHeightWidth) return dispatch<CopyRowsKernel>(b, y, x, false);
  const int dims[3] = {n, p, c}, perm[3] = {0, 2, 1};
  if (ld == k) return dispatch<PermuteKernel>(b, x, y, dims, perm);
  auto tmp = b.allocate(size_t(n) * k * dtype_size(dt));
  const Tensor t = Tensor::rows(tmp->data(), n, k, k, dt);
  dispatch<CopyRowsKernel>(b, t, x, false);
  dispatch<PermuteKernel>(b, t, y, dims, perm);
}

void check_pair(const char* what, const Image& image, const Matrix& matrix) {
  if (image.dtype() != DType::Float32 || matrix.dtype() != DType::Float32)
    fail("[", what, "] converts float32 images and matrices");
  if (image.device() != matrix.device())
    fail("[", what, "] image is on ", image.device().str(), ", matrix on ", matrix.device().str());
  if (matrix.rows() != image.batch() || static_cast<size_t>(matrix.columns()) != image.shape().count())
    fail("[", what, "] a batch of ", image.batch(), " images of ", image.shape().str(), " needs a ", image.batch(),
         "×", image.shape().count(), " matrix, got ", matrix.rows(), "×", matrix.columns());
}

// Images in `in` to their rows in `out`, or rows back to images; the image shape is the side
// that holds images.
void convert_images(Backend& b, DataLayout layout, bool to_rows_, const Image& in, const Image& out) {
  const ImageShape& img = to_rows_ ? in.shape() : out.shape();
  const int n = in.batch(), c = img.c, p = img.h * img.w;
  if (to_rows_)
    to_rows(b, layout, in.dtype(), in.data(), out.data(), c * p, n, c, p);
  else
    from_rows(b, layout, in.dtype(), in.data(), c * p, out.data(), n, c, p);
}

// Gradient of either converter: the other conversion. Sources: dY, X (for its shape).
class ConvertGradientNode : public GradientNode {
 public:
  ConvertGradientNode(const ImageNodePtr& dy, FilterNode& forward, DataLayout layout, bool to_rows)
      : GradientNode({dy, forward.sources()[0]}, forward, "convert_gradient"), layout_(layout), to_rows_(to_rows) {}
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[1]; }
  void encode(const EncodeArgs& a) const override {
    convert_images(a.backend, layout_, to_rows_, *a.sources[0], a.result);
  }

 private:
  DataLayout layout_;
  bool to_rows_;
};

}  // namespace

DataLayout parse_data_layout(const std::string& name) {
  if (name == "chw") return DataLayout::FeatureChannelsHeightWidth;
  if (name == "hwc") return DataLayout::HeightWidthFeatureChannels;
  fail("[data layout] expected 'chw' (feature channels × height × width) or 'hwc', got '", name, "'");
}

void image_copy_to_matrix(DataLayout layout, const Image& source, const Matrix& destination) {
  check_pair("image_copy_to_matrix", source, destination);
  const ImageShape& s = source.shape();
  to_rows(backend_for(source.device()), layout, DType::Float32, source.data(), destination.data(),
          destination.row_stride(), source.batch(), s.c, s.h * s.w);
}

void matrix_copy_to_image(DataLayout layout, const Matrix& source, const Image& destination) {
  check_pair("matrix_copy_to_image", destination, source);
  const ImageShape& s = destination.shape();
  from_rows(backend_for(source.device()), layout, DType::Float32, source.data(), source.row_stride(),
            destination.data(), destination.batch(), s.c, s.h * s.w);
}

ConvertNode::ConvertNode(ImageNodePtr source, std::string label, const char* kind, DataLayout layout, bool to_rows)
    : FilterNode({std::move(source)}, std::move(label), kind), layout_(layout), to_rows_(to_rows) {
  set_default_label(kind);
}

Attributes ConvertNode::attributes(const std::vector<ImageShape>&) const {
  return {{"layout", std::string(layout_ == DataLayout::FeatureChannelsHeightWidth ? "chw" : "hwc")}};
}

void ConvertNode::encode(const EncodeArgs& a) const {
  convert_images(a.backend, layout_, to_rows_, *a.sources[0], a.result);
}

std::vector<FilterNodePtr> ConvertNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<ConvertGradientNode>(dy, *this, layout_, !to_rows_)};
}

std::shared_ptr<ImageCopyToMatrixNode> ImageCopyToMatrixNode::create(ImageNodePtr source, DataLayout layout,
                                                                     std::string label) {
  return std::shared_ptr<ImageCopyToMatrixNode>(
      new ImageCopyToMatrixNode(std::move(source), std::move(label), kKind, layout, true));
}

ImageShape ImageCopyToMatrixNode::infer(const std::vector<ImageShape>& s) const {
  return {static_cast<int>(s[0].count()), 1, 1};
}

std::shared_ptr<MatrixCopyToImageNode> MatrixCopyToImageNode::create(ImageNodePtr source, ImageShape shape,
                                                                     DataLayout layout, std::string label) {
  std::shared_ptr<MatrixCopyToImageNode> node(
      new MatrixCopyToImageNode(std::move(source), std::move(label), kKind, layout, false));
  if (shape.c < 1 || shape.h < 1 || shape.w < 1)
    fail("[", node->label(), "] image shape must be positive, got ", shape.str());
  node->shape_ = shape;
  return node;
}

ImageShape MatrixCopyToImageNode::infer(const std::vector<ImageShape>& s) const {
  if (s[0].count() != shape_.count())
    fail("[", label(), "] source rows hold ", s[0].count(), " values, a ", shape_.str(), " image needs ",
         shape_.count());
  return shape_;
}

}  // namespace nngraph
