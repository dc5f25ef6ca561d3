#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "nngraph/graph.h"

namespace nngraph {

// Encodes run in order on one worker, which only queues their device work; each holds one
// of max_in_flight slots (the seed's counting semaphore) from submit() until the device has
// finished it and its callback has run on the completion thread.
class Executor {
 public:
  // What the calling thread is doing for some executor: an encode's work, a completion
  // (callback), or nothing. Such a thread cannot wait for later work of the same executor.
  enum class Role { None, Work, Completion };
  static Role role_here(const Executor* executor);

  explicit Executor(int max_in_flight);
  ~Executor();  // waits until every submitted encode has completed
  // Blocks while max_in_flight encodes are outstanding; raises when called from this
  // executor's own work or completion callbacks, which would wait for themselves. With `here`, work that only queues
  // device work runs on the calling thread when the caller waited for the encode before (it
  // runs steps one at a time, the device idles until this one is queued, and a hand-off to
  // the worker would cost a wake-up); a caller that does not wait goes on preparing the
  // next step while the worker queues this one.
  void submit(const HandlePtr& handle, std::function<void()> work, bool here = false);
  // Called by an encode's work once its device work is queued: the completion thread waits
  // for `fence`, runs the callback, finishes the handle and frees the slot, and drops both
  // there (their last references may free device memory or need Python). Work finished
  // already (null fence), without a callback and with every earlier encode complete, frees its
  // slot and finishes here instead.
  void complete(std::shared_ptr<Fence> fence, HandlePtr handle, Callback callback);

 private:
  struct Completion {
    std::shared_ptr<Fence> fence;
    HandlePtr handle;
    Callback callback;
  };
  void work_loop();
  void completion_loop();

  int max_in_flight_;
  int in_flight_ = 0;
  bool stop_ = false, running_ = false;
  std::deque<std::function<void()>> queue_;
  std::weak_ptr<Handle> last_;  // the latest submitted
  std::deque<Completion> completed_;
  std::mutex mutex_;
  // Each waiter has its own: a notify wakes only the thread it concerns.
  std::condition_variable queued_, completed_ready_, slot_freed_;
  std::thread worker_, completer_;
};

}  // namespace nngraph
