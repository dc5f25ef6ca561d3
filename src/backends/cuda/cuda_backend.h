#pragma once
// One NVIDIA GPU: a stream, cuDNN and cuBLAS handles bound to it, stream-ordered memory.
// Work is enqueued asynchronously; synchronize() waits for it. Calls from several threads
// are serialized (the library handles are not thread-safe).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <typeindex>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/handles.h"
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

// The point an event recorded on the stream marks.
struct CudaFence : Fence {
  cuda::Event event;
  bool reached() override;
  void wait() override;
};

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(int index);
  Device device() const override { return Device(DeviceType::CUDA, index_); }
  std::shared_ptr<Buffer> allocate(size_t bytes) override;
  void copy_from_host(void* dst, const void* src, size_t bytes) override;
  void fill_from_host(void* dst, size_t bytes, const std::function<void(void*)>& fill) override;
  std::shared_ptr<Buffer> upload(size_t bytes, const std::function<void(void*)>& fill) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void copy_to_host_after(const std::shared_ptr<Fence>& ready, void* dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void copy_all(const std::vector<Copy>& copies) override;
  void synchronize() override;
  bool asynchronous() const override { return true; }
  std::shared_ptr<Fence> fence() override;
  MemoryStats memory_stats() override;
  void reset_peak_memory() override;

  bool can_capture() const override { return true; }
  // Tensor-core images channels-last: cuDNN's tensor-core convolutions read NHWC without
  // transposing; its exact float32 ones are several times slower in NHWC than in NCHW.
  Layout layout_for(DType storage, bool tf32) const override {
    return storage == DType::Float32 && !tf32 ? Layout::NCHW : Layout::NHWC;
  }
  std::shared_ptr<void> capture(const std::function<void()>& work) override;
  void replay(const std::shared_ptr<void>& captured, const std::function<void()>& varying) override;
  void store(uint64_t* counter, uint64_t value) override;
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

  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  int multiprocessors() const { return multiprocessors_; }
  // Whether a step is being captured: what runs now is recorded, not run (nothing to time).
  bool capturing() const { return recording_ != nullptr; }
  // Serializes callers and makes this GPU current on the calling thread: every kernel holds it.
  std::unique_lock<std::recursive_mutex> enter() const;
  // Where store, copy_all and the optimizer launch: the stream, redirected to step_kernel
  // while a step is captured or a replay re-points its launches.
  cuda::StepLaunch step_launch() const;
  // Scratch for cuDNN: the shared buffer (a captured step keeps the one it points at), or
  // while capturing, where that is too small, the step's own.
  std::shared_ptr<Buffer> workspace(size_t bytes);
  // The id of the candidate (an id and how it runs) with the least device time; the only one's,
  // untimed. With NNGRAPH_TUNING_LOG=1 set, each timing prints a line to stderr: `what`, every
  // candidate's name (`name` of its id) and least time, and the choice.
  using Candidates = std::vector<std::pair<int, std::function<void()>>>;
  int quickest(const Candidates& candidates, const std::string& what,
               const std::function<std::string(int)>& name);
  // Row-major C = alpha·op(A)·op(B) + beta·C through column-major cuBLAS, batched or once;
  // single plain products (alpha 1, beta 0) run whichever of cuBLAS's default, cuBLASLt's
  // algorithms and ours (where they fit) was quickest.
  void gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
            int ldc, bool tf32, float alpha = 1.f, float beta = 0.f, GemmBatch batch = {});
  // Tests: every plain product from now on runs candidate `id` where it has one (1 cuBLAS's
  // default, 2 and 3 ours, 4 + i cuBLASLt's i-th algorithm), untimed; -1 returns to the
  // quickest. forced_runs() counts the products that ran it.
  void force_product(int id) { forced_ = {id, 0}; }
  int forced_runs() const { return forced_.runs; }
  // The same product of operands of dtype `t`: float32 as above, half ones on tensor cores
  // through cuBLAS, accumulated in float32 (tf32 then has no say), or float16 ones in float16
  // where `half`.
  void gemm(DType t, bool ta, bool tb, int m, int n, int k, const void* a, int lda, const void* b, int ldb, void* c,
            int ldc, bool tf32, float alpha = 1.f, float beta = 0.f, GemmBatch batch = {}, bool half = false);

  // What an op keeps per GPU (cuDNN plans, algorithm choices), made on first use and kept as
  // long as the backend. released() hears of every buffer freed, for state tied to one.
  struct OpState {
    virtual ~OpState() = default;
    virtual void released(const char* begin, const char* end) {
      (void)begin;
      (void)end;
    }
  };
  template <class T>
  T& op_state() {
    auto& slot = op_states_[std::type_index(typeid(T))];
    if (!slot) slot = std::make_unique<T>();
    return static_cast<T&>(*slot);
  }

 private:
  struct Captured;
  // Buffer deleters: a buffer of ours (freed in stream order), a block of a captured step's
  // scratch, and a view whose buffer frees the memory.
  static void free_device(void* p, size_t bytes, const Device& d);
  static void free_scratch(void* p, size_t bytes, const Device& d);
  static void keep_memory(void*, size_t, const Device&) {}
  void step_kernel(const void* kernel, dim3 grid, dim3 block, void** args);
  // A row-major product as the gemm overloads take it (cublasGemmEx's operands and scalars);
  // `plain`: alpha 1 and beta 0.
  struct Product {
    cublasOperation_t oa, ob;
    int m, n, k;
    const void* a;
    int lda;
    const void* b;
    int ldb;
    void* c;
    int ldc;
    cudaDataType type;
    cublasComputeType_t compute;
    const void *alpha, *beta;
    GemmBatch batch;
    bool plain;
  };
  // One product shape's candidate chosen (0 undecided) and cuBLASLt's description of it with
  // its heuristics' first algorithms (none where NNGRAPH_CUBLASLT=0).
  struct TunedProduct {
    int choice = 0;
    cuda::LtMatmul desc;
    cuda::LtLayout a, b, c;
    std::vector<cublasLtMatmulHeuristicResult_t> algorithms;
  };
  TunedProduct describe(const Product& p);
  // Runs p through whichever of cublasGemmEx's default, cuBLASLt's algorithms and `ours` was
  // quickest on its shape and alignment (timed once, `what` naming it in the tuning log);
  // batched or scaled products through cublasGemmEx alone.
  void product(const Product& p, const Candidates& ours, const std::function<std::string()>& what);
  // Mean device milliseconds of what `work` enqueues, over a few runs after a warm-up one,
  // queued while the device is busy so that the host's launch overhead is not counted.
  float time_ms(const std::function<void()>& work);
  // What allocate() returns while a step is captured: a block of the step's scratch, which
  // lives as long as the step (or a buffer made from it that outlives the step).
  std::shared_ptr<Buffer> capture_scratch(size_t bytes);
  // cudaMallocAsync on stream s (waited for where `wait`); OutOfMemory when the device is full.
  void* allocate_on(cudaStream_t s, size_t bytes, bool wait);
  void drop_scratch(const Captured* step);

  // Page-locked host memory every host transfer goes through (faster DMA, and the
  // caller's memory is free again when the call returns). Uploads rotate through a few
  // slots so they need not wait for the device; each slot's event says when it is free.
  // upload() fills its slot and copy_to_host_after() reads its own without the lock
  // (`filling`), which the rotation skips; a slot is added when every one is in such use.
  struct Pinned {
    cuda::HostMemory data;
    size_t bytes = 0;
    cuda::Event done;
    bool filling = false;
  };
  Pinned& staging(size_t bytes);

  int index_;
  int multiprocessors_ = 1;
  // Streams before the handles bound to them, so the handles go first.
  cuda::Stream stream_;
  cuda::Stream uploads_;  // copies into new buffers, beside the stream's work
  cuda::Stream downloads_;  // copies of finished results, beside the later steps
  cuda::Stream side_;     // where capture_scratch allocates
  cuda::Cublas cublas_;
  cuda::Cudnn cudnn_;
  std::deque<Pinned> pinned_ = std::deque<Pinned>(4);  // references stay valid as it grows
  size_t next_pinned_ = 0;
  mutable std::recursive_mutex mutex_;
  cuda::CublasLt lt_;  // made with the first product
  std::map<std::vector<int>, TunedProduct> products_;  // by shape, types and operands' alignment
  struct {
    int id, runs;
  } forced_{-1, 0};
  std::map<std::type_index, std::unique_ptr<OpState>> op_states_;
  std::shared_ptr<Buffer> workspace_;
  struct Scratch {
    const Captured* step;  // null once the step is gone and a buffer still holds the block
    size_t bytes;
    bool busy;
  };
  std::map<void*, Scratch> scratch_;  // captured steps' scratch blocks by address
  // A second stream with its own library handles (made before the first capture), swapped in
  // for the stream's while side_by_side runs its second work, whose cuDNN scratch is the
  // shared workspace past the first work's part.
  struct Lane {
    cuda::Stream stream;
    cuda::Cublas cublas;
    cuda::Cudnn cudnn;
    cuda::Event fork, join;
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

// A captured step: its graph (a replay names nodes by it), the executable, the kernel nodes
// of its varying launches with their kernels in the order they were made, and what it points
// at besides its scratch (scratch_).
struct CudaBackend::Captured {
  explicit Captured(CudaBackend* b) : backend(b) {}
  Captured(const Captured&) = delete;
  CudaBackend* backend;  // whose scratch it uses
  cuda::Graph graph;
  cuda::GraphExec exec;
  std::vector<std::pair<cudaGraphNode_t, const void*>> varying;
  std::vector<std::shared_ptr<Buffer>> kept;  // shared buffers it uses
  ~Captured() { backend->drop_scratch(this); }
};

// The backend of GPU `index`, made on first use; DeviceError when there is no such GPU.
CudaBackend& cuda_backend(int index);
// The backend a cuda kernel was given.
inline CudaBackend& cuda_of(Backend& b) { return static_cast<CudaBackend&>(b); }
int cuda_device_count();

}  // namespace nngraph
