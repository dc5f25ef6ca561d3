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
#include "nngraph/error.h"
#include "nngraph/image.h"
#include "nngraph/optimizer.h"
#include "nngraph/parameters.h"

namespace nngraph {

// A borrowed span of host values; valid from the call that returned it until purge().
struct WeightsView {
  const void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;  // the array's shape where the source has one: checked against the layout
};

// A layer's parameters on a device, as a graph holds them (MPSCNNConvolutionWeightsAndBiasesState,
// MPSCNNNormalizationGammaAndBetaState): one buffer per tensor of the descriptor's tensor_specs(),
// null where a source left an optional one out. The same shape carries their gradients, null
// for tensors the optimizer does not train.
struct WeightsState {
  std::vector<std::shared_ptr<Buffer>> tensors;
  std::vector<size_t> counts;  // 0 where the buffer is null
  // Per tensor where some is not float32 (a half graph's copies of its product operands);
  // empty: all float32.
  std::vector<DType> dtypes;
  DType dtype(size_t i) const { return i < dtypes.size() ? dtypes[i] : DType::Float32; }
  // Per tensor where some is a half graph's filter copy laid out channels-last (KRSC: O·kh·kw·I,
  // what NHWC convolutions read); empty: all in their descriptor's order (OIHW).
  std::vector<Layout> layouts;
  Layout layout(size_t i) const { return i < layouts.size() ? layouts[i] : Layout::NCHW; }
  // Convolution and matrix kinds: weights, then biases (null without).
  const std::shared_ptr<Buffer>& weights() const { return tensors.at(0); }
  std::shared_ptr<Buffer> biases() const { return tensors.size() > 1 ? tensors[1] : nullptr; }
  size_t weight_count() const { return counts.at(0); }
  size_t bias_count() const { return counts.size() > 1 ? counts[1] : 0; }
  size_t parameter_count() const;  // values in all tensors
};
using GradientState = WeightsState;

// OIHW: output, input/groups, kernel height, kernel width (default). OHWI: the MPS layout.
enum class WeightsLayout { OIHW, OHWI };

// The source of one layer's parameters (MPSCNNConvolutionDataSource and its kin): a graph
// loads it, copies each tensor its descriptor names, and purges it.
class DataSource {
 public:
  virtual ~DataSource() = default;
  // The layer kind and sizes, which name the tensors tensor() supplies.
  virtual ParameterDescriptor descriptor() = 0;
  virtual std::string label() = 0;
  // Make the tensors available; false means they could not be loaded.
  virtual bool load() = 0;
  // The graph has its own copy; the source may drop its memory.
  virtual void purge() = 0;
  // A tensor named by tensor_specs(descriptor()): weights and biases for convolutions and
  // matrices (the MPS protocol's weights() and biases()); gamma, beta, mean and variance for
  // normalizations. count 0: left out (optional tensors only).
  virtual WeightsView tensor(const std::string& name) = 0;
  // Convolutions: the order of the weights' axes.
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
  // Of a trainable source: whether update() will change tensor i of tensor_specs(descriptor())
  // (a trained one); graphs compute no gradient for those it will not. Asked before every
  // step, so it must be cheap (the default: all; ArrayDataSource: all but the frozen).
  virtual bool trains(size_t tensor) {
    (void)tensor;
    return true;
  }

  // Counts the updates graphs made through update(): a graph whose copy is older reads the
  // source again before its next run, so every graph computes with the latest values.
  uint64_t version() const { return version_; }
  void advance_version() { ++version_; }

