// Concatenation on cuda: per image, a block of channels moves to or from an offset, one 2-D copy.
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/concatenation.h"

namespace nngraph {
namespace {

void copy_channels(Backend& backend, const Tensor& in, const Tensor& out, int channel_offset) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::with_storage(in.dtype(), [&](auto z) {
    using T = decltype(z);
    const size_t block = in.shape().count() * sizeof(T), stride = out.shape().count() * sizeof(T);
    const size_t skip = static_cast<size_t>(channel_offset) * out.shape().h * out.shape().w;
    cuda_check(cudaMemcpy2DAsync(out.data_as<T>() + skip, stride, in.data_as<const T>(), block, block, in.batch(),
                                 cudaMemcpyDeviceToDevice, b.stream()),
               "concatenation");
  });
}

void slice_channels(Backend& backend, const Tensor& in, int channel_offset, const Tensor& out) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::with_storage(in.dtype(), [&](auto z) {
    using T = decltype(z);
    const size_t block = out.shape().count() * sizeof(T), stride = in.shape().count() * sizeof(T);
    const size_t skip = static_cast<size_t>(channel_offset) * in.shape().h * in.shape().w;
    cuda_check(cudaMemcpy2DAsync(out.data_as<T>(), block, in.data_as<const T>() + skip, stride, block, in.batch(),
                                 cudaMemcpyDeviceToDevice, b.stream()),
               "concatenation_gradient");
  });
}

NNGRAPH_KERNEL(CopyChannelsKernel, CUDA, copy_channels);
NNGRAPH_KERNEL(SliceChannelsKernel, CUDA, slice_channels);

}  // namespace
}  // namespace nngraph
