#pragma once
#include <cstddef>
#include <cstdint>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace nngraph {

// Fixed workers; parallel_for splits [0, n) into one contiguous range per thread and the
// caller runs one range itself. Nested calls, and calls while the pool is busy elsewhere,
// run inline rather than wait.
class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  int size() const { return static_cast<int>(workers_.size()) + 1; }
  void parallel_for(size_t n, const std::function<void(size_t begin, size_t end)>& fn);

 private:
  struct Job {
    const std::function<void(size_t, size_t)>* fn = nullptr;
    size_t n = 0, chunks = 0;
  };
  void worker_loop();
  void run_chunks(const Job& job, uint32_t generation);

  std::vector<std::thread> workers_;
  std::mutex mutex_, busy_;
  std::condition_variable wake_, finished_;
  Job job_;
  uint32_t generation_ = 0;
  // The generation (high half) and its next unclaimed chunk (low half) in one word, so a
  // worker still holding an earlier job can never claim a chunk of the current one.
  std::atomic<uint64_t> claim_{0};
  size_t done_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace nngraph
