// The cuda backend's host transfers through rotating pinned staging buffers, and device copies.
#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>

#include "nngraph/error.h"

namespace nngraph {

CudaBackend::Pinned& CudaBackend::staging(size_t bytes) {
  Pinned* slot = nullptr;
  for (size_t tries = 0; tries < pinned_.size() && !slot; ++tries) {
    Pinned& q = pinned_[next_pinned_];
    next_pinned_ = (next_pinned_ + 1) % pinned_.size();
    if (!q.filling) slot = &q;
  }
  Pinned& p = slot ? *slot : pinned_.emplace_back();
  if (!p.done) cuda_check(cudaEventCreateWithFlags(p.done.out(), cudaEventDisableTiming), "staging");
  cuda_check(cudaEventSynchronize(p.done), "staging");  // the slot's last transfer has finished
  if (bytes > p.bytes) {
    p.bytes = 0;
    cuda_check(cudaHostAlloc(p.data.out(), bytes, cudaHostAllocDefault), "staging");
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
// still queued behind those steps is not handed out here. The host copy runs without the
// lock, so a worker queuing the last step meanwhile does not wait for it.
std::shared_ptr<Buffer> CudaBackend::upload(size_t bytes, const std::function<void(void*)>& fill) {
  std::shared_ptr<Buffer> buffer;
  Pinned* slot;
  {
    auto lock = enter();
    if (recording_) return Backend::upload(bytes, fill);
    buffer = std::make_shared<Buffer>(allocate_on(uploads_, bytes, false), bytes, device(), &free_device);
    if (!bytes) return buffer;
    slot = &staging(bytes);
    slot->filling = true;
  }
  Pinned& p = *slot;
  try {
    fill(p.data);
  } catch (...) {
    auto lock = enter();
    p.filling = false;
    throw;
  }
  auto lock = enter();
  p.filling = false;
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

// On the download stream once `ready` is reached, so a step's results are read while the steps
// queued after it run. The slot is waited for without the lock, as upload() fills its own.
void CudaBackend::copy_to_host_after(const std::shared_ptr<Fence>& ready, void* dst, const void* src,
                                     size_t bytes) {
  const auto* fence = dynamic_cast<const CudaFence*>(ready.get());
  if (!fence) return copy_to_host(dst, src, bytes);
  if (!bytes) return;
  Pinned* slot;
  {
    auto lock = enter();
    slot = &staging(bytes);
    cuda_check(cudaStreamWaitEvent(downloads_, fence->event), "copy to host");
    cuda_check(cudaMemcpyAsync(slot->data, src, bytes, cudaMemcpyDeviceToHost, downloads_), "copy to host");
    cuda_check(cudaEventRecord(slot->done, downloads_), "copy to host");
    slot->filling = true;
  }
  Pinned& p = *slot;
  const cudaError_t e = cudaEventSynchronize(p.done);
  if (e == cudaSuccess) std::memcpy(dst, p.data, bytes);
  auto lock = enter();
  p.filling = false;
  cuda_check(e, "copy to host");
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

}  // namespace nngraph
