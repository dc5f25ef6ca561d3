// Strided row copies and permutations on cuda (shaders/cuda/copy.cu).
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/convert.h"

namespace nngraph {
namespace {

void copy_rows(Backend& backend, const Tensor& to, const Tensor& from, bool add) {
  float* dst = to.rows_as<float>();
  const float* src = from.rows_as<const float>();
  const int dst_ld = static_cast<int>(to.strides()[0]), src_ld = static_cast<int>(from.strides()[0]);
  const int rows = to.batch(), columns = to.shape().c;
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  if (add) return cuda::add_rows(b.stream(), dst, dst_ld, src, src_ld, rows, columns);
  cuda_check(cudaMemcpy2DAsync(dst, dst_ld * sizeof(float), src, src_ld * sizeof(float), columns * sizeof(float), rows,
                               cudaMemcpyDeviceToDevice, b.stream()),
             "copy_rows");
}

void permute(Backend& backend, const Tensor& in, const Tensor& out, const int* dims, const int* perm) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::permute(b.stream(), in.data_as<const float>(), out.data_as<float>(), dims, perm);
}

NNGRAPH_KERNEL(CopyRowsKernel, CUDA, copy_rows);
NNGRAPH_KERNEL(PermuteKernel, CUDA, permute);

}  // namespace
}  // namespace nngraph
