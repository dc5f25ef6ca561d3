// Recurrent layers on the device: the shared sequence algorithm, its element phases as
// grid-stride kernels.
#include "backends/cuda/cuda_backend.h"
#include "backends/rnn_sequence.h"
#include "common.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

template <class I, class F>
__global__ void each_kernel(I count, unsigned cols, F f) {
  NNGRAPH_GRID_LOOP_T(I, i, count) f(i / cols, static_cast<int>(i % cols));
}

struct DeviceOps {
  const RNNDevice& d;
  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
            float beta, float* c, int ldc) {
    d.gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  template <class F>
  void each(size_t rows, int cols, F f) {
    const size_t count = rows * cols;
    with_index_type(count, [&](auto i) {
      each_kernel<<<blocks_for(count), kThreads, 0, d.stream>>>(decltype(i)(count), cols, f);
    });
    check_launch("rnn");
  }
  float* scratch(size_t floats) { return d.scratch(floats); }
  void fill(float* p, size_t count, float v) {
    each(count, 1, rnn::Fill{p, v, 1});
  }
  void copy(float* dst, const float* src, size_t count) {
    cuda_check(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, d.stream), "rnn");
  }
};

}  // namespace

void rnn_forward(const RNNDevice& d, const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s) {
  DeviceOps ops{d};
  rnn::forward(ops, g, w, s);
}

void rnn_gradient(const RNNDevice& d, const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s,
                  const RNNLayerGradients& dw) {
  DeviceOps ops{d};
  rnn::gradient(ops, g, w, s, dw);
}

}  // namespace nngraph::cuda
