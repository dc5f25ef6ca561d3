#pragma once
// A backend is a device's runtime: memory, host transfers, its queue and fences, capture
// and replay of a whole step. It grows when a device grows, not when an op is added: ops'
// kernels are registered per device type (backends/kernel.h).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nngraph/image.h"

namespace nngraph {

// A point in a device's queued work (asynchronous backends).
struct Fence {
  virtual ~Fence() = default;
  // Whether the work before it has finished; DeviceError if it failed.
  virtual bool reached() = 0;
  // Sleeps until reached; DeviceError if the work failed.
  virtual void wait() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::shared_ptr<Buffer> allocate(size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  // copy_from_host of what `fill` writes into `bytes` of host memory: the backend's own
  // staging memory where it has some, so the data is written once on the host.
  virtual void fill_from_host(void* dst, size_t bytes, const std::function<void(void*)>& fill);
  // A new buffer holding what `fill` writes into `bytes` of host memory.
  virtual std::shared_ptr<Buffer> upload(size_t bytes, const std::function<void(void*)>& fill);
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  // copy_to_host of bytes the work before `ready` wrote: waits for that point only, not for
  // work queued after it (a step's results read while the next step runs).
  virtual void copy_to_host_after(const std::shared_ptr<Fence>& ready, void* dst, const void* src, size_t bytes) {
    (void)ready;
    copy_to_host(dst, src, bytes);
  }
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // Every copy, in one pass where the backend can (a replayed step's inputs and outputs).
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  virtual void copy_all(const std::vector<Copy>& copies) {
    for (const Copy& c : copies) copy(c.dst, c.src, c.bytes);
  }
  // Waits for the work queued so far (asynchronous backends).
  virtual void synchronize() {}
  // Whether work is only queued by the calls that encode it (it runs on a device later).
  virtual bool asynchronous() const { return false; }
  // The point the work queued so far will reach; null where that work is done already.
  virtual std::shared_ptr<Fence> fence() { return nullptr; }
  // Bytes the engine holds on this device now, and the most since the last reset.
  struct MemoryStats {
    size_t current = 0, peak = 0;
  };
  virtual MemoryStats memory_stats() = 0;
  virtual void reset_peak_memory() = 0;

  // Whole-step capture (cuda graphs): capture() records what `work` enqueues without running
  // it; replay() runs the record. Backends that cannot capture run work eagerly instead.
  // store, copy_all and the optimizer kernel are a step's varying launches: their arguments change
  // from step to step. replay() first runs `varying` (when given), which makes the same such
  // calls in the same order as the captured work did; they set the record's arguments instead
  // of launching.
  virtual bool can_capture() const { return false; }
  virtual std::shared_ptr<void> capture(const std::function<void()>& work);
  virtual void replay(const std::shared_ptr<void>& captured, const std::function<void()>& varying);
  // *counter = value in the order of queued work (counter in this backend's memory).
  virtual void store(uint64_t* counter, uint64_t value) { *counter = value; }
  // The dtype a graph of format `format` stores its images between nodes in: the format
  // where the backend computes in it, else float32.
  virtual DType storage_for(DType format) const { return format; }
  // The layout a graph asking for Layout::Auto stores its images of `storage` in, where
  // float32 products may (tf32) or may not round their inputs to tf32.
  virtual Layout layout_for(DType storage, bool tf32) const {
    (void)storage;
    (void)tf32;
    return Layout::NCHW;
  }
};

// The backend serving a device; raises Unsupported when it is not built or present.
Backend& backend_for(const Device& device);

}  // namespace nngraph
