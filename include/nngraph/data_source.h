#pragma once
// Weights enter a graph only through data sources (MPSCNNConvolutionDataSource).
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nngraph/descriptors.h"
#include "nngraph/dtype.h"
#include "nngraph/image.h"
#include "nngraph/optimizer.h"

namespace nngraph {

// A borrowed span of host values; valid from the call that returned it until purge().
struct WeightsView {
  const void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;  // the array's shape where the source has one: checked against the layout
};

// A layer's parameters on a device, as a graph holds them (MPSCNNConvolutionWeightsAndBiasesState);
// the same shape carries their gradients. biases may be null.
struct WeightsState {
  std::shared_ptr<Buffer> weights, biases;
  size_t weight_count = 0, bias_count = 0;
};
using GradientState = WeightsState;

// OIHW: output, input/groups, kernel height, kernel width (default). OHWI: the MPS layout.
enum class WeightsLayout { OIHW, OHWI };

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual ConvolutionDescriptor descriptor() = 0;
  virtual std::string label() = 0;
  // Make weights available; false means they could not be loaded.
  virtual bool load() = 0;
  // The graph has its own copy; the source may drop its memory.
  virtual void purge() = 0;
  virtual WeightsView weights() = 0;
  // count 0: the layer has no bias.
  virtual WeightsView biases() = 0;
  virtual WeightsLayout weights_layout() { return WeightsLayout::OIHW; }
  // Called by a training graph once the gradients of a step are ready: update `weights` in
  // place. Returns false when the source does not train (its layer stays frozen).
  virtual bool update(const GradientState& gradient, WeightsState& weights) {
    (void)gradient;
    (void)weights;
    return false;
  }
  // Whether update() will change weights; graphs skip weight gradients otherwise.
  virtual bool trainable() { return false; }

  // Counts the updates graphs made through update(): a graph whose copy is older reads the
  // source again before its next run, so every graph computes with the latest values.
  uint64_t version() const { return version_; }
  void advance_version() { ++version_; }

 private:
  std::atomic<uint64_t> version_{0};
};

// An optimizer's per-tensor state vectors and its step count, on one device.
struct OptimizerState {
  std::vector<std::shared_ptr<Buffer>> weight_slots, bias_slots;
  int64_t step = 0;
};

// A data source as a node uses it: the descriptor its weights must match.
struct WeightSource {
  DataSource* source;
  ConvolutionDescriptor descriptor;
};

enum class Initializer { He, Glorot, Zeros };

// Weights held in host arrays (given, or drawn by an initializer) and, once a graph uses
// them, in one copy per device that every graph on that device reads and trains.
class ArrayDataSource : public DataSource {
 public:
  // An empty label is a default one: the first graph over the source names it after its node.
  ArrayDataSource(ConvolutionDescriptor descriptor, std::vector<float> weights,
                  std::vector<float> biases, std::string label);
  // fan_in = I/groups·kh·kw, fan_out = O/groups·kh·kw; he: N(0, 2/fan_in),
  // glorot: U(±sqrt(6/(fan_in+fan_out))). Deterministic for a seed.
  static std::vector<float> initial_weights(const ConvolutionDescriptor& d, Initializer init,
                                            uint64_t seed);

  ConvolutionDescriptor descriptor() override { return descriptor_; }
  std::string label() override { return label_; }
  bool has_default_label() const { return default_label_; }
  // is_default: a name made for the user (a layer's kind), which a graph may number.
  void set_label(std::string label, bool is_default = false);
  bool load() override { return true; }
  void purge() override {}  // the arrays are the master copy
  // The latest values: after training, those of the graph that trained them.
  WeightsView weights() override;
  WeightsView biases() override;
  // Runs the optimizer on the device, in place; remembers the state so later readers
  // (weights(), new graphs, checkpoints) see the trained values.
  bool update(const GradientState& gradient, WeightsState& weights) override;
  // update() in two halves, so a graph can apply many sources' tensors in one call: the
  // bookkeeping (state vectors, step count) and the tensors the built-in optimizer must update.
  std::vector<TensorUpdate> prepare_update(const GradientState& gradient, WeightsState& weights);
  // The optimizer's state vectors on the weights' device (the first update there), made whole
  // or not at all: the only part of an update that can fail, so a step runs it first.
  void prepare_slots(const GradientState& gradient, const WeightsState& weights);
  bool trainable() override { return optimizer_ != nullptr; }
  // A copy of what update() changes (values, optimizer state, step); calling the result puts
  // it back, for a step whose later update failed.
  std::function<void()> snapshot(const WeightsState& weights);

  // The values on `device`, which graphs there compute with and train in place: made from the
  // host values (checked, errors naming `node`) on first use, brought up to date when
  // another device or set_values changed them since.
  WeightsState device_values(const Device& device, const std::string& node);

  const std::shared_ptr<Optimizer>& optimizer() const { return optimizer_; }
  void set_optimizer(std::shared_ptr<Optimizer> optimizer);
  // Replaces the values (host and, if a graph trains them, its device copy).
  void set_values(std::vector<float> weights, std::vector<float> biases);
  // Optimizer state as host arrays: [weight slots..., bias slots...] and the step count;
  // restored state replaces the current one at the next update.
  std::vector<std::vector<float>> optimizer_slots();
  int64_t optimizer_step() const { return state_.step; }
  // Checks slots and step against the optimizer and the values, raising before any change.
  void check_optimizer_state(const std::vector<std::vector<float>>& slots, int64_t step);
  void set_optimizer_state(const std::vector<std::vector<float>>& slots, int64_t step);
  // The optimizer's slot_count(), checked (0 to 16): a Python optimizer may return anything.
  size_t slot_count() const;

 private:
  struct Copy {
    Device device;
    WeightsState values;
    uint64_t changes = 0;  // `changes_` when these values were current
  };
  Copy* copy_on(const Device& device);
  // The host arrays from the newest device copy, where one is newer.
  void sync_host();
  void upload(Copy& copy);
  ConvolutionDescriptor descriptor_;
  std::vector<float> weights_, biases_;
  std::string label_;
  bool default_label_ = false;
  std::shared_ptr<Optimizer> optimizer_;
  OptimizerState state_;
  std::vector<std::vector<float>> pending_slots_;  // restored state, uploaded at the next update
  std::vector<Copy> copies_;
  uint64_t changes_ = 0, host_changes_ = 0;  // each change of the values counts one
};

// Loads a source, checks its arrays against its descriptor and returns float32 OIHW weights
// and biases, then purges it (also on error); errors name `node`.
struct LoadedWeights {
  std::vector<float> weights, biases;
};
LoadedWeights read_data_source(DataSource& source, const ConvolutionDescriptor& descriptor,
                               const std::string& node);
// New buffers on `device` holding w.
WeightsState to_device(const LoadedWeights& w, const Device& device);
// Device copies of w's buffers (and of `more`); calling the result copies them back, for a
// step whose later update failed.
std::function<void()> save_buffers(const WeightsState& w, const std::vector<std::shared_ptr<Buffer>>& more = {});
// The built-in optimizer a source's updates batch under, or null: it updates itself.
BuiltinOptimizer* builtin_optimizer(DataSource* source);

}  // namespace nngraph
