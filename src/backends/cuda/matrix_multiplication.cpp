// Matrix products of images on cuda through cuBLAS: NCHW in one strided batched product over
// images and groups; channels-last (or mixed) a batched product over the images per group, each
// operand read in its stored (transposed) form and the result written as its own stores it.
#include "backends/cuda/cuda_backend.h"
#include "backends/matrix_product.h"
#include "kernels.cuh"
#include "ops/matrix_multiplication.h"

namespace nngraph {
namespace {

void matrix_product(Backend& backend, int groups, const Tensor& x, bool tx, const Tensor& y, bool ty,
                    const Tensor& out, bool tf32) {
  const MatrixProduct p(groups, x, tx, y, ty, out);
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const DType dt = out.dtype();
  cuda::with_storage(dt, [&](auto z) {
    using T = decltype(z);
    const T* xs = x.dense_as<const T>();
    const T* ys = y.dense_as<const T>();
    T* os = out.dense_as<T>();
    if (p.uniform()) {
      const GemmBatch batch{static_cast<int>(p.count()), static_cast<long long>(p.x.group),
                            static_cast<long long>(p.y.group), static_cast<long long>(p.out.group)};
      b.gemm(dt, tx, ty, p.m, p.n, p.k, xs, p.x.ld, ys, p.y.ld, os, p.out.ld, tf32, 1.f, 0.f, batch);
      return;
    }
    // op(x) and op(y) in terms of what is stored; a result stored transposed is op(y)ᵀ·op(x)ᵀ.
    const bool sx = tx != p.x.transposed, sy = ty != p.y.transposed;
    const GemmBatch batch{p.images, static_cast<long long>(p.x.image), static_cast<long long>(p.y.image),
                          static_cast<long long>(p.out.image)};
    const GemmBatch swapped{p.images, batch.b, batch.a, batch.c};
    for (int g = 0; g < groups; ++g) {
      const T* xg = xs + g * p.x.group;
      const T* yg = ys + g * p.y.group;
      T* og = os + g * p.out.group;
      if (p.out.transposed)
        b.gemm(dt, !sy, !sx, p.n, p.m, p.k, yg, p.y.ld, xg, p.x.ld, og, p.out.ld, tf32, 1.f, 0.f, swapped);
      else
        b.gemm(dt, sx, sy, p.m, p.n, p.k, xg, p.x.ld, yg, p.y.ld, og, p.out.ld, tf32, 1.f, 0.f, batch);
    }
  });
}

NNGRAPH_KERNEL(MatrixProductKernel, CUDA, matrix_product);
NNGRAPH_CHANNELS_LAST(MatrixProductKernel, CUDA);

}  // namespace
}  // namespace nngraph
