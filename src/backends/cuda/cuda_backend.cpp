#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "kernels.cuh"
#include "nngraph/error.h"

namespace nngraph {

void cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear the sticky-free error so the device stays usable
  if (e == cudaErrorMemoryAllocation) fail<OutOfMemory>("[", what, "] out of GPU memory: ", cudaGetErrorString(e));
  fail<DeviceError>("[", what, "] CUDA error: ", cudaGetErrorString(e));
}

void cudnn_check(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  if (s == CUDNN_STATUS_ALLOC_FAILED) fail<OutOfMemory>("[", what, "] cuDNN: ", cudnnGetErrorString(s));
  fail<DeviceError>("[", what, "] cuDNN error: ", cudnnGetErrorString(s));
}

void cublas_check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  if (s == CUBLAS_STATUS_ALLOC_FAILED) fail<OutOfMemory>("[", what, "] cuBLAS: ", cublasGetStatusString(s));
  fail<DeviceError>("[", what, "] cuBLAS error: ", cublasGetStatusString(s));
}

namespace cuda {
void check_launch(const char* what) { cuda_check(cudaGetLastError(), what); }
}  // namespace cuda

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

CudaBackend& cuda_backend(int index) {
  static std::mutex mutex;
  // Never destroyed: buffers may be freed while the process exits, after static destructors.
  static auto& backends = *new std::array<std::unique_ptr<CudaBackend>, 64>();
  std::lock_guard<std::mutex> lock(mutex);  // every buffer free comes here: count devices once
  if (index >= 0 && index < static_cast<int>(backends.size()) && backends[index]) return *backends[index];
  const int count = cuda_device_count();
  if (index >= count || index >= static_cast<int>(backends.size()))
    fail<DeviceError>("[device] cuda:", index, " is not present (", count, " CUDA device(s) found)");
  backends[index] = std::make_unique<CudaBackend>(index);
  return *backends[index];
}

CudaBackend::CudaBackend(int index) : index_(index) {
  cuda_check(cudaSetDevice(index), "device");
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "device");
  cuda_check(cudaStreamCreateWithFlags(&uploads_, cudaStreamNonBlocking), "device");
  cuda_check(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, index), "device");
  // Keep freed blocks in the pool: graphs allocate the same sizes every step.
  cudaMemPool_t pool;
  cuda_check(cudaDeviceGetDefaultMemPool(&pool, index), "device");
  uint64_t keep = UINT64_MAX;
  cuda_check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "device");
  cublas_check(cublasCreate(&cublas_), "device");
  cublas_check(cublasSetStream(cublas_, stream_), "device");
  cudnn_check(cudnnCreate(&cudnn_), "device");
  cudnn_check(cudnnSetStream(cudnn_, stream_), "device");
}

CudaBackend::~CudaBackend() {
  // Process exit: the driver may already be shutting down, so errors are ignored here.
  for (cudnnHandle_t h : {cudnn_, lane_.cudnn})
    if (h) cudnnDestroy(h);
  for (cublasHandle_t h : {cublas_, lane_.cublas})
    if (h) cublasDestroy(h);
  for (cudaEvent_t e : {lane_.fork, lane_.join})
    if (e) cudaEventDestroy(e);
  if (lane_.stream) cudaStreamDestroy(lane_.stream);
  for (auto& p : pinned_) {
    if (p.data) cudaFreeHost(p.data);
    if (p.done) cudaEventDestroy(p.done);
  }
  if (side_) cudaStreamDestroy(side_);
  if (uploads_) cudaStreamDestroy(uploads_);
  if (stream_) cudaStreamDestroy(stream_);
}

std::unique_lock<std::recursive_mutex> CudaBackend::enter() const {
  std::unique_lock<std::recursive_mutex> lock(mutex_);
  thread_local int current = -1;
  if (current != index_) {
    cuda_check(cudaSetDevice(index_), "device");
    current = index_;
  }
  return lock;
}

namespace {
void free_device(void* p, size_t bytes, const Device& d) { cuda_backend(d.index()).release(p, bytes); }
void free_scratch(void* p, size_t, const Device& d) { cuda_backend(d.index()).release_scratch(p); }
void keep_memory(void*, size_t, const Device&) {}  // a view: its buffer frees the memory
}  // namespace

