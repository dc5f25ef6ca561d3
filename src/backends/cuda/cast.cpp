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
  if (in.dtype() == DType::Float32)
    cuda::f32_to_f16(b.stream(), in.data_as<const float>(), out.data(), in.count());
  else
    cuda::f16_to_f32(b.stream(), in.data(), out.data_as<float>(), in.count());
}

bool all_finite(Backend& backend, const Tensor& x) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  auto flag = b.allocate(sizeof(int));
  cuda::any_nonfinite(b.stream(), x.data_as<const float>(), x.count(), static_cast<int*>(flag->data()));
  int host = 0;
  b.copy_to_host(&host, flag->data(), sizeof(int));
  return host == 0;
}

NNGRAPH_KERNEL(CastKernel, CUDA, cast);
NNGRAPH_KERNEL(AllFiniteKernel, CUDA, all_finite);

}  // namespace
}  // namespace nngraph
