#pragma once
// The step runner: one encode of a graph on the worker thread. It binds the sources and the
// arena, runs every step's kernel (or replays the captured step), checks numerics and
// applies the data sources' updates, all or nothing.
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graph/capture.h"
#include "graph/parameters.h"
#include "graph/plan.h"
#include "nngraph/loss.h"

namespace nngraph {

class Backend;

class StepRunner {
 public:
  // `storage`: of the images between nodes (Plan::storage), and of the parameter copies.
  // `scaling`: the loss scaling a float16 storage trains with.
  StepRunner(const Structure& structure, Backend& backend, Device device, DType storage, LossScaling scaling);
  struct Options {
    bool check_numerics = false, allow_tf32 = false;
  };
  // Returns the results; fills the per-image losses and, where it scales the loss, `scaling`
  // (the step's scale and 1 if it skipped its update, two float32 values on the device).
  std::vector<Image> run(const Plan& plan, Parameters& wm, const std::vector<Image>& src,
                         const std::vector<LossLabels>& labels, uint64_t step, const Rates& rates, Options options,
                         std::vector<Image>& losses, Image& scaling);
  // The loss scale of the next step and the steps skipped so far (waits for the device);
  // 1 and 0 where the graph does not scale.
  std::pair<float, int64_t> loss_scale() const;

 private:
  // Makes the forward node's gradient buffers, or remakes them where the trained tensors or
  // their order changed. `copies`: the node's parameter copies where the step computes on them.
  void gradients_for(const FilterNode* forward, const std::vector<WeightsState>& ws,
                     const std::vector<WeightsState>* copies);
  void check_finite(const std::vector<Image>& losses, const std::vector<const FilterNode*>& trained);
  // Marks the loss scaling state where a weight gradient holds a NaN or inf (no waiting).
  void check_scaled(const std::vector<const FilterNode*>& trained, math::LossScaleState* state);
  // The batch states of the plan's nodes (made before any capture, kept across steps).
  void make_batch_states(const Plan& plan);
  // Marks the parameters that commits changed on the device as newer than other copies.
  void note_commits(Parameters& wm) const;
  // The gradients host updates read: float32 (a half graph's half ones cast).
  Gradients float_gradients(const std::vector<std::pair<const FilterNode*, size_t>>& others);

  const Structure& structure_;
  Backend& backend_;
  Device device_;
  std::shared_ptr<Buffer> arena_;
  Gradients gradients_;
  // Per trained node, from its weight sources' descriptors (fixed for its life): each source
  // and its tensors' specs, so a step asks only whether each tensor is there and trained.
  struct Trainable {
    std::vector<DataSource*> sources;
    std::vector<std::vector<TensorSpec>> specs;
  };
  std::unordered_map<const FilterNode*, Trainable> trainable_;
  FoldedParameters folded_;
  PreparedFilters prepared_;
  ParameterCopies copies_;
  std::unordered_map<const FilterNode*, std::shared_ptr<Buffer>> batch_states_;
  CaptureCache captures_;
  std::shared_ptr<Buffer> step_counter_;  // in the backend's memory: dropout reads it
  LossScaling rule_;
  std::shared_ptr<Buffer> scaling_;  // math::LossScaleState of a float16 training graph, else null
};

}  // namespace nngraph
