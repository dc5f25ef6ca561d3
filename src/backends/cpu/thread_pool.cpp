#include "backends/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

namespace nngraph {
namespace {
thread_local bool in_pool = false;

// How long a worker polls for the next job after one, before it sleeps.
constexpr auto kPoll = std::chrono::microseconds(200);

// A spin-wait hint to the core (no system call).
inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) {
    workers_.push_back(std::make_unique<Worker>());
    Worker& w = *workers_.back();
    w.thread = std::thread([this, &w] { worker_loop(w); });
  }
}

ThreadPool::~ThreadPool() {
  for (auto& w : workers_) {
    {
      std::lock_guard<std::mutex> lock(w->mutex);
      w->stop = true;
      w->generation.store(~0u, std::memory_order_release);  // ends its polling
    }
    w->wake.notify_one();
    w->thread.join();
  }
}

void ThreadPool::run_chunks(const Job& job, uint32_t generation) {
  for (;;) {
    uint64_t v = claim_.load();
    do {
      if (v >> 32 != generation || (v & 0xffffffffu) >= job.chunks) return;
    } while (!claim_.compare_exchange_weak(v, v + 1));
    const size_t c = v & 0xffffffffu, begin = job.n * c / job.chunks, end = job.n * (c + 1) / job.chunks;
    try {
      (*job.fn)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    done_.fetch_add(1, std::memory_order_release);
  }
}

void ThreadPool::worker_loop(Worker& w) {
  in_pool = true;
  uint32_t seen = 0;
  for (;;) {
    const auto until = std::chrono::steady_clock::now() + kPoll;
    for (int i = 0; w.generation.load(std::memory_order_acquire) == seen; ++i) {
      relax();
      if (i % 256 == 255 && std::chrono::steady_clock::now() > until) break;
    }
    Job job;
    {
      std::unique_lock<std::mutex> lock(w.mutex);
      w.wake.wait(lock, [&] { return w.stop || w.generation.load() != seen; });
      if (w.stop) return;
      seen = w.generation.load();
      job = w.job;
    }
    run_chunks(job, seen);
  }
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t most) {
  if (n == 0) return;
  const size_t chunks = std::min({n, static_cast<size_t>(size()), most ? most : n});
  std::unique_lock<std::mutex> busy(busy_, std::defer_lock);
  if (chunks <= 1 || in_pool || !busy.try_lock()) {
    fn(0, n);
    return;
  }
  const Job job{&fn, n, chunks};
  const uint32_t generation = ++generation_;
  done_ = 0;
  error_ = nullptr;
  claim_ = uint64_t{generation} << 32;
  for (size_t i = 0; i + 1 < chunks; ++i) {  // chunks are claimed, so a late worker finds none left
    Worker& w = *workers_[i];
    {
      std::lock_guard<std::mutex> lock(w.mutex);
      w.job = job;
      w.generation.store(generation, std::memory_order_release);
    }
    w.wake.notify_one();
  }
  in_pool = true;
  run_chunks(job, generation);
  in_pool = false;
  // What is left is at most the chunks other threads are running now.
  for (int i = 0; done_.load(std::memory_order_acquire) != chunks; ++i) i < 4096 ? relax() : std::this_thread::yield();
  if (error_) std::rethrow_exception(error_);
}

}  // namespace nngraph
