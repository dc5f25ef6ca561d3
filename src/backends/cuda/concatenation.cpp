// Concatenation on cuda: rows of channels to or from an offset in the whole (channel_rows),
// one strided copy.
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/concatenation.h"

namespace nngraph {
namespace {

void copy_channels(Backend& backend, const Tensor& in, const Tensor& out, int channel_offset) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const ChannelRows r = channel_rows(out, in, channel_offset);
  const size_t item = dtype_size(in.dtype());
  cuda::copy_rows(b.stream(), static_cast<char*>(out.data()) + r.skip * item, r.ld * item, in.data(),
                  r.columns * item, r.rows, r.columns * item);
}

void slice_channels(Backend& backend, const Tensor& in, int channel_offset, const Tensor& out) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const ChannelRows r = channel_rows(in, out, channel_offset);
  const size_t item = dtype_size(in.dtype());
  cuda::copy_rows(b.stream(), out.data(), r.columns * item, static_cast<const char*>(in.data()) + r.skip * item,
                  r.ld * item, r.rows, r.columns * item);
}

NNGRAPH_KERNEL(CopyChannelsKernel, CUDA, copy_channels);
NNGRAPH_KERNEL(SliceChannelsKernel, CUDA, slice_channels);
NNGRAPH_CHANNELS_LAST(CopyChannelsKernel, CUDA);
NNGRAPH_CHANNELS_LAST(SliceChannelsKernel, CUDA);

}  // namespace
}  // namespace nngraph
