#pragma once
// One NVIDIA GPU: a stream, cuDNN and cuBLAS handles bound to it, stream-ordered memory.
// Work is enqueued asynchronously; synchronize() waits for it. Calls from several threads
// are serialized (the library handles are not thread-safe).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/backend.h"
#include "kernels.cuh"

namespace nngraph {

// Failures become DeviceError (OutOfMemory for allocations) whose message names the op.
void cuda_check(cudaError_t e, const char* what);
void cudnn_check(cudnnStatus_t s, const char* what);
void cublas_check(cublasStatus_t s, const char* what);

// Strided-batched products: `count` of them, their matrices the given numbers of floats apart
// (0: one matrix for all).
struct GemmBatch {
  int count = 1;
  long long a = 0, b = 0, c = 0;
};

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(int index);
  ~CudaBackend() override;
  Device device() const override { return Device(DeviceType::CUDA, index_); }
  std::shared_ptr<Buffer> allocate(size_t bytes) override;
  void copy_from_host(void* dst, const void* src, size_t bytes) override;
  void fill_from_host(void* dst, size_t bytes, const std::function<void(void*)>& fill) override;
  std::shared_ptr<Buffer> upload(size_t bytes, const std::function<void(void*)>& fill) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void copy_all(const std::vector<Copy>& copies) override;
  void synchronize() override;
  bool asynchronous() const override { return true; }
  std::shared_ptr<Fence> fence() override;
  MemoryStats memory_stats() override;
  void reset_peak_memory() override;

  void convert(const Image& in, const Image& out) override;
  void convolution(const ConvGeometry& g, const Image& in, const float* weights, const float* bias,
                   const NeuronDescriptor& neuron, const Image& out) override;
  void fully_connected(const Image& in, const float* weights, const float* bias, const NeuronDescriptor& neuron,
                       const Image& out, bool tf32) override;
  void pooling(PoolingMode mode, const PoolGeometry& g, const Image& in, const Image& out) override;
  void neuron(const NeuronDescriptor& neuron, const Image& in, const Image& out) override;
  void softmax(bool log, const Image& in, const Image& out) override;
  void add(const Image& a, const Image& b, const Image& out) override;
  void copy_channels(const Image& in, const Image& out, int channel_offset) override;
  void slice_channels(const Image& in, int channel_offset, const Image& out) override;
  void dropout(float keep, uint64_t seed, const uint64_t* step, const Image& in, const Image& out) override;
  bool can_capture() const override { return true; }
  std::shared_ptr<void> capture(const std::function<void()>& work) override;
  void replay(const std::shared_ptr<void>& captured, const std::function<void()>& varying) override;
  void store(uint64_t* counter, uint64_t value) override;
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
  void optimizer_steps(const OptimizerStep& s, const std::vector<TensorUpdate>& tensors) override;
  bool all_finite(const float* data, size_t count) override;
  void rnn_forward(const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s) override;
  void rnn_gradient(const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s,
                    const RNNLayerGradients& dw) override;
  void copy_rows(float* dst, int dst_ld, const float* src, int src_ld, int rows, int columns, bool add) override;
  void permute(const float* in, float* out, const int dims[3], const int perm[3]) override;

  cudaStream_t stream() const { return stream_; }
  // Frees a buffer this backend allocated, in stream order (with what was kept for it).
  void release(void* p, size_t bytes);
  // A captured step's scratch buffer is done with (free_scratch).
  void release_scratch(void* p);
  // Runs `first` on the stream and `second` beside it on the lane, both after the work queued
  // before and before the work queued after (either may be empty), where each is short (at
  // most `work` multiply-adds) and the shared cuDNN workspace holds both works' (the bytes
  // each asks of it) at once. Only while a step is captured: an eager step times its
  // candidates, each alone on the device.
  void side_by_side(const std::function<void()>& first, const std::function<void()>& second, double work,
                    size_t first_workspace, size_t second_workspace);

