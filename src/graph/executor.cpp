#include "graph/executor.h"

#include <thread>

#include "backends/backend.h"
#include "nngraph/error.h"
#include "nngraph/graph.h"

namespace nngraph {
namespace {

// The executor whose work or callback the current thread runs, and which of the two.
thread_local const Executor* current_executor = nullptr;
thread_local Executor::Role current_role = Executor::Role::None;

class RoleScope {
 public:
  RoleScope(const Executor* e, Executor::Role r) : executor_(current_executor), role_(current_role) {
    current_executor = e;
    current_role = r;
  }
  ~RoleScope() {
    current_executor = executor_;
    current_role = role_;
  }
  RoleScope(const RoleScope&) = delete;
  RoleScope& operator=(const RoleScope&) = delete;

 private:
  const Executor* executor_;
  Executor::Role role_;
};

}  // namespace

Executor::Role Executor::role_here(const Executor* executor) {
  return executor && current_executor == executor ? current_role : Role::None;
}

Executor::Executor(int max_in_flight)
    : max_in_flight_(max_in_flight), worker_([this] { work_loop(); }), completer_([this] { completion_loop(); }) {}

Executor::~Executor() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    slot_freed_.wait(lock, [&] { return in_flight_ == 0 && completed_.empty(); });
    stop_ = true;
  }
  queued_.notify_all();
  completed_ready_.notify_all();
  worker_.join();
  completer_.join();
}

void Executor::submit(const HandlePtr& handle, std::function<void()> work, bool here) {
  if (role_here(this) != Role::None)
    fail("[graph] encode or run on a graph from its own ",
         role_here(this) == Role::Work ? "data-source update or optimizer" : "completion callback",
         " would wait for itself: use another graph (graph.inference() has its own queue), or encode after the "
         "callback returns");
  handle->set_executor(this);
  std::unique_lock<std::mutex> lock(mutex_);
  slot_freed_.wait(lock, [&] { return in_flight_ < max_in_flight_; });
  ++in_flight_;
  const auto last = last_.lock();
  last_ = handle;
  if (here && queue_.empty() && !running_ && (!last || last->waited())) {
    running_ = true;
    lock.unlock();
    {
      RoleScope scope(this, Role::Work);
      work();
    }
    work = nullptr;
    lock.lock();
    running_ = false;
  } else {
    queue_.push_back(std::move(work));
  }
  if (!queue_.empty()) queued_.notify_one();
}

void Executor::complete(std::shared_ptr<Fence> fence, HandlePtr handle, Callback callback) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!fence && !callback && in_flight_ == 1) {  // done already, and every encode before it completed
    --in_flight_;
    slot_freed_.notify_all();
    lock.unlock();
    handle->finish();
    return;
  }
  completed_.push_back({std::move(fence), std::move(handle), std::move(callback)});
  completed_ready_.notify_one();
}

void Executor::work_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    queued_.wait(lock, [&] { return (stop_ && queue_.empty()) || (!queue_.empty() && !running_); });
    if (queue_.empty()) return;  // stopping, nothing left
    auto work = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lock.unlock();
    {
      RoleScope scope(this, Role::Work);
      work();  // never throws: encode work reports through its Handle and ends in complete()
    }
    work = nullptr;
    lock.lock();
    running_ = false;
  }
}

void Executor::completion_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    completed_ready_.wait(lock, [&] { return stop_ || !completed_.empty(); });
    if (completed_.empty()) return;
    Completion c = std::move(completed_.front());
    completed_.pop_front();
    lock.unlock();
    try {
      RoleScope scope(this, Role::Completion);
      if (c.fence) c.fence->wait();
      if (c.callback) c.callback(*c.handle);
    } catch (...) {
      c.handle->set_error(std::current_exception());
    }
    c.handle->finish();
    c = Completion{};
    lock.lock();
    --in_flight_;
    slot_freed_.notify_all();
  }
}

void Handle::check_not_waiting_on_itself(bool need_done) const {
  const Executor::Role role = Executor::role_here(executor_);
  if (role == Executor::Role::None) return;
  std::lock_guard<std::mutex> lock(mutex_);
  // A completion thread finishes handles one at a time; a worker makes results in order.
  if (role == Executor::Role::Completion ? need_done && !done_ : !ready_)
    fail("[handle] waited for from its own graph's ",
         role == Executor::Role::Work ? "data-source update or optimizer" : "completion callback",
         ", which must return before this encode can finish");
}

void Handle::wait() {
  check_not_waiting_on_itself(true);
  std::shared_ptr<Fence> fence;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_) fence = fence_;
  }
  // Polling the device answers sooner than the completion thread, which sleeps until woken.
  try {
    while (fence && !fence->reached()) std::this_thread::yield();
    if (fence) finish();
  } catch (const Error&) {  // the device failed: the completion thread reports it
  }
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
  waited_ = true;
  if (error_) std::rethrow_exception(error_);
}

bool Handle::waited() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waited_;
}

bool Handle::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

const std::vector<Image>& Handle::results() {
  check_not_waiting_on_itself(false);
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return ready_; });
  if (error_) std::rethrow_exception(error_);
  return results_;
}

const std::vector<Image>& Handle::losses() {
  results();
  return losses_;
}

double Handle::loss(size_t i) {
  const auto& l = losses();
  if (i >= l.size()) fail("[handle] no loss ", i, ": the graph has ", l.size(), " loss node(s)");
  std::vector<float> v(l[i].descriptor().count());
  download(l[i], v.data());
  double sum = 0;
  for (float x : v) sum += x;
  return sum / divisors_[i];
}

void Handle::download(const Image& image, void* dst) {
  std::shared_ptr<Fence> written;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    written = written_;
  }
  backend_for(image.device()).copy_to_host_after(written, dst, image.data(), image.descriptor().bytes());
}

std::pair<float, float> Handle::scaling_values() {
  results();
  if (scaling_.empty()) return {1.f, 0.f};
  float v[2];
  download(scaling_, v);
  return {v[0], v[1]};
}

double Handle::loss_scale() { return scaling_values().first; }
bool Handle::skipped() { return scaling_values().second != 0.f; }

void Handle::set_results(std::vector<Image> results, std::vector<Image> losses, std::vector<double> divisors,
                         Image scaling, std::shared_ptr<Fence> written) {
  std::lock_guard<std::mutex> lock(mutex_);
  written_ = std::move(written);
  results_ = std::move(results);
  losses_ = std::move(losses);
  divisors_ = std::move(divisors);
  scaling_ = std::move(scaling);
  ready_ = true;
  cv_.notify_all();
}

void Handle::set_error(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_) error_ = error;
  ready_ = true;
  cv_.notify_all();
}

void Handle::set_fence(std::shared_ptr<Fence> fence) {
  std::lock_guard<std::mutex> lock(mutex_);
  fence_ = std::move(fence);
}

void Handle::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  ready_ = done_ = true;
  cv_.notify_all();
}

}  // namespace nngraph
