// The cuda backend's memory: stream-ordered allocation from the device pool, a captured
// step's scratch, the shared cuDNN workspace, and the memory statistics.
#include "backends/cuda/cuda_backend.h"

#include "nngraph/error.h"

namespace nngraph {

void CudaBackend::free_device(void* p, size_t bytes, const Device& d) { cuda_backend(d.index()).release(p, bytes); }
void CudaBackend::free_scratch(void* p, size_t, const Device& d) { cuda_backend(d.index()).release_scratch(p); }

void CudaBackend::release(void* p, size_t bytes) {
  auto lock = enter();
  const char* begin = static_cast<const char*>(p);
  for (auto& [type, state] : op_states_) state->released(begin, begin + bytes);
  cudaFreeAsync(p, stream_);  // stream-ordered: after every kernel already queued on it
}

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
    if (!side_) cuda_check(cudaStreamCreateWithFlags(side_.out(), cudaStreamNonBlocking), "capture");
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

}  // namespace nngraph