 private:
  struct ConvPlan;
  struct Captured;
  // Where store, copy_all and optimizer_steps launch: the stream, redirected to step_kernel
  // while a step is captured or a replay re-points its launches.
  cuda::StepLaunch step_launch() const;
  void step_kernel(const void* kernel, dim3 grid, dim3 block, void** args);
  // Serializes callers and makes this GPU current on the calling thread.
  std::unique_lock<std::recursive_mutex> enter() const;
  ConvPlan& conv_plan(const ConvGeometry& g, int n, const ImageShape& in, const ImageShape& out);
  // Mean device milliseconds of what `work` enqueues, over a few runs after a warm-up one,
  // queued while the device is busy so that the host's launch overhead is not counted.
  float time_ms(const std::function<void()>& work);
  // The id of the candidate (an id and how it runs) with the least time_ms; the only one's, untimed.
  using Candidates = std::vector<std::pair<int, std::function<void()>>>;
  int quickest(const Candidates& candidates);
  // x as cuDNN reads it: itself, or where the plan pads explicitly a padded copy in *padded.
  const float* cudnn_input(const ConvPlan& p, const Image& x, std::shared_ptr<Buffer>* padded);
  // What allocate() returns while a step is captured: a block of the step's scratch, which
  // lives as long as the step (or a buffer made from it that outlives the step).
  std::shared_ptr<Buffer> capture_scratch(size_t bytes);
  // cudaMallocAsync on stream s (waited for where `wait`); OutOfMemory when the device is full.
  void* allocate_on(cudaStream_t s, size_t bytes, bool wait);
  void drop_scratch(const Captured* step);
  // Scratch for cuDNN: the shared buffer (a captured step keeps the one it points at), or
  // while capturing, where that is too small, the step's own.
  std::shared_ptr<Buffer> workspace(size_t bytes);
  // dz = dy ⊙ neuron'(y) in a scratch buffer (dy itself when there is no neuron) and, where
  // db is given, the bias gradient Σ dz per channel, in one pass over dy.
  const float* output_gradient(const Image& dy, const Image* y, const NeuronDescriptor& neuron, float* db,
                               std::shared_ptr<Buffer>* scratch);
  // Recurrent layers: cuDNN where it implements the cell (a plan per layer shape, null where
  // it does not), else the shared sequence algorithm with products and scratch from here.
  struct RNNPlan;
  RNNPlan* rnn_plan(const RNNLayerGeometry& g);
  // cuDNN's reserve space for a training state, kept from the forward pass to the gradient
  // pass and freed with the state's buffer; consumed once a gradient pass has used it.
  struct RNNReserve {
    std::shared_ptr<Buffer> buffer;
    bool consumed = false;
  };
  RNNReserve& rnn_reserve(const RNNPlan& p, const float* state, bool create);
  void cudnn_rnn_forward(const RNNLayerGeometry& g, const RNNPlan& p, const float* x, float* state, float* reserve);
  void rnn_generic_forward(const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s);
  void rnn_generic_gradient(const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s,
                            const RNNLayerGradients& dw);
  cuda::RNNDevice rnn_device(std::vector<std::shared_ptr<Buffer>>& scratch);
  // Row-major C = alpha·op(A)·op(B) + beta·C through column-major cuBLAS, batched or once;
  // single plain products (alpha 1, beta 0) where ours fit run whichever was quicker.
  void gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
            int ldc, bool tf32, float alpha = 1.f, float beta = 0.f, GemmBatch batch = {});
  // A convolution whose 1×k windows tile each row (g.tiles_rows), as products over a matrix
  // of the windows: cuDNN's general kernels are several times slower on such shapes.
  static bool windowed(const ConvGeometry& g, const ImageShape& in, const ImageShape& out) {
    return g.groups == 1 && g.kw > 1 && g.tiles_rows(in, out);
  }
  std::shared_ptr<Buffer> gather_windows(const ConvGeometry& g, const Image& x, const ImageShape& out);

  // Page-locked host memory every host transfer goes through (faster DMA, and the
  // caller's memory is free again when the call returns). Uploads rotate through a few
  // slots so they need not wait for the device; each slot's event says when it is free.
  struct Pinned {
    void* data = nullptr;
    size_t bytes = 0;
    cudaEvent_t done = nullptr;
  };
  Pinned& staging(size_t bytes);

  int index_;
  int multiprocessors_ = 1;
  std::array<Pinned, 4> pinned_{};
  size_t next_pinned_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaStream_t uploads_ = nullptr;  // copies into new buffers, beside the stream's work
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  mutable std::recursive_mutex mutex_;
  std::map<std::vector<int>, std::unique_ptr<ConvPlan>> conv_plans_;
  std::map<std::vector<int>, int> gemm_choices_;  // per product shape: undecided, cuBLAS or ours
  std::map<std::vector<int>, std::unique_ptr<RNNPlan>> rnn_plans_;
  std::map<const void*, RNNReserve> rnn_reserves_;  // by training state
  std::shared_ptr<Buffer> workspace_;
  struct Scratch {
    const Captured* step;  // null once the step is gone and a buffer still holds the block
    size_t bytes;
    bool busy;
  };
  std::map<void*, Scratch> scratch_;  // captured steps' scratch blocks by address
  cudaStream_t side_ = nullptr;       // where capture_scratch allocates
  // A second stream with its own library handles (made before the first capture), swapped in
  // for the stream's while side_by_side runs its second work, whose cuDNN scratch is the
  // shared workspace past the first work's part.
  struct Lane {
    cudaStream_t stream = nullptr;
    cublasHandle_t cublas = nullptr;
    cudnnHandle_t cudnn = nullptr;
    cudaEvent_t fork = nullptr, join = nullptr;
    std::shared_ptr<Buffer> workspace;  // a view into workspace_
  } lane_;
  bool on_lane_ = false;
  // Scratch freed while two works run side by side: the other may still read it on the device.
  std::vector<void*> parked_;
  bool beside_ = false;
  Captured* recording_ = nullptr;   // the step being captured (null: not capturing)
  Captured* repointing_ = nullptr;  // the step a replay re-points, and how many of its launches so far
  size_t repointed_ = 0;
  const cuda::Redirect redirect_ = [this](const void* k, dim3 grid, dim3 block, void** args) {
    step_kernel(k, grid, block, args);
  };
};

