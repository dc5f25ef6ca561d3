#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "nngraph/graph.h"

namespace nngraph {

// Encodes run in order on one worker, which only queues their device work; each holds one
// of max_in_flight slots (the seed's counting semaphore) from submit() until the device has
// finished it and its callback has run.
class Executor {
 public:
  explicit Executor(int max_in_flight);
  ~Executor();  // waits until every submitted encode has completed
  // Blocks while max_in_flight encodes are outstanding.
  void submit(std::function<void()> work);
  // The device finished an encode. Called from the device's stream, so it makes no device
  // call and runs no Python: a callback runs on the completion thread, which then finishes
  // the handle and frees the slot; without one both happen here. Handles and callbacks are
  // always released on the completion thread.
  void complete(HandlePtr handle, Callback callback);

 private:
  struct Completion {
    HandlePtr handle;
    Callback callback;
  };
  void work_loop();
  void completion_loop();

  int max_in_flight_;
  int in_flight_ = 0;
  bool stop_ = false;
  std::deque<std::function<void()>> queue_;
  std::deque<Completion> completed_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread worker_, completer_;
};

}  // namespace nngraph