 private:
  std::atomic<uint64_t> version_{0};
};

// The source's descriptor as kind K; an error naming `node` when it describes another kind.
template <class K>
K descriptor_as(DataSource& source, const std::string& node) {
  const ParameterDescriptor d = source.descriptor();
  if (const K* k = std::get_if<K>(&d)) return *k;
  fail("[", node, "] data source '", source.label(), "' describes ", kind_name(d), " parameters (", describe(d),
       "), not ", kind_name(ParameterDescriptor(K{})), " ones");
}

// An optimizer's state vectors per tensor (none for tensors it does not train) and its step
// count, on one device.
struct OptimizerState {
  std::vector<std::vector<std::shared_ptr<Buffer>>> slots;
  int64_t step = 0;
  // While a float16 graph with loss scaling updates the source: its scaling state on the
  // device (math::LossScaleState), whose count of skipped steps was `skips_from` then.
  // `step` counts the updates tried; those skipped since are not steps.
  std::shared_ptr<const Buffer> scaling;
  int64_t skips_from = 0;
};

// A data source as a node uses it: the descriptor its tensors must match.
struct WeightSource {
  DataSource* source;
  ParameterDescriptor descriptor;
};

enum class Initializer { He, Glorot, Zeros };

// Parameters held in host arrays (given, or drawn by an initializer) and, once a graph uses
// them, in one copy per device that every graph on that device reads and trains.
class ArrayDataSource : public DataSource {
 public:
  // tensors: one per tensor_specs(descriptor) entry, in that order; an empty one is left out
  // (optional tensors) or holds the spec's fill value. An empty label is a default one: the
  // first graph over the source names it after its node.
  ArrayDataSource(ParameterDescriptor descriptor, std::vector<std::vector<float>> tensors, std::string label);
  // Not copied: its cpu copy (device_values) is its own arrays' storage.
  ArrayDataSource(const ArrayDataSource&) = delete;
  ArrayDataSource& operator=(const ArrayDataSource&) = delete;
  // The "weights" tensor of a convolution or matrix. Convolutions: fan_in = I/groups·kh·kw,
  // fan_out = O/groups·kh·kw; matrices: columns and rows (1 and 1 when diagonal). he:
  // N(0, 2/fan_in), glorot: U(±sqrt(6/(fan_in+fan_out))). Deterministic for a seed.
  static std::vector<float> initial_weights(const ParameterDescriptor& d, Initializer init, uint64_t seed);

  ParameterDescriptor descriptor() override { return descriptor_; }
  const std::vector<TensorSpec>& specs() const { return specs_; }  // tensor_specs(descriptor())
  std::string label() override { return label_; }
  bool has_default_label() const { return default_label_; }
  // is_default: a name made for the user (a layer's kind), which a graph may number.
  void set_label(std::string label, bool is_default = false);
  bool load() override { return true; }
  void purge() override {}  // the arrays are the master copy
  // The latest values: after training, those of the graph that trained them.
  WeightsView tensor(const std::string& name) override;
  // Runs the optimizer on the device, in place; remembers the state so later readers
  // (tensor(), new graphs, checkpoints) see the trained values.
  bool update(const GradientState& gradient, WeightsState& weights) override;
  // update() in two halves, so a graph can apply many sources' tensors in one call: the
  // bookkeeping (state vectors, step count) and the tensors the built-in optimizer must update.
  std::vector<TensorUpdate> prepare_update(const GradientState& gradient, WeightsState& weights);
  // The optimizer's state vectors on the weights' device (the first update there), made whole
  // or not at all: the only part of an update that can fail, so a step runs it first.
  void prepare_slots(const WeightsState& weights);
  // From now on the steps that `scaling` (a float16 graph's loss scaling state; null: none)
  // skips are not counted; the count so far stays. May read the device, so a step calls it
  // with the other preparations that can fail.
  void count_skips(const std::shared_ptr<const Buffer>& scaling);
  bool trainable() override { return optimizer_ != nullptr; }
  bool trains(size_t tensor) override { return trainable() && slotted(tensor); }
  // A graph changed `weights` (this source's values on their device) in place, as batch
  // normalization's running statistics: the host arrays and other copies are older now.
  void changed_on_device(const WeightsState& weights);
  // Counts the changes of the values (any device or the host): equal counts, equal values.
  uint64_t changes() const { return changes_; }
  // A copy of what update() changes (values, optimizer state, step); calling the result puts
  // it back, for a step whose later update failed.
  std::function<void()> snapshot(const WeightsState& weights);