// cuDNN descriptors and the algorithms found for one convolution shape.
struct CudaBackend::ConvPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  // cuDNN's quickest algorithms by Find for each pass, the quickest first.
  std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd;
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bwd_data;
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bwd_filter;
  // What runs each pass: the index of one of those algorithms, our direct kernels or our
  // tensor-core products, the quickest of them on the first call that is not being captured
  // (until then the first).
  static constexpr int kUndecided = -1, kDirect = -2, kTensor = -3;
  int forward = kUndecided, input_gradient = kUndecided, weight_gradient = kUndecided;
  // cuDNN pads symmetrically; other paddings run on an explicitly zero-padded copy.
  bool padded = false;
  int pad_top = 0, pad_left = 0, hp = 0, wp = 0;
  ~ConvPlan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

// cuDNN descriptors and weight-space buffers for one recurrent layer shape; matrix and bias addresses
// (per cuDNN linear layer: inputs first, then recurrents) lie in `weights` and `gradients`.
struct CudaBackend::RNNPlan {
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnRNNDataDescriptor_t x = nullptr, y = nullptr;
  cudnnTensorDescriptor_t h = nullptr, m = nullptr, b = nullptr;
  size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  std::shared_ptr<Buffer> weights, gradients, lengths;
  std::array<float*, 8> matrix{}, bias{}, d_matrix{}, d_bias{};
  ~RNNPlan() {
    if (rnn) cudnnDestroyRNNDescriptor(rnn);
    if (x) cudnnDestroyRNNDataDescriptor(x);
    if (y) cudnnDestroyRNNDataDescriptor(y);
    if (h) cudnnDestroyTensorDescriptor(h);
    if (m) cudnnDestroyTensorDescriptor(m);
    if (b) cudnnDestroyTensorDescriptor(b);
  }
};

// The backend of GPU `index`, made on first use; DeviceError when there is no such GPU.
CudaBackend& cuda_backend(int index);
int cuda_device_count();

}  // namespace nngraph
