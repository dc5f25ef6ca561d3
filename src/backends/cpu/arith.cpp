#include <algorithm>

#include "backends/cpu/cpu_backend.h"

namespace nngraph {

void CpuBackend::add(const Image& a, const Image& b, const Image& out) {
  const float* x = a.data_as<float>();
  const float* y = b.data_as<float>();
  float* z = out.data_as<float>();
  pool_.parallel_for(out.descriptor().count(), [&](size_t s, size_t e) {
    for (size_t i = s; i < e; ++i) z[i] = x[i] + y[i];
  });
}

void CpuBackend::copy_channels(const Image& in, const Image& out, int channel_offset) {
  const size_t block = in.shape().count();
  const size_t stride = out.shape().count();
  const size_t skip = static_cast<size_t>(channel_offset) * out.shape().h * out.shape().w;
  const float* src = in.data_as<float>();
  float* dst = out.data_as<float>();
  pool_.parallel_for(static_cast<size_t>(in.batch()), [&](size_t b, size_t e) {
    for (size_t n = b; n < e; ++n) std::copy(src + n * block, src + (n + 1) * block, dst + n * stride + skip);
  });
}

}  // namespace nngraph
