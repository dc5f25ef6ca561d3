// Strided row copies and permutations on cuda (shaders/cuda/copy.cu).
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/convert.h"

namespace nngraph {
namespace {

// Copies of any storage type; sums (recurrent layers' gradients) in float32.
void copy_rows(Backend& backend, const Tensor& to, const Tensor& from, bool add) {
  const int dst_ld = static_cast<int>(to.strides()[0]), src_ld = static_cast<int>(from.strides()[0]);
  const int rows = to.batch(), columns = to.shape().c;
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  if (add) return cuda::add_rows(b.stream(), to.rows_as<float>(), dst_ld, from.rows_as<const float>(), src_ld, rows, columns);
  cuda::with_storage(to.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda_check(cudaMemcpy2DAsync(to.rows_as<T>(), dst_ld * sizeof(T), from.rows_as<const T>(), src_ld * sizeof(T),
                                 columns * sizeof(T), rows, cudaMemcpyDeviceToDevice, b.stream()),
               "copy_rows");
  });
}

void permute(Backend& backend, const Tensor& in, const Tensor& out, const int* dims, const int* perm) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::with_storage(in.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::permute(b.stream(), in.data_as<const T>(), out.data_as<T>(), dims, perm);
  });
}

NNGRAPH_KERNEL(CopyRowsKernel, CUDA, copy_rows);
NNGRAPH_KERNEL(PermuteKernel, CUDA, permute);

}  // namespace
}  // namespace nngraph
