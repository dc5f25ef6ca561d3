// Whole-step capture as a CUDA graph and its replay (re-pointing the launches that vary
// from step to step), and the second stream that runs two short works side by side.
#include "backends/cuda/cuda_backend.h"

#include "nngraph/error.h"

namespace nngraph {

std::shared_ptr<void> CudaBackend::capture(const std::function<void()>& work) {
  auto lock = enter();
  if (!lane_.stream) {
    cuda_check(cudaStreamCreateWithFlags(lane_.stream.out(), cudaStreamNonBlocking), "capture");
    cublas_check(cublasCreate(lane_.cublas.out()), "capture");
    cublas_check(cublasSetStream(lane_.cublas, lane_.stream), "capture");
    cudnn_check(cudnnCreate(lane_.cudnn.out()), "capture");
    cudnn_check(cudnnSetStream(lane_.cudnn, lane_.stream), "capture");
    cuda_check(cudaEventCreateWithFlags(lane_.fork.out(), cudaEventDisableTiming), "capture");
    cuda_check(cudaEventCreateWithFlags(lane_.join.out(), cudaEventDisableTiming), "capture");
  }
  auto step = std::make_shared<Captured>(this);
  cuda_check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "capture");
  recording_ = step.get();
  try {
    work();
  } catch (...) {
    recording_ = nullptr;
    cudaStreamEndCapture(stream_, step->graph.out());
    cudaGetLastError();
    throw;
  }
  recording_ = nullptr;
  cuda_check(cudaStreamEndCapture(stream_, step->graph.out()), "capture");
  cuda_check(cudaGraphInstantiate(step->exec.out(), step->graph, 0), "capture");
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
