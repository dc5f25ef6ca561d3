// Recurrent layers: the shared sequence algorithm over OpenBLAS and the thread pool.
#include <cstring>
#include <list>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/rnn_sequence.h"
#include "ops/rnn.h"

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

void rnn_forward(Backend& backend, const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s) {
  g.require_float32();
  CpuOps ops{pool_of(backend), {}};
  rnn::forward(ops, g, w, s);
}

void rnn_gradient(Backend& backend, const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s,
                  const RNNLayerGradients& dw) {
  g.require_float32();
  CpuOps ops{pool_of(backend), {}};
  rnn::gradient(ops, g, w, s, dw);
}

NNGRAPH_KERNEL(RNNForwardKernel, CPU, rnn_forward);
NNGRAPH_KERNEL(RNNGradientKernel, CPU, rnn_gradient);

}  // namespace
}  // namespace nngraph
