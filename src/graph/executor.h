#pragma once
#include <cstddef>
#include <cstdint>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace nngraph {

// One worker running submitted work in order; submit() blocks while max_in_flight pieces
// are queued or running (the seed's counting semaphore).
class Executor {
 public:
  explicit Executor(int max_in_flight);
  ~Executor();  // finishes queued work first
  void submit(std::function<void()> work);

 private:
  void loop();
  int max_in_flight_;
  int in_flight_ = 0;
  bool stop_ = false;
  std::deque<std::function<void()>> queue_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread worker_;
};

}  // namespace nngraph
