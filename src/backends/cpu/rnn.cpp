// Recurrent layers, copies between layouts: the shared sequence algorithm over OpenBLAS and
// the thread pool.
#include <cstring>
#include <list>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/rnn_sequence.h"

namespace nngraph {
namespace {

struct CpuOps {
  ThreadPool& pool;
  std::list<std::vector<float>> buffers;

  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
            float beta, float* c, int ldc) {
    nngraph::gemm(&pool, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  // Rows split over the threads when there are enough elements; ivdep because the functors'
  // stores never feed a later column of the same row.
  template <class F>
  void each(size_t rows, int cols, F f) {
    auto run = [&](size_t b, size_t e) {
      for (size_t r = b; r < e; ++r) {
#pragma GCC ivdep
        for (int j = 0; j < cols; ++j) f(r, j);
      }
    };
    if (rows * cols < 16384)
      run(0, rows);
    else
      pool.parallel_for(rows, run);
  }
  float* scratch(size_t floats) { return buffers.emplace_back(floats).data(); }
  void fill(float* p, size_t count, float v) { std::fill(p, p + count, v); }
  void copy(float* dst, const float* src, size_t count) { std::memcpy(dst, src, count * sizeof(float)); }
};

}  // namespace

void CpuBackend::rnn_forward(const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s) {
  CpuOps ops{pool_, {}};
  rnn::forward(ops, g, w, s);
}

void CpuBackend::rnn_gradient(const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s,
                              const RNNLayerGradients& dw) {
  CpuOps ops{pool_, {}};
  rnn::gradient(ops, g, w, s, dw);
}

void CpuBackend::copy_rows(float* dst, int dst_ld, const float* src, int src_ld, int rows, int columns, bool add) {
  for (int r = 0; r < rows; ++r) {
    float* d = dst + size_t(r) * dst_ld;
    const float* s = src + size_t(r) * src_ld;
    if (add)
      for (int c = 0; c < columns; ++c) d[c] += s[c];
    else
      std::memcpy(d, s, columns * sizeof(float));
  }
}

void CpuBackend::permute(const float* in, float* out, const int dims[3], const int perm[3]) {
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

}  // namespace nngraph
