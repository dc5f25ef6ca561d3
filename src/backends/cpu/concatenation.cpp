// Concatenation: rows of channels to or from an offset in the whole (channel_rows).
#include <algorithm>

#include "backends/cpu/cpu_backend.h"
#include "ops/concatenation.h"

namespace nngraph {
namespace {

// dst[r·dst_ld + c] = src[r·src_ld + c] for r.rows rows of r.columns values.
void copy_rows(Backend& backend, const ChannelRows& r, float* dst, size_t dst_ld, const float* src, size_t src_ld) {
  pool_of(backend).parallel_for(r.rows, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) std::copy_n(src + i * src_ld, r.columns, dst + i * dst_ld);
  });
}

void copy_channels(Backend& backend, const Tensor& in, const Tensor& out, int channel_offset) {
  const ChannelRows r = channel_rows(out, in, channel_offset);
  copy_rows(backend, r, out.view_as<float>() + r.skip, r.ld, in.dense_as<const float>(), r.columns);
}

void slice_channels(Backend& backend, const Tensor& in, int channel_offset, const Tensor& out) {
  const ChannelRows r = channel_rows(in, out, channel_offset);
  copy_rows(backend, r, out.dense_as<float>(), r.columns, in.view_as<const float>() + r.skip, r.ld);
}

NNGRAPH_KERNEL(CopyChannelsKernel, CPU, copy_channels);
NNGRAPH_KERNEL(SliceChannelsKernel, CPU, slice_channels);
NNGRAPH_CHANNELS_LAST(CopyChannelsKernel, CPU);
NNGRAPH_CHANNELS_LAST(SliceChannelsKernel, CPU);

}  // namespace
}  // namespace nngraph
