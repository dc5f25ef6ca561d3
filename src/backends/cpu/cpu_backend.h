#pragma once
#include <cstddef>
#include <cstdint>
#include <atomic>

#include "backends/backend.h"
#include "backends/cpu/thread_pool.h"

namespace nngraph {

// Host memory, our own threaded kernels, GEMM from OpenBLAS (single-threaded per call;
// we split the work ourselves so kernels and GEMMs share one pool).
class CpuBackend : public Backend {
 public:
  CpuBackend();
  Device device() const override { return Device(); }
  std::shared_ptr<Buffer> allocate(size_t bytes) override;
  void copy_from_host(void* dst, const void* src, size_t bytes) override;
  void fill_from_host(void* dst, size_t, const std::function<void(void*)>& fill) override { fill(dst); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  MemoryStats memory_stats() override { return {current_, peak_}; }
  void reset_peak_memory() override { peak_ = current_.load(); }
  void release(void* p, size_t bytes);

  void convert(const Image& in, const Image& out) override;
  void convolution(const ConvGeometry& g, const Image& in, const float* weights,
                   const float* bias, const NeuronDescriptor& neuron, const Image& out) override;
  void fully_connected(const Image& in, const float* weights, const float* bias,
                       const NeuronDescriptor& neuron, const Image& out, bool tf32) override;
  void pooling(PoolingMode mode, const PoolGeometry& g, const Image& in,
               const Image& out) override;
  void neuron(const NeuronDescriptor& neuron, const Image& in, const Image& out) override;
  void softmax(bool log, const Image& in, const Image& out) override;
  void add(const Image& a, const Image& b, const Image& out) override;
  void copy_channels(const Image& in, const Image& out, int channel_offset) override;
  void slice_channels(const Image& in, int channel_offset, const Image& out) override;
  void dropout(float keep, uint64_t seed, const uint64_t* step, const Image& in, const Image& out) override;
  void convolution_gradient(const ConvGeometry& g, const Image& x, const float* weights, const Image& dy,
                            const Image* y, const NeuronDescriptor& neuron, const Image* dx, float* dw,
                            float* db) override;
  void fully_connected_gradient(const Image& x, const float* weights, const Image& dy, const Image* y,
                                const NeuronDescriptor& neuron, const Image* dx, float* dw, float* db, bool tf32) override;
  void pooling_gradient(PoolingMode mode, const PoolGeometry& g, const Image& x, const Image& dy,
                        const Image& dx, const NeuronDescriptor& neuron) override;
  void neuron_gradient(const NeuronDescriptor& neuron, const Image& v, const Image& dy, const Image& dx) override;
  void softmax_gradient(bool log, const Image& y, const Image& dy, const Image& dx) override;
  void loss(const LossDescriptor& d, double scale, const Image& x, const Image& labels, const Image& weights,
            const Image& gradient, const Image& losses) override;
  void optimizer_step(const OptimizerStep& s, float* values, const float* gradient, const std::vector<float*>& slots,
                      size_t count) override;
  bool all_finite(const float* data, size_t count) override;
  void rnn_forward(const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s) override;
  void rnn_gradient(const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s,
                    const RNNLayerGradients& dw) override;
  void copy_rows(float* dst, int dst_ld, const float* src, int src_ld, int rows, int columns, bool add) override;
  void permute(const float* in, float* out, const int dims[3], const int perm[3]) override;

  ThreadPool& pool() { return pool_; }

 private:
  ThreadPool pool_;
  std::atomic<size_t> current_{0}, peak_{0};
};

CpuBackend& cpu_backend();

// Row-major C[M×N] = alpha·op(A)·op(B) + beta·C, split over the pool when `parallel`.
void gemm(ThreadPool* pool, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
          const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);

// x[i] = neuron(x[i] + bias) over `count` values (bias may be null).
void bias_neuron(float* x, size_t count, const float* bias, const NeuronDescriptor& neuron);
// dz[i] = dy[i] · neuron.derivative(v[i]).
void neuron_derivative(const float* dy, const float* v, float* dz, size_t count, const NeuronDescriptor& neuron);

}  // namespace nngraph
