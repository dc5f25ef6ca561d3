// Concatenation: per image, one block of channels to or from an offset.
#include <algorithm>

#include "backends/cpu/cpu_backend.h"
#include "ops/concatenation.h"

namespace nngraph {
namespace {

void copy_channels(Backend& backend, const Tensor& in, const Tensor& out, int channel_offset) {
  const size_t block = in.shape().count();
  const size_t stride = out.shape().count();
  const size_t skip = static_cast<size_t>(channel_offset) * out.shape().h * out.shape().w;
  const float* src = in.data_as<const float>();
  float* dst = out.data_as<float>();
  pool_of(backend).parallel_for(static_cast<size_t>(in.batch()), [&](size_t b, size_t e) {
    for (size_t n = b; n < e; ++n) std::copy(src + n * block, src + (n + 1) * block, dst + n * stride + skip);
  });
}

void slice_channels(Backend& backend, const Tensor& in, int channel_offset, const Tensor& out) {
  const size_t block = out.shape().count(), stride = in.shape().count();
  const size_t skip = static_cast<size_t>(channel_offset) * in.shape().h * in.shape().w;
  const float* src = in.data_as<const float>();
  float* dst = out.data_as<float>();
  pool_of(backend).parallel_for(static_cast<size_t>(in.batch()), [&](size_t b, size_t e) {
    for (size_t n = b; n < e; ++n) std::copy(src + n * stride + skip, src + n * stride + skip + block, dst + n * block);
  });
}

NNGRAPH_KERNEL(CopyChannelsKernel, CPU, copy_channels);
NNGRAPH_KERNEL(SliceChannelsKernel, CPU, slice_channels);

}  // namespace
}  // namespace nngraph
