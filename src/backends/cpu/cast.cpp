// Casts between storage types and the finite check, on the host.
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "ops/cast.h"

namespace nngraph {
namespace {

void cast(Backend&, const Tensor& in, const Tensor& out) {
  convert_host(in.data(), in.dtype(), out.data(), out.dtype(), in.count());
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
