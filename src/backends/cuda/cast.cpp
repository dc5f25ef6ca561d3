// Casts between storage types and the finite check on cuda (shaders/cuda/elementwise.cu, reduce.cu).
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/cast.h"

namespace nngraph {
namespace {

void cast(Backend& backend, const Tensor& in, const Tensor& out) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  if (in.dtype() == out.dtype()) return b.copy(out.data(), in.data(), in.bytes());
  cuda::cast(b.stream(), in.data(), in.dtype(), out.data(), out.dtype(), in.count());
}

bool all_finite(Backend& backend, const Tensor& x) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  auto flag = b.allocate(sizeof(int));
  cuda::any_nonfinite(b.stream(), x.data(), x.dtype(), x.count(), static_cast<int*>(flag->data()));
  int host = 0;
  b.copy_to_host(&host, flag->data(), sizeof(int));
  return host == 0;
}

NNGRAPH_KERNEL(CastKernel, CUDA, cast);
NNGRAPH_KERNEL(AllFiniteKernel, CUDA, all_finite);

}  // namespace
}  // namespace nngraph
