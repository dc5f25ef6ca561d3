#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "backends/math.h"

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

namespace nngraph {

void CpuBackend::slice_channels(const Image& in, int channel_offset, const Image& out) {
  const size_t block = out.shape().count(), stride = in.shape().count();
  const size_t skip = static_cast<size_t>(channel_offset) * in.shape().h * in.shape().w;
  const float* src = in.data_as<float>();
  float* dst = out.data_as<float>();
  pool_.parallel_for(static_cast<size_t>(in.batch()), [&](size_t b, size_t e) {
    for (size_t n = b; n < e; ++n) std::copy(src + n * stride + skip, src + n * stride + skip + block, dst + n * block);
  });
}

void CpuBackend::dropout(float keep, uint64_t seed, const uint64_t* step, const Image& in, const Image& out) {
  const float* x = in.data_as<float>();
  float* y = out.data_as<float>();
  const uint64_t key = math::dropout_key(seed, *step);
  const float scale = 1.f / keep;
  pool_.parallel_for(in.descriptor().count(), [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) y[i] = math::dropout_keep(key, i, keep) ? x[i] * scale : 0.f;
  });
}

bool CpuBackend::all_finite(const float* data, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (!std::isfinite(data[i])) return false;
  return true;
}

}  // namespace nngraph
