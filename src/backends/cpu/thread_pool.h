#pragma once
#include <cstddef>
#include <cstdint>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace nngraph {

// Fixed workers; parallel_for splits [0, n) into one contiguous range per thread and the
// caller runs one range itself. Nested calls, and calls while the pool is busy elsewhere,
// run inline rather than wait. A worker polls for its next job a short while before it
// sleeps, so a run of small kernels (inference at batch 1) pays no wake-up for each.
class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // fn over [0, n) in at most `most` ranges (0: size()), on as many threads.
  void parallel_for(size_t n, const std::function<void(size_t begin, size_t end)>& fn, size_t most = 0);

 private:
  struct Job {
    const std::function<void(size_t, size_t)>* fn = nullptr;
    size_t n = 0, chunks = 0;
  };
  // Each worker sleeps on its own slot: woken together on one lock, they would take it in
  // turn, each after the last one's wake-up.
  struct Worker {
    std::mutex mutex;
    std::condition_variable wake;
    Job job;
    std::atomic<uint32_t> generation{0};  // of the job last given (set under the lock, polled without)
    bool stop = false;
    std::thread thread;
  };
  void worker_loop(Worker& w);
  void run_chunks(const Job& job, uint32_t generation);

  std::vector<std::unique_ptr<Worker>> workers_;
  std::mutex busy_, error_mutex_;
  uint32_t generation_ = 0;
  // The generation (high half) and its next unclaimed chunk (low half) in one word, so a
  // worker still holding an earlier job can never claim a chunk of the current one.
  std::atomic<uint64_t> claim_{0};
  std::atomic<size_t> done_{0};
  std::exception_ptr error_;
};

}  // namespace nngraph
