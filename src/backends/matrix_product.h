#pragma once
// The sizes of MatrixProductKernel's products, which every backend reads alike: `count`
// products (images × groups) of M×K by K×N, each operand's group a row-major matrix of its
// channels by its pixels, `*_size` values apart.
#include <cstddef>

#include "backends/tensor.h"
#include "nngraph/error.h"

namespace nngraph {

struct MatrixProduct {
  MatrixProduct(int groups, const Tensor& x, bool tx, const Tensor& y, bool ty, const Tensor& out) {
    const auto rows = [&](const Tensor& t) { return t.shape().c / groups; };
    const auto columns = [](const Tensor& t) { return t.shape().h * t.shape().w; };
    x_columns = columns(x);
    y_columns = columns(y);
    m = tx ? x_columns : rows(x);
    k = tx ? rows(x) : x_columns;
    n = ty ? rows(y) : y_columns;
    if ((ty ? y_columns : rows(y)) != k || rows(out) != m || columns(out) != n || x.batch() != out.batch() ||
        y.batch() != out.batch())
      fail("[matrix_product] operands ", x.shape().str(), " and ", y.shape().str(), " do not make ",
           out.shape().str(), " in ", groups, " groups");
    count = static_cast<size_t>(out.batch()) * groups;
    x_size = static_cast<size_t>(x.shape().count()) / groups;
    y_size = static_cast<size_t>(y.shape().count()) / groups;
    out_size = static_cast<size_t>(out.shape().count()) / groups;
  }
  int m, n, k, x_columns, y_columns;
  size_t count, x_size, y_size, out_size;
};

}  // namespace nngraph
