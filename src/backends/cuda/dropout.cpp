// Dropout on cuda: the mask from backends/math.h, in shaders/cuda/elementwise.cu.
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/dropout.h"

namespace nngraph {
namespace {

void dropout(Backend& backend, float keep, uint64_t seed, const uint64_t* step, const Tensor& in, const Tensor& out) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::with_storage(in.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::dropout(b.stream(), in.data_as<const T>(), out.data_as<T>(), in.count(), keep, seed, step);
  });
}

NNGRAPH_KERNEL(DropoutKernel, CUDA, dropout);

}  // namespace
}  // namespace nngraph
