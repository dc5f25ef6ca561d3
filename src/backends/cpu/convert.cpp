// Strided row copies and three-axis permutations, on the host.
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "ops/convert.h"

namespace nngraph {
namespace {

void copy_rows(Backend&, const Tensor& to, const Tensor& from, bool add) {
  float* dst = to.rows_as<float>();
  const float* src = from.rows_as<const float>();
  const int64_t dst_ld = to.strides()[0], src_ld = from.strides()[0];
  const int rows = to.batch(), columns = to.shape().c;
  for (int r = 0; r < rows; ++r) {
    float* d = dst + size_t(r) * dst_ld;
    const float* s = src + size_t(r) * src_ld;
    if (add)
      for (int c = 0; c < columns; ++c) d[c] += s[c];
    else
      std::memcpy(d, s, columns * sizeof(float));
  }
}

void permute(Backend&, const Tensor& from, const Tensor& to, const int* dims, const int* perm) {
  const float* in = from.data_as<const float>();
  float* out = to.data_as<float>();
  size_t stride[3] = {size_t(dims[1]) * dims[2], size_t(dims[2]), 1};
  const int o0 = dims[perm[0]], o1 = dims[perm[1]], o2 = dims[perm[2]];
  const size_t s0 = stride[perm[0]], s1 = stride[perm[1]], s2 = stride[perm[2]];
  for (int a = 0; a < o0; ++a)
    for (int b = 0; b < o1; ++b) {
      const float* src = in + a * s0 + b * s1;
      float* dst = out + (size_t(a) * o1 + b) * o2;
      for (int c = 0; c < o2; ++c) dst[c] = src[c * s2];
    }
}

NNGRAPH_KERNEL(CopyRowsKernel, CPU, copy_rows);
NNGRAPH_KERNEL(PermuteKernel, CPU, permute);

}  // namespace
}  // namespace nngraph