void CudaBackend::release(void* p, size_t bytes) {
  auto lock = enter();
  const char* begin = static_cast<const char*>(p);
  for (auto& [type, state] : op_states_) state->released(begin, begin + bytes);
  cudaFreeAsync(p, stream_);  // stream-ordered: after every kernel already queued on it
}

// A captured step: its graph (a replay names nodes by it), the executable, the kernel nodes
// of its varying launches with their kernels in the order they were made, and what it points
// at besides its scratch (scratch_).
struct CudaBackend::Captured {
  explicit Captured(CudaBackend* b) : backend(b) {}
  Captured(const Captured&) = delete;
  CudaBackend* backend;  // whose scratch it uses
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<std::pair<cudaGraphNode_t, const void*>> varying;
  std::vector<std::shared_ptr<Buffer>> kept;  // shared buffers it uses
  ~Captured() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    backend->drop_scratch(this);
  }
};

void* CudaBackend::allocate_on(cudaStream_t s, size_t bytes, bool wait) {
  void* p = nullptr;
  cudaError_t e = cudaMallocAsync(&p, bytes ? bytes : 1, s);
  if (e == cudaSuccess && wait) e = cudaStreamSynchronize(s);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    fail<OutOfMemory>("[", device().str(), "] out of GPU memory allocating ", bytes, " bytes");
  }
  cuda_check(e, "allocate");
  return p;
}

std::shared_ptr<Buffer> CudaBackend::allocate(size_t bytes) {
  auto lock = enter();
  if (recording_) return capture_scratch(bytes);
  return std::make_shared<Buffer>(allocate_on(stream_, bytes, false), bytes, device(), &free_device);
}

// Allocated outside the capture, on a side stream and waited for: allocation nodes would hold
// the scratch in CUDA's graph memory, apart from the pool of every other buffer. Best fit
// among the blocks the step's work has freed (the stream runs the step's work in order).
std::shared_ptr<Buffer> CudaBackend::capture_scratch(size_t bytes) {
  auto best = scratch_.end();
  for (auto i = scratch_.begin(); i != scratch_.end(); ++i) {
    const Scratch& s = i->second;
    if (s.step == recording_ && !s.busy && s.bytes >= bytes && (best == scratch_.end() || s.bytes < best->second.bytes))
      best = i;
  }
  if (best == scratch_.end()) {
    if (!side_) cuda_check(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), "capture");
    struct Relaxed {  // this thread may allocate while capturing, until the block is made
      cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
      Relaxed() { cuda_check(cudaThreadExchangeStreamCaptureMode(&mode), "capture"); }
      ~Relaxed() { cudaThreadExchangeStreamCaptureMode(&mode); }
    };
    void* p = nullptr;
    {
      Relaxed relaxed;
      p = allocate_on(side_, bytes, true);
    }
    best = scratch_.emplace(p, Scratch{recording_, bytes, false}).first;
  }
  best->second.busy = true;
  return std::make_shared<Buffer>(best->first, bytes, device(), &free_scratch);
}

void CudaBackend::release_scratch(void* p) {
  auto lock = enter();
  const auto it = scratch_.find(p);
  if (it == scratch_.end()) return;
  if (it->second.step) {
    // The step's later work may reuse it (after both side-by-side works); its memory goes with the step.
    if (beside_)
      parked_.push_back(p);
    else
      it->second.busy = false;
    return;
  }
  cudaFreeAsync(p, stream_);  // outlived its step
  scratch_.erase(it);
}

void CudaBackend::drop_scratch(const Captured* step) {
  auto lock = enter();
  for (auto i = scratch_.begin(); i != scratch_.end();) {
    if (i->second.step != step) {
      ++i;
    } else if (i->second.busy) {
      (i++)->second.step = nullptr;  // still held: freed with its buffer
    } else {
      cudaFreeAsync(i->first, stream_);  // after the step's queued launches
      i = scratch_.erase(i);
    }
  }
}

CudaBackend::Pinned& CudaBackend::staging(size_t bytes) {
  Pinned& p = pinned_[next_pinned_];
  next_pinned_ = (next_pinned_ + 1) % pinned_.size();
  if (!p.done) cuda_check(cudaEventCreateWithFlags(&p.done, cudaEventDisableTiming), "staging");
  cuda_check(cudaEventSynchronize(p.done), "staging");  // the slot's last transfer has finished
  if (bytes > p.bytes) {
    if (p.data) cudaFreeHost(p.data);
    p.data = nullptr;
    p.bytes = 0;
    cuda_check(cudaHostAlloc(&p.data, bytes, cudaHostAllocDefault), "staging");
    p.bytes = bytes;
  }
  return p;
}

