#pragma once
// A compiled, executable graph (MPSNNGraph). encode() returns at once; at most
// max_in_flight encodes are outstanding, each complete when the device has finished it.
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nngraph/device.h"
#include "nngraph/image.h"
#include "nngraph/loss.h"
#include "nngraph/nodes.h"
#include "nngraph/optimizer.h"

namespace nngraph {

struct Fence;
class Executor;
class LossNode;

// The outcome of one encode.
class Handle : public std::enable_shared_from_this<Handle> {
 public:
  // Blocks until the encode and its callback finished; rethrows what it raised.
  void wait();
  bool done() const;
  // Whether wait() has returned: the caller runs its steps one at a time.
  bool waited() const;
  // Blocks until results exist (callbacks may call it); rethrows what the encode raised.
  const std::vector<Image>& results();
  // Per-image loss values of each loss node (N×1×1×1).
  const std::vector<Image>& losses();
  // The reduced loss of loss node i: the value its gradient is of.
  double loss(size_t i = 0);
  // Copies one of this encode's result or loss images to host memory once the encode has
  // finished, without waiting for the encodes queued after it.
  void download(const Image& image, void* dst);
  // A float16 training graph's loss scaling in this step: the scale its loss gradient was
  // multiplied by, and whether its weight gradients overflowed so it updated nothing. 1 and
  // false for other graphs.
  double loss_scale();
  bool skipped();

  // Executor side. `scaling`: the step's scale and skip flag (two float32 values), or empty.
  // `written`: where the device will have written them (null where it has already).
  void set_results(std::vector<Image> results, std::vector<Image> losses, std::vector<double> divisors,
                   Image scaling = {}, std::shared_ptr<Fence> written = nullptr);
  void set_error(std::exception_ptr error);
  void finish();
  // Where the device will have finished this encode; wait() polls it where no callback runs.
  void set_fence(std::shared_ptr<Fence> fence);
  void set_executor(const Executor* executor) { executor_ = executor; }

 private:
  // Raises where the calling thread is the one that must finish this handle first.
  void check_not_waiting_on_itself(bool need_done) const;
  const Executor* executor_ = nullptr;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool ready_ = false, done_ = false, waited_ = false;
  std::exception_ptr error_;
  std::shared_ptr<Fence> fence_, written_;
  std::vector<Image> results_, losses_;
  std::vector<double> divisors_;
  Image scaling_;
  // The two values of scaling_ (1, 0 where empty).
  std::pair<float, float> scaling_values();
};
using HandlePtr = std::shared_ptr<Handle>;
using Callback = std::function<void(Handle&)>;

struct MemoryPlan {
  int batch = 0;
  size_t planned_bytes = 0;  // one arena, intermediates aliased by liveness
  size_t naive_bytes = 0;    // one buffer per intermediate image
  // Executed nodes in order: "conv1+relu" with a folded neuron, "conv1+bn1+relu" with a folded
  // batch normalization too, "bn1+relu (recomputed)" where a result is computed again for the
  // gradient pass (Graph::recompute).
  std::vector<std::string> steps;
};

struct GraphSpec;

class Graph {
 public:
  // `format`: the dtype of the images between nodes (MPSNNGraph's format). A half format
  // computes in it where the device does (cuda), with float32 parameter masters, statistics
  // and losses; elsewhere the images stay float32. `layout`: how those images lie, NCHW or
  // channels-last NHWC (nodes that do not read NHWC on the device get NCHW copies); Auto
  // takes the device's choice for the storage dtype. Sources and results stay NCHW.
  Graph(std::vector<ImageNodePtr> results, Device device = Device(), int max_in_flight = 2,
        DType format = DType::Float32, Layout layout = Layout::Auto);
  // Forward nodes (training mode), the loss, every gradient node, then one data-source update
  // per trainable node. Results: the loss's source image. `optimizer` goes to every
  // ArrayDataSource that has none.
  // `scaling`: the dynamic loss scaling a float16 format trains with.
  static std::shared_ptr<Graph> training(const std::shared_ptr<LossNode>& loss, Device device = Device(),
                                         int max_in_flight = 2, std::shared_ptr<Optimizer> optimizer = nullptr,
                                         DType format = DType::Float32, LossScaling scaling = {},
                                         Layout layout = Layout::Auto);
  // The same for several losses (an auxiliary classifier's beside the main one): the gradient
  // of their sum, each weighted by its descriptor's weight. Results: each loss's source, in
  // the order given; encode takes their labels in loss_labels()' order.
  static std::shared_ptr<Graph> training(const std::vector<std::shared_ptr<LossNode>>& losses,
                                         Device device = Device(), int max_in_flight = 2,
                                         std::shared_ptr<Optimizer> optimizer = nullptr,
                                         DType format = DType::Float32, LossScaling scaling = {},
                                         Layout layout = Layout::Auto);
  // Inference over this graph's results that reads this graph's weight buffers in place.
  // While one is held, later calls return that one (its plans and captures kept). Each call
  // gives it this graph's tf32 setting.
  std::shared_ptr<Graph> inference() const;
  // Of a training graph: its forward nodes in inference mode and its loss nodes, taking labels
  // and giving losses but training nothing (a validation set's loss); reads weights in place.
  // Kept while held, as inference().
  std::shared_ptr<Graph> evaluation() const;
  explicit Graph(GraphSpec spec);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const Device& device() const;
  int max_in_flight() const;
  // The format it was made with, and the dtype its images are stored in on its device.
  DType format() const;
  DType storage() const;
  // The layout its images between nodes lie in on its device (NCHW or NHWC, never Auto),
  // under the current tf32 setting.
  Layout layout() const;
  // Source image handles in the order encode() takes them.
  const std::vector<ImageNodePtr>& sources() const;
  const std::vector<ImageNodePtr>& results() const;
  // Data sources of the graph's nodes, each once, in node order.
  std::vector<DataSource*> data_sources() const;
  // Labels of every filter node, in execution order.
  std::vector<std::string> node_labels() const;
  // Each forward node in order: label, kind, result shape (for the declared source shapes, or
  // else those of the latest encode; none when neither is known) and parameter count.
  struct NodeSummary {
    std::string label, kind;
    std::optional<ImageShape> shape;
    size_t parameters = 0;
  };
  std::vector<NodeSummary> summary() const;

