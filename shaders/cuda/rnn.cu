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

__global__ void add_rows_kernel(float* dst, int dst_ld, const float* src, int src_ld, int columns, size_t total) {
  NNGRAPH_GRID_LOOP(i, total) {
    const size_t r = i / columns, c = i % columns;
    dst[r * dst_ld + c] += src[r * src_ld + c];
  }
}

__global__ void permute_kernel(const float* in, float* out, int o1, int o2, size_t s0, size_t s1, size_t s2,
                               size_t total) {
  NNGRAPH_GRID_LOOP(i, total) {
    const size_t c = i % o2, b = (i / o2) % o1, a = i / (size_t(o2) * o1);
    out[i] = in[a * s0 + b * s1 + c * s2];
  }
}

struct Blocks {
  Block b[16];
};

__global__ void copy_blocks_kernel(Blocks blocks) {
  const Block& b = blocks.b[blockIdx.y];
  const size_t total = size_t(b.rows) * b.cols;
  if (b.rows == 1) {  // a plain span: no division per element
    NNGRAPH_GRID_LOOP(i, total) b.dst[i] = b.src ? b.src[i] : 0.f;
    return;
  }
  NNGRAPH_GRID_LOOP(i, total) {
    const size_t r = i / b.cols, c = i % b.cols;
    b.dst[r * b.dst_ld + c] = b.src ? b.src[r * b.src_ld + c] : 0.f;
  }
}

}  // namespace

void copy_blocks(const StepLaunch& l, const std::vector<Block>& blocks) {
  if (blocks.empty()) return;
  Blocks table{};
  size_t most = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    table.b[i] = blocks.at(i);
    most = std::max(most, size_t(blocks[i].rows) * blocks[i].cols);
  }
  launch_step(l, copy_blocks_kernel, dim3(blocks_for(most), static_cast<unsigned>(blocks.size())), kThreads, table);
  check_launch("copy");
}

void rnn_forward(const RNNDevice& d, const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s) {
  DeviceOps ops{d};
  rnn::forward(ops, g, w, s);
}

void rnn_gradient(const RNNDevice& d, const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s,
                  const RNNLayerGradients& dw) {
  DeviceOps ops{d};
  rnn::gradient(ops, g, w, s, dw);
}

void add_rows(cudaStream_t s, float* dst, int dst_ld, const float* src, int src_ld, int rows, int columns) {
  const size_t total = size_t(rows) * columns;
  add_rows_kernel<<<blocks_for(total), kThreads, 0, s>>>(dst, dst_ld, src, src_ld, columns, total);
  check_launch("copy_rows");
}

void permute(cudaStream_t s, const float* in, float* out, const int dims[3], const int perm[3]) {
  const size_t stride[3] = {size_t(dims[1]) * dims[2], size_t(dims[2]), 1};
  const size_t total = size_t(dims[0]) * dims[1] * dims[2];
  permute_kernel<<<blocks_for(total), kThreads, 0, s>>>(in, out, dims[perm[1]], dims[perm[2]], stride[perm[0]],
                                                        stride[perm[1]], stride[perm[2]], total);
  check_launch("permute");
}

}  // namespace nngraph::cuda