// Returns once the bytes are in pinned memory; the copy itself runs in stream order.
void CudaBackend::copy_from_host(void* dst, const void* src, size_t bytes) {
  fill_from_host(dst, bytes, [&](void* staged) { std::memcpy(staged, src, bytes); });
}

void CudaBackend::fill_from_host(void* dst, size_t bytes, const std::function<void(void*)>& fill) {
  if (!bytes) return;
  auto lock = enter();
  Pinned& p = staging(bytes);
  fill(p.data);
  cuda_check(cudaMemcpyAsync(dst, p.data, bytes, cudaMemcpyHostToDevice, stream_), "copy to device");
  cuda_check(cudaEventRecord(p.done, stream_), "copy to device");
}

// On their own stream, so that a batch's copy overlaps the steps still queued; the stream waits
// for it. The buffer comes from the pool in the upload stream's order: a block whose free is
// still queued behind those steps is not handed out here.
std::shared_ptr<Buffer> CudaBackend::upload(size_t bytes, const std::function<void(void*)>& fill) {
  auto lock = enter();
  if (recording_) return Backend::upload(bytes, fill);
  auto buffer = std::make_shared<Buffer>(allocate_on(uploads_, bytes, false), bytes, device(), &free_device);
  if (!bytes) return buffer;
  Pinned& p = staging(bytes);
  fill(p.data);
  cuda_check(cudaMemcpyAsync(buffer->data(), p.data, bytes, cudaMemcpyHostToDevice, uploads_), "copy to device");
  cuda_check(cudaEventRecord(p.done, uploads_), "copy to device");
  cuda_check(cudaStreamWaitEvent(stream_, p.done), "copy to device");
  return buffer;
}

void CudaBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  auto lock = enter();
  Pinned& p = staging(bytes);
  cuda_check(cudaMemcpyAsync(p.data, src, bytes, cudaMemcpyDeviceToHost, stream_), "copy to host");
  cuda_check(cudaStreamSynchronize(stream_), "copy to host");
  std::memcpy(dst, p.data, bytes);
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  if (dst == src || bytes == 0) return;
  auto lock = enter();
  cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "copy");
}

// Float-sized copies go in one launch: each separate copy costs the step a launch and a gap.
// A captured step's copies are always that launch (re-pointed from step to step), even none.
void CudaBackend::copy_all(const std::vector<Copy>& copies) {
  constexpr size_t kMost = 16;  // copy_blocks' table
  const bool floats = std::all_of(copies.begin(), copies.end(), [](const Copy& c) {
    return c.bytes % sizeof(float) == 0 && c.bytes / sizeof(float) <= 0x7fffffffu;
  });
  auto lock = enter();
  const bool step = recording_ || repointing_;
  if (copies.size() > kMost || !floats) {
    if (step) fail<DeviceError>("[capture] a step's copies must be at most ", kMost, " float arrays");
    return Backend::copy_all(copies);
  }
  if (copies.size() < 2 && !step) return Backend::copy_all(copies);
  std::vector<cuda::Block> blocks;
  for (const Copy& c : copies) {
    const int count = static_cast<int>(c.bytes / sizeof(float));
    blocks.push_back({static_cast<const float*>(c.src), count, static_cast<float*>(c.dst), count, 1, count});
  }
  if (blocks.empty()) blocks.push_back({nullptr, 0, nullptr, 0, 0, 0});  // copies nothing
  cuda::copy_blocks(step_launch(), blocks);
}

// Our allocations all come from the device's default pool; a library's allocation while a
// step is captured would come from graph memory. The stats add both (peaks: at most the sum).
Backend::MemoryStats CudaBackend::memory_stats() {
  auto lock = enter();
  cuda_check(cudaStreamSynchronize(stream_), "memory_stats");  // frees are stream-ordered
  cudaMemPool_t pool;
  cuda_check(cudaDeviceGetDefaultMemPool(&pool, index_), "memory_stats");
  uint64_t current = 0, peak = 0, graph_current = 0, graph_peak = 0;
  cuda_check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &current), "memory_stats");
  cuda_check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &peak), "memory_stats");
  cuda_check(cudaDeviceGetGraphMemAttribute(index_, cudaGraphMemAttrUsedMemCurrent, &graph_current), "memory_stats");
  cuda_check(cudaDeviceGetGraphMemAttribute(index_, cudaGraphMemAttrUsedMemHigh, &graph_peak), "memory_stats");
  return {static_cast<size_t>(current + graph_current), static_cast<size_t>(peak + graph_peak)};
}