  bool is_training() const;
  // Loss nodes in the order encode() takes their labels.
  std::vector<const LossNode*> loss_nodes() const;
  // The image shape each loss node's labels must have, for these source shapes.
  std::vector<ImageShape> label_shapes(const std::vector<ImageShape>& source_shapes);
  // Training graphs: check losses and weight gradients before updating; a NaN or inf
  // raises DeviceError and leaves every weight unchanged.
  void set_check_numerics(bool on);
  bool check_numerics() const;
  // cuda: convolutions and fully connected layers may use tf32 tensor cores (about 1e-3
  // relative error, as PyTorch's default for convolutions). Off: exact float32.
  void set_allow_tf32(bool on);
  bool allow_tf32() const;
  // Training graphs: a batch normalization's result (with its neuron, or the residual sum it
  // computes with its neuron) that only later layers' gradients read again is computed again
  // before them rather than kept through the forward pass (less memory, one more pass each).
  // On by default; off keeps every such result.
  void set_recompute(bool on);
  bool recompute() const;
  // With recompute on: the share, 0 to 1, of the memory that recomputing saves which the plan
  // may spend keeping results after all, the largest first (each kept result saves a pass).
  // 0 (the default) recomputes wherever keeping would make the arena larger; 1 keeps every
  // result, as recompute off does. Outside [0, 1]: InvalidInput.
  void set_memory_budget(double share);
  double memory_budget() const;
  // Float16 training graphs: the loss scale the next step uses and the steps skipped so far
  // (after the work queued so far); 1 and 0 for graphs that do not scale.
  double loss_scale() const;
  int64_t skipped_steps() const;

  // Results come back as float16 when every source is float16, else float32.
  HandlePtr encode(std::vector<Image> sources, std::vector<LossLabels> labels = {}, Callback on_complete = {});
  // encode() and wait: on the calling thread where the graph has nothing queued.
  std::vector<Image> run(std::vector<Image> sources, std::vector<LossLabels> labels = {});
  // Reads every data source again (load, copy, purge, one node at a time). All or nothing:
  // on error the graph keeps its previous weights. inference() and evaluation() are made anew.
  void reload_from_data_sources();
  // For the declared source shapes, or else those of the latest encode.
  MemoryPlan memory_plan(int batch) const;

 private:
  // encode(); `here`: run on the calling thread where the graph is idle (run() waits anyway).
  HandlePtr queue_run(std::vector<Image> sources, std::vector<LossLabels> labels, Callback on_complete, bool here);
  void check_broadcast(const std::vector<Image>& sources, int batch) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nngraph
