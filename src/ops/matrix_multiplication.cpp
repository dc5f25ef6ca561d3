// Matrix multiplication of images: shape rule, gradient wiring and kernel dispatch.
#include "ops/matrix_multiplication.h"

#include "nngraph/error.h"

namespace nngraph {

std::shared_ptr<MatrixMultiplicationNode> MatrixMultiplicationNode::create(ImageNodePtr left, ImageNodePtr right,
                                                                           int groups, bool transpose_left,
                                                                           bool transpose_right, std::string label) {
  std::shared_ptr<MatrixMultiplicationNode> node(
      new MatrixMultiplicationNode({std::move(left), std::move(right)}, std::move(label), kKind));
  node->set_default_label(kKind);
  if (groups < 1) fail("[", node->label(), "] groups must be at least 1, got ", groups);
  node->groups_ = groups;
  node->tl_ = transpose_left;
  node->tr_ = transpose_right;
  return node;
}

ImageShape MatrixMultiplicationNode::infer(const std::vector<ImageShape>& s) const {
  const char* side[] = {"left", "right"};
  for (int i = 0; i < 2; ++i)
    if (s[i].c % groups_)
      fail("[", label(), "] ", side[i], "'s ", s[i].c, " channels do not fall into ", groups_, " groups");
  // Each operand's group as a matrix, then as the product reads it.
  const int64_t lr = s[0].c / groups_, lc = int64_t(s[0].h) * s[0].w;
  const int64_t rr = s[1].c / groups_, rc = int64_t(s[1].h) * s[1].w;
  const int64_t rows = tl_ ? lc : lr, inner = tl_ ? lr : lc, right_inner = tr_ ? rc : rr;
  if (inner != right_inner)
    fail("[", label(), "] left's groups are ", tl_ ? lc : lr, "×", tl_ ? lr : lc, " matrices and right's ",
         tr_ ? rc : rr, "×", tr_ ? rr : rc, " (as the product reads them, channels by pixels", tl_ || tr_ ? ", transposed" : "",
         "): ", inner, " and ", right_inner, " differ");
  if (rows * groups_ > (int64_t(1) << 30)) fail("[", label(), "] a result of ", rows * groups_, " channels is too large");
  const int channels = static_cast<int>(rows * groups_);
  return tr_ ? ImageShape{channels, 1, static_cast<int>(rr)} : ImageShape{channels, s[1].h, s[1].w};
}

void MatrixMultiplicationNode::encode(const EncodeArgs& a) const {
  dispatch<MatrixProductKernel>(a.backend, groups_, image_of(a, *a.sources[0]), tl_, image_of(a, *a.sources[1]), tr_,
                                image_of(a, a.result), a.allow_tf32);
}

std::vector<FilterNodePtr> MatrixMultiplicationNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<MatrixMultiplicationGradientNode>(dy, *this, 0),
          std::make_shared<MatrixMultiplicationGradientNode>(dy, *this, 1)};
}

MatrixMultiplicationGradientNode::MatrixMultiplicationGradientNode(const ImageNodePtr& dy,
                                                                   const MatrixMultiplicationNode& forward,
                                                                   int operand)
    : GradientNode({dy, forward.sources()[0], forward.sources()[1]}, forward, "matrix_multiplication_gradient"),
      groups_(forward.groups()), operand_(operand), tl_(forward.transpose_left()), tr_(forward.transpose_right()) {}

void MatrixMultiplicationGradientNode::encode(const EncodeArgs& a) const {
  // Y = op(L)·op(R): d op(L) = dY·op(R)ᵀ and d op(R) = op(L)ᵀ·dY, transposed back where the
  // forward product read its operand transposed.
  const Image &dy = *a.sources[0], &l = *a.sources[1], &r = *a.sources[2];
  auto product = [&](const Image& x, bool tx, const Image& y, bool ty) {
    dispatch<MatrixProductKernel>(a.backend, groups_, image_of(a, x), tx, image_of(a, y), ty, image_of(a, a.result),
                                  a.allow_tf32);
  };
  if (operand_ == 0)
    tl_ ? product(r, tr_, dy, true) : product(dy, false, r, !tr_);
  else
    tr_ ? product(dy, true, l, tl_) : product(l, !tl_, dy, false);
}

}  // namespace nngraph
