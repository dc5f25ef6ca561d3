// Matrix products of images on cuda: one strided batched cuBLAS product over images and groups.
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
  cuda::with_storage(out.dtype(), [&](auto z) {
    using T = decltype(z);
    const GemmBatch batch{static_cast<int>(p.count), static_cast<long long>(p.x_size),
                          static_cast<long long>(p.y_size), static_cast<long long>(p.out_size)};
    b.gemm(out.dtype(), tx, ty, p.m, p.n, p.k, x.data_as<const T>(), p.x_columns, y.data_as<const T>(), p.y_columns,
           out.data_as<T>(), p.n, tf32, 1.f, 0.f, batch);
  });
}

NNGRAPH_KERNEL(MatrixProductKernel, CUDA, matrix_product);

}  // namespace
}  // namespace nngraph