  // The values on `device`, which graphs there compute with and train in place: made from the
  // host values (checked, errors naming `node`) on first use, brought up to date when
  // another device or set_values changed them since. The reference lasts until the values
  // are first wanted on another device.
  const WeightsState& device_values(const Device& device, const std::string& node);

  const std::shared_ptr<Optimizer>& optimizer() const { return optimizer_; }
  void set_optimizer(std::shared_ptr<Optimizer> optimizer);
  // Replaces the values (host and, if a graph trains them, its device copy): one per spec,
  // each as long as now (empty where the tensor is left out).
  void set_values(std::vector<std::vector<float>> tensors);
  // Whether the source holds tensor i (optional ones may be left out).
  bool has(size_t i) const { return !values_[i].empty(); }
  // The tensors the optimizer keeps state for: trained and held.
  bool slotted(size_t i) const { return specs_[i].trained && has(i) && !frozen_[i]; }
  // Trained tensors the optimizer leaves as they are (a batch norm's gamma): names from the
  // descriptor's specs. A change restarts the optimizer's state vectors (the step count stays).
  void set_frozen(const std::vector<std::string>& names);
  std::vector<std::string> frozen() const;
  // Optimizer state as host arrays: slot_count() vectors per slotted tensor, in tensor order
  // (for convolutions: weight slots, then bias slots), and the step count; restored state
  // replaces the current one at the next update.
  std::vector<std::vector<float>> optimizer_slots();
  // Updates made, not counting steps a float16 graph skipped (reads that count on the device).
  int64_t optimizer_step() const;
  // Checks slots and step against the optimizer and the values, raising before any change.
  void check_optimizer_state(const std::vector<std::vector<float>>& slots, int64_t step);
  void set_optimizer_state(const std::vector<std::vector<float>>& slots, int64_t step);
  // Fresh optimizer state (zero slots, step 0) from the next update, as a new optimizer's.
  void reset_optimizer_state();
  // Exchanges each trained tensor's values with the average the optimizer keeps of them
  // (ema_decay), so a second call puts both back; before any update the average is the
  // values. Statistics and frozen tensors stay. Whole or not at all.
  void swap_average();
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
  ParameterDescriptor descriptor_;
  std::vector<TensorSpec> specs_;
  std::vector<std::vector<float>> values_;  // per spec; empty: left out
  std::vector<bool> frozen_;                // per spec
  std::string label_;
  bool default_label_ = false;
  std::shared_ptr<Optimizer> optimizer_;
  OptimizerState state_;
  std::vector<std::vector<float>> pending_slots_;  // restored state, uploaded at the next update
  std::vector<Copy> copies_;
  uint64_t changes_ = 0, host_changes_ = 0;  // each change of the values counts one
};

// Loads a source, reads the tensors `descriptor` names (checked against it: counts, shapes,
// NaN) as float32 (convolution weights OIHW), then purges it (also on error); errors name
// `node`. An empty vector: an optional tensor the source left out.
struct LoadedWeights {
  std::vector<std::vector<float>> tensors;
};
LoadedWeights read_data_source(DataSource& source, const ParameterDescriptor& descriptor, const std::string& node);
// New buffers on `device` holding w.
WeightsState to_device(const LoadedWeights& w, const Device& device);
// Device copies of w's buffers (and of `more`); calling the result copies them back, for a
// step whose later update failed.
std::function<void()> save_buffers(const WeightsState& w, const std::vector<std::shared_ptr<Buffer>>& more = {});
// The built-in optimizer a source's updates batch under, or null: it updates itself.
BuiltinOptimizer* builtin_optimizer(DataSource* source);

}  // namespace nngraph
