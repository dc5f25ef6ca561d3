// Matrix products of images on the cpu (NCHW): one OpenBLAS product per image and group.
#include "backends/cpu/cpu_backend.h"
#include "backends/matrix_product.h"
#include "ops/matrix_multiplication.h"

namespace nngraph {
namespace {

void matrix_product(Backend& backend, int groups, const Tensor& x, bool tx, const Tensor& y, bool ty,
                    const Tensor& out, bool) {
  const MatrixProduct p(groups, x, tx, y, ty, out);
  const float* a = x.data_as<const float>();
  const float* b = y.data_as<const float>();
  float* c = out.data_as<float>();
  ThreadPool& pool = pool_of(backend);
  auto one = [&](size_t i, ThreadPool* split) {
    gemm(split, tx, ty, p.m, p.n, p.k, 1.f, a + i * p.x.group, p.x.ld, b + i * p.y.group, p.y.ld, 0.f,
         c + i * p.out.group, p.out.ld);
  };
  // Many small products (attention's heads over a batch) take a thread each; a few large ones
  // are split inside.
  if (p.count() >= static_cast<size_t>(pool.size()))
    pool.parallel_for(p.count(), [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i) one(i, nullptr);
    });
  else
    for (size_t i = 0; i < p.count(); ++i) one(i, &pool);
}

NNGRAPH_KERNEL(MatrixProductKernel, CPU, matrix_product);

}  // namespace
}  // namespace nngraph
