// Strided row copies and permutations on cuda (shaders/cuda/copy.cu).
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/convert.h"

namespace nngraph {
namespace {

void copy_rows(Backend& backend, float* dst, int dst_ld, const float* src, int src_ld, int rows, int columns,
               bool add) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  if (add) return cuda::add_rows(b.stream(), dst, dst_ld, src, src_ld, rows, columns);
  cuda_check(cudaMemcpy2DAsync(dst, dst_ld * sizeof(float), src, src_ld * sizeof(float), columns * sizeof(float), rows,
                               cudaMemcpyDeviceToDevice, b.stream()),
             "copy_rows");
}

void permute(Backend& backend, const float* in, float* out, const int* dims, const int* perm) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::permute(b.stream(), in, out, dims, perm);
}

NNGRAPH_KERNEL(CopyRowsKernel, CUDA, copy_rows);
NNGRAPH_KERNEL(PermuteKernel, CUDA, permute);

}  // namespace
}  // namespace nngraph
