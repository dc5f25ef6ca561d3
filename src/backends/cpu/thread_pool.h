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
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_, busy_;
  std::condition_variable wake_, finished_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t n_ = 0, chunks_ = 0;
  std::atomic<size_t> next_{0};
  size_t done_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace nngraph
