#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/kernel.h"
#include "nngraph/descriptors.h"
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
  // Computes in float32: half formats are storage at the graph's edges only.
  DType storage_for(DType) const override { return DType::Float32; }
  void release(void* p, size_t bytes);
  size_t kept_bytes() const { return kept_.bytes(); }

  ThreadPool& pool() { return pool_; }

 private:
  // Freed blocks of kFrom bytes or more, kept for the next allocation of the same size (the
  // latest first, the oldest freed beyond kMost bytes in all). glibc maps blocks over 32 MiB
  // afresh and unmaps them when freed, so a graph's large result or input would fault in every
  // page again on every run; the cuda backend's pool keeps its blocks likewise.
  class Kept {
   public:
    static constexpr size_t kFrom = size_t{4} << 20, kMost = size_t{1} << 30;
    ~Kept() { clear(); }
    void* take(size_t bytes);          // a kept block of exactly `bytes`, or null
    bool keep(void* p, size_t bytes);  // false: not kept (the caller frees it)
    void clear();
    size_t bytes() const {
      std::lock_guard<std::mutex> lock(mutex_);
      return total_;
    }

   private:
    mutable std::mutex mutex_;
    std::vector<std::pair<size_t, void*>> blocks_;  // oldest first
    size_t total_ = 0;
  };

  ThreadPool pool_;
  std::atomic<size_t> current_{0}, peak_{0};
  Kept kept_;
};

CpuBackend& cpu_backend();
// The pool of the backend a cpu kernel was given.
inline ThreadPool& pool_of(Backend& b) { return static_cast<CpuBackend&>(b).pool(); }

// fn(image, first, count) for each run of up to `run` consecutive pixels of each of `images`
// images of `hw` pixels, spread over the pool: a pass over the channels at each pixel (softmax,
// layer normalization over C) reads each channel's row along a run, and one image's pixels
// still share the threads.
template <class Fn>
void for_pixel_runs(ThreadPool& pool, int images, size_t hw, size_t run, Fn fn) {
  const size_t runs = (hw + run - 1) / run;
  pool.parallel_for(static_cast<size_t>(images) * runs, [&](size_t first, size_t end) {
    for (size_t r = first; r < end; ++r) {
      const size_t p0 = r % runs * run;
      fn(static_cast<int>(r / runs), p0, std::min(run, hw - p0));
    }
  });
}

// Row-major C[M×N] = alpha·op(A)·op(B) + beta·C, split over the pool when `parallel`.
void gemm(ThreadPool* pool, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
          const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);

// This thread's scratch buffer for one use, at least `floats` long, whose floats are zero where
// it grows. It keeps its pages from call to call: a fresh buffer this large would go back to the
// system when freed, and every call would fault it in (and zero it) again.
enum class Scratch { WinogradWeights, WinogradInput, WinogradProducts, Frame, Count };
float* thread_scratch(Scratch use, size_t floats);

// x[i] = neuron(x[i] + bias + addend[i]) over `count` values (bias and addend may be null).
void bias_neuron(float* x, size_t count, const float* bias, const NeuronDescriptor& neuron,
                 const float* addend = nullptr);
// dz[i] = dy[i] · neuron.derivative(v[i]).
void neuron_derivative(const float* dy, const float* v, float* dz, size_t count, const NeuronDescriptor& neuron);

}  // namespace nngraph
