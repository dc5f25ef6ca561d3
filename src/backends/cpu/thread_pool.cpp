#include "backends/cpu/thread_pool.h"

#include <algorithm>

namespace nngraph {
namespace {
thread_local bool in_pool = false;
}

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
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
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (++done_ == job.chunks) finished_.notify_all();
  }
}

void ThreadPool::worker_loop() {
  in_pool = true;
  uint32_t seen = 0;
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    run_chunks(job, seen);
  }
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  const size_t chunks = std::min(n, static_cast<size_t>(size()));
  std::unique_lock<std::mutex> busy(busy_, std::defer_lock);
  if (chunks <= 1 || in_pool || !busy.try_lock()) {
    fn(0, n);
    return;
  }
  const Job job{&fn, n, chunks};
  uint32_t generation;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = job;
    generation = ++generation_;
    done_ = 0;
    error_ = nullptr;
    claim_ = uint64_t{generation} << 32;
  }
  wake_.notify_all();
  in_pool = true;
  run_chunks(job, generation);
  in_pool = false;
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [&] { return done_ == chunks; });
  job_ = Job{};
  if (error_) std::rethrow_exception(error_);
}

}  // namespace nngraph
