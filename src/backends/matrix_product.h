#pragma once
// The sizes of MatrixProductKernel's products, which every backend reads alike: per image and
// group, op(x_g)·op(y_g), M×K by K×N, each operand's group a matrix of its channels by its
// pixels. In NCHW a group's matrix is row-major (its rows, the channels, a row of pixels apart);
// channels-last it is stored transposed (its pixels a row of channels apart).
#include <cstddef>

#include "backends/tensor.h"
#include "nngraph/error.h"

namespace nngraph {

struct MatrixProduct {
  // One operand (or the result) as the product reads it.
  struct Operand {
    Operand(const Tensor& t, int groups)
        : rows(t.shape().c / groups), columns(t.shape().h * t.shape().w),
          transposed(t.layout() == Layout::NHWC),
          ld(transposed ? t.shape().c : columns),
          group(static_cast<size_t>(transposed ? rows : rows * columns)),
          image(static_cast<size_t>(t.shape().count())) {}
    int rows, columns;
    bool transposed;  // stored as its transpose (channels-last)
    int ld;           // values between the stored matrix's rows
    size_t group;     // values between one group's matrix and the next's
    size_t image;     // values between one image's and the next's
  };

  MatrixProduct(int groups, const Tensor& x, bool tx, const Tensor& y, bool ty, const Tensor& out)
      : x(x, groups), y(y, groups), out(out, groups), groups(groups), images(out.batch()) {
    m = tx ? this->x.columns : this->x.rows;
    k = tx ? this->x.rows : this->x.columns;
    n = ty ? this->y.rows : this->y.columns;
    if ((ty ? this->y.columns : this->y.rows) != k || this->out.rows != m || this->out.columns != n ||
        x.batch() != images || y.batch() != images)
      fail("[matrix_product] operands ", x.shape().str(), " and ", y.shape().str(), " do not make ",
           out.shape().str(), " in ", groups, " groups");
  }
  // Every group of every image a fixed step after the one before: one batched product of
  // `count` (all three NCHW).
  bool uniform() const { return !x.transposed && !y.transposed && !out.transposed; }
  size_t count() const { return static_cast<size_t>(images) * groups; }

  Operand x, y, out;
  int groups, images, m, n, k;
};

}  // namespace nngraph
