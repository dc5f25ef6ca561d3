// Casts between storage types and the finite check, on the host.
#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "ops/cast.h"

namespace nngraph {
namespace {

// dst = src with its two inner axes swapped, per image: n × a × b into n × b × a.
template <class E>
void swap_axes(const E* src, E* dst, size_t n, size_t a, size_t b) {
  for (size_t i = 0; i < n; ++i, src += a * b, dst += a * b)
    for (size_t r = 0; r < a; ++r)
      for (size_t c = 0; c < b; ++c) dst[c * a + r] = src[r * b + c];
}

void cast(Backend&, const Tensor& in, const Tensor& out) {
  if (in.layout() == out.layout()) return convert_host(in.data(), in.dtype(), out.data(), out.dtype(), in.count());
  // Permuted in the source dtype, then cast.
  std::vector<char> permuted(in.bytes());
  const size_t c = in.shape().c, hw = static_cast<size_t>(in.shape().h) * in.shape().w;
  const size_t a = in.layout() == Layout::NCHW ? c : hw, b = in.layout() == Layout::NCHW ? hw : c;
  if (dtype_size(in.dtype()) == 4)
    swap_axes(static_cast<const uint32_t*>(in.data()), reinterpret_cast<uint32_t*>(permuted.data()), in.batch(), a, b);
  else
    swap_axes(static_cast<const uint16_t*>(in.data()), reinterpret_cast<uint16_t*>(permuted.data()), in.batch(), a, b);
  convert_host(permuted.data(), in.dtype(), out.data(), out.dtype(), in.count());
}

bool all_finite(Backend&, const Tensor& x) {
  const float* data = x.data_as<const float>();
  for (size_t i = 0; i < x.count(); ++i)
    if (!std::isfinite(data[i])) return false;
  return true;
}

NNGRAPH_KERNEL(CastKernel, CPU, cast);
NNGRAPH_KERNEL(AllFiniteKernel, CPU, all_finite);

}  // namespace
}  // namespace nngraph