void CudaBackend::reset_peak_memory() {
  auto lock = enter();
  cudaMemPool_t pool;
  cuda_check(cudaDeviceGetDefaultMemPool(&pool, index_), "memory_stats");
  uint64_t zero = 0;  // resets the high-water marks to the current use
  cuda_check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), "memory_stats");
  cuda_check(cudaDeviceSetGraphMemAttribute(index_, cudaGraphMemAttrUsedMemHigh, &zero), "memory_stats");
}

void CudaBackend::synchronize() {
  auto lock = enter();
  cuda_check(cudaStreamSynchronize(stream_), "synchronize");
}

namespace {
struct CudaFence : Fence {
  cudaEvent_t event = nullptr;
  ~CudaFence() override {
    if (event) cudaEventDestroy(event);
  }
  bool reached() override {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaErrorNotReady) return false;
    cuda_check(e, "device");
    return true;
  }
  void wait() override { cuda_check(cudaEventSynchronize(event), "device"); }
};
}  // namespace

std::shared_ptr<Fence> CudaBackend::fence() {
  auto lock = enter();
  auto f = std::make_shared<CudaFence>();
  // Blocking: a thread waiting on it sleeps; reached() polls without sleeping.
  cuda_check(cudaEventCreateWithFlags(&f->event, cudaEventDisableTiming | cudaEventBlockingSync), "device");
  cuda_check(cudaEventRecord(f->event, stream_), "device");
  return f;
}

std::shared_ptr<Buffer> CudaBackend::workspace(size_t bytes) {
  const auto& shared = on_lane_ ? lane_.workspace : workspace_;  // the lane's: a view past the stream's part
  const bool fits = shared && shared->bytes() >= bytes;
  if (recording_ && !fits) return allocate(bytes);  // the step's own scratch
  if (!fits) {
    workspace_.reset();  // freed in stream order, after the work that used it
    workspace_ = allocate(bytes);
  }
  // A captured step keeps the buffer it points at (the lane's view points into it), which
  // another shape may replace later; the stream runs every user of it in turn.
  if (recording_ && (recording_->kept.empty() || recording_->kept.back() != workspace_))
    recording_->kept.push_back(workspace_);
  return shared;
}

std::shared_ptr<void> CudaBackend::capture(const std::function<void()>& work) {
  auto lock = enter();
  if (!lane_.stream) {
    cuda_check(cudaStreamCreateWithFlags(&lane_.stream, cudaStreamNonBlocking), "capture");
    cublas_check(cublasCreate(&lane_.cublas), "capture");
    cublas_check(cublasSetStream(lane_.cublas, lane_.stream), "capture");
    cudnn_check(cudnnCreate(&lane_.cudnn), "capture");
    cudnn_check(cudnnSetStream(lane_.cudnn, lane_.stream), "capture");
    cuda_check(cudaEventCreateWithFlags(&lane_.fork, cudaEventDisableTiming), "capture");
    cuda_check(cudaEventCreateWithFlags(&lane_.join, cudaEventDisableTiming), "capture");
  }
  auto step = std::make_shared<Captured>(this);
  cuda_check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "capture");
  recording_ = step.get();
  try {
    work();
  } catch (...) {
    recording_ = nullptr;
    cudaStreamEndCapture(stream_, &step->graph);
    cudaGetLastError();
    throw;
  }
  recording_ = nullptr;
  cuda_check(cudaStreamEndCapture(stream_, &step->graph), "capture");
  cuda_check(cudaGraphInstantiate(&step->exec, step->graph, 0), "capture");
  return step;
}

