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

void ThreadPool::run_chunks() {
  for (size_t c; (c = next_.fetch_add(1)) < chunks_;) {
    const size_t begin = n_ * c / chunks_, end = n_ * (c + 1) / chunks_;
    try {
      (*job_)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (++done_ == chunks_) finished_.notify_all();
  }
}

void ThreadPool::worker_loop() {
  in_pool = true;
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    n_ = n;
    chunks_ = chunks;
    next_ = 0;
    done_ = 0;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  in_pool = true;
  run_chunks();
  in_pool = false;
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [&] { return done_ == chunks_; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace nngraph
