// Dropout: the mask comes from backends/math.h, shared with every backend.
#include "backends/cpu/cpu_backend.h"
#include "backends/math.h"
#include "ops/dropout.h"

namespace nngraph {
namespace {

void dropout(Backend& backend, float keep, uint64_t seed, const uint64_t* step, const Tensor& in, const Tensor& out) {
  const float* x = in.data_as<const float>();
  float* y = out.data_as<float>();
  const uint64_t key = math::dropout_key(seed, *step);
  const float scale = 1.f / keep;
  pool_of(backend).parallel_for(in.count(), [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) y[i] = math::dropout_keep(key, i, keep) ? x[i] * scale : 0.f;
  });
}

NNGRAPH_KERNEL(DropoutKernel, CPU, dropout);

}  // namespace
}  // namespace nngraph