void CudaBackend::replay(const std::shared_ptr<void>& captured, const std::function<void()>& varying) {
  auto lock = enter();
  auto* step = static_cast<Captured*>(captured.get());
  if (varying) {
    struct Done {  // not re-pointing any more, however varying() ends
      CudaBackend* b;
      ~Done() { b->repointing_ = nullptr; }
    } done{this};
    repointing_ = step;
    repointed_ = 0;
    varying();
    if (repointed_ != step->varying.size())
      fail<DeviceError>("[replay] the step made ", repointed_, " of the captured step's ", step->varying.size(),
                        " varying launches");
  }
  cuda_check(cudaGraphLaunch(step->exec, stream_), "replay");
}

void CudaBackend::side_by_side(const std::function<void()>& first, const std::function<void()>& second,
                               double work, size_t first_workspace, size_t second_workspace) {
  auto lock = enter();
  // Short passes leave multiprocessors idle as they ramp up and drain, so two finish sooner
  // side by side; long ones fill the GPU and only contend (the digit network's second
  // convolution at batch 1024, 10 G multiply-adds a pass: its step 0.1 ms slower side by side).
  constexpr double kShortPerMultiprocessor = 1 << 23;
  // The shared workspace, sized by the largest candidate timed, most often holds both; going
  // side by side never takes more memory.
  const size_t offset = (first_workspace + 255) / 256 * 256;
  const bool room = !second_workspace || (workspace_ && offset + second_workspace <= workspace_->bytes());
  if (!recording_ || !first || !second || !room || work > kShortPerMultiprocessor * multiprocessors_) {
    if (first) first();
    if (second) second();
    return;
  }
  cuda_check(cudaEventRecord(lane_.fork, stream_), "capture");
  cuda_check(cudaStreamWaitEvent(lane_.stream, lane_.fork), "capture");
  if (second_workspace)
    lane_.workspace = std::make_shared<Buffer>(static_cast<char*>(workspace_->data()) + offset,
                                               workspace_->bytes() - offset, device(), &keep_memory);
  struct Beside {  // the lane swapped in for `second`, and joined however the works end
    CudaBackend* b;
    explicit Beside(CudaBackend* backend) : b(backend) { b->beside_ = true; }
    void swap() {
      std::swap(b->stream_, b->lane_.stream);
      std::swap(b->cublas_, b->lane_.cublas);
      std::swap(b->cudnn_, b->lane_.cudnn);
      b->on_lane_ = !b->on_lane_;
    }
    ~Beside() {
      if (b->on_lane_) swap();
      cudaEventRecord(b->lane_.join, b->lane_.stream);
      cudaStreamWaitEvent(b->stream_, b->lane_.join);
      b->beside_ = false;
      b->lane_.workspace.reset();
      for (void* p : b->parked_) {
        const auto it = b->scratch_.find(p);
        if (it != b->scratch_.end()) it->second.busy = false;
      }
      b->parked_.clear();
    }
  } beside(this);
  first();
  beside.swap();
  second();
}

cuda::StepLaunch CudaBackend::step_launch() const {
  return {stream_, recording_ || repointing_ ? &redirect_ : nullptr};
}

void CudaBackend::step_kernel(const void* kernel, dim3 grid, dim3 block, void** args) {
  if (repointing_) {
    const auto& v = repointing_->varying;
    if (repointed_ >= v.size() || v[repointed_].second != kernel)
      fail<DeviceError>("[replay] varying launch ", repointed_, " differs from the captured step's");
    cudaKernelNodeParams p{const_cast<void*>(kernel), grid, block, 0, args, nullptr};
    cuda_check(cudaGraphExecKernelNodeSetParams(repointing_->exec, v[repointed_++].first, &p), "replay");
    return;
  }
  cuda_check(cudaLaunchKernel(kernel, grid, block, args, 0, stream_), "launch");
  cudaStreamCaptureStatus status;
  const cudaGraphNode_t* last = nullptr;
  size_t count = 0;
#if CUDART_VERSION >= 13000
  cuda_check(cudaStreamGetCaptureInfo(stream_, &status, nullptr, nullptr, &last, nullptr, &count), "capture");
#else
  cuda_check(cudaStreamGetCaptureInfo(stream_, &status, nullptr, nullptr, &last, &count), "capture");
#endif
  if (count != 1) fail<DeviceError>("[capture] a varying launch is not the capture's one last node");
  recording_->varying.push_back({last[0], kernel});
}

void CudaBackend::store(uint64_t* counter, uint64_t value) {
  auto lock = enter();
  cuda::store(step_launch(), counter, value);
}

}  // namespace nngraph
