#pragma once
// A compiled, executable graph (MPSNNGraph). encode() returns at once; at most
// max_in_flight encodes are outstanding and each completes on the graph's worker.
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nngraph/device.h"
#include "nngraph/image.h"
#include "nngraph/nodes.h"

namespace nngraph {

// The outcome of one encode.
class Handle : public std::enable_shared_from_this<Handle> {
 public:
  // Blocks until the encode and its callback finished; rethrows what it raised.
  void wait();
  bool done() const;
  // Blocks until results exist (callbacks may call it); rethrows what the encode raised.
  const std::vector<Image>& results();

  // Executor side.
  void set_results(std::vector<Image> results);
  void set_error(std::exception_ptr error);
  void finish();

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool ready_ = false, done_ = false;
  std::exception_ptr error_;
  std::vector<Image> results_;
};
using HandlePtr = std::shared_ptr<Handle>;
using Callback = std::function<void(Handle&)>;

struct MemoryPlan {
  int batch = 0;
  size_t planned_bytes = 0;  // one arena, intermediates aliased by liveness
  size_t naive_bytes = 0;    // one buffer per intermediate image
  std::vector<std::string> steps;  // executed nodes in order ("conv1+relu" when fused)
};

class Graph {
 public:
  Graph(std::vector<ImageNodePtr> results, Device device = Device(), int max_in_flight = 2);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const Device& device() const;
  int max_in_flight() const;
  // Source image handles in the order encode() takes them.
  const std::vector<ImageNodePtr>& sources() const;
  const std::vector<ImageNodePtr>& results() const;
  // Labels of every filter node, in execution order.
  std::vector<std::string> node_labels() const;

  // Results come back as float16 when every source is float16, else float32.
  HandlePtr encode(std::vector<Image> sources, Callback on_complete = {});
  std::vector<Image> run(std::vector<Image> sources);
  // Reads every data source again (load, copy, purge, one node at a time). All or nothing:
  // on error the graph keeps its previous weights.
  void reload_from_data_sources();
  // For the declared source shapes, or else those of the latest encode.
  MemoryPlan memory_plan(int batch) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nngraph
