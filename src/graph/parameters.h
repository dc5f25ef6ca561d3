#pragma once
// A graph's parameters: the device copies of its data sources' weights, kept current with the
// data sources (the master copies), and each training step's updates, all or nothing.
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graph/plan.h"
#include "nngraph/data_source.h"

namespace nngraph {

class Backend;
class BuiltinOptimizer;

struct Parameters {
  // Per node, one WeightsState per weight source (ArrayDataSources share theirs among graphs).
  std::unordered_map<const FilterNode*, std::vector<WeightsState>> of;
  // Other data sources: the version() whose values the copies hold.
  std::unordered_map<const DataSource*, uint64_t> versions;
  uint64_t serial = 0;  // distinct per load_parameters
};
using Gradients = std::unordered_map<const FilterNode*, std::vector<GradientState>>;

// Reads every data source of the structure's nodes (gradient nodes read their forward node's).
std::shared_ptr<Parameters> load_parameters(const Structure& s, Backend& backend);

// Brings the copies up to date where a data source changed since they were read: another
// graph trained it, set_values replaced it, or another device holds newer values.
void refresh_parameters(Parameters& p, const Structure& s, Backend& backend);

// Inference: the parameters of each step with a folded node (FilterNode::folds_into), made
// again whenever the step's or the folded node's values changed.
class FoldedParameters {
 public:
  // Brings every folded copy up to date; true when it allocated one (captured steps hold the old).
  bool refresh(const Structure& s, const Parameters& p, Backend& backend);
  // The folded copy for a step's node; null where nothing folds into it.
  const WeightsState* of(const FilterNode* conv) const;
  // Counts the folds of that copy (0: none).
  uint64_t folds(const FilterNode* conv) const;

 private:
  struct Entry {
    WeightsState values;
    std::vector<uint64_t> stamps;  // the loads and changes it was made from
    uint64_t folds = 0;
  };
  std::unordered_map<const FilterNode*, Entry> entries_;
};

// Inference: the copies of filters that some steps' kernels read beside them
// (FilterNode::prepared_filter_floats), each made again whenever the values it was made from
// (the step's weights, or their folded copy) changed, or its source's shape did.
class PreparedFilters {
 public:
  // The step's copy for a source of shape `in`, brought up to date from `weights` (what the
  // step computes with); null where its kernels read none.
  const float* of(const Step& st, const WeightsState& weights, const ImageShape& in, const Parameters& p,
                  const FoldedParameters& folded, Backend& backend);

 private:
  struct Entry {
    ImageShape in;
    bool asked = false;             // the node said for `in` whether it takes a copy
    std::shared_ptr<Buffer> buffer;  // null: it takes none
    std::vector<uint64_t> stamps;    // empty until made
  };
  std::unordered_map<const FilterNode*, Entry> entries_;
};

// Copies of a graph's parameters, folded ones included, which its kernels read in place of the
// float32 masters. A half graph copies every product operand (TensorSpec::operand) into its
// storage dtype; a float32 graph copies only the filters of its channels-last nodes. Those
// filters are copied channels-last (KRSC), as their nodes read them, so no step reorders them.
// A copy is cast again when its master changed, except where the optimizer that changed it
// wrote the copy too (fused with the update).
class ParameterCopies {
 public:
  explicit ParameterCopies(DType storage) : storage_(storage) {}
  DType storage() const { return storage_; }
  // Brings every copy up to date (made anew for each load of the parameters, with the filters
  // of the nodes in `last` channels-last); true when it allocated (captured steps hold the old).
  bool refresh(const Structure& s, const Parameters& p, const FoldedParameters& folded,
               const std::set<const FilterNode*>& last, Backend& backend);
  // A node's parameters (one per source) with the copies in place of their masters; null
  // where none has a copy.
  const std::vector<WeightsState>* of(const FilterNode* node) const;
  // The same for a folded copy.
  const WeightsState* folded(const FilterNode* conv) const;
  // The tensors' copies for their optimizer to write, which makes those copies current.
  void attach(std::vector<TensorUpdate>& tensors);

 private:
  struct Copy {
    std::shared_ptr<Buffer> master, buffer;
    size_t count = 0;
    const DataSource* source = nullptr;   // whose values the master holds; null for a folded one
    const ArrayDataSource* array = nullptr;  // the same where it is one (its change count)
    const FilterNode* folded = nullptr;   // the convolution a folded master belongs to
    uint64_t stamp = 0;                   // the master's value count when cast (or written)
    bool cast = false;                    // cast at least once
    int outputs = 0;                      // a channels-last filter: O × filter (I, kh, kw) values
    ImageShape filter;
  };
  // Every copy and the parameters that use them, for the load `serial`.
  void make(const Structure& s, const Parameters& p, const FoldedParameters& folded,
            const std::set<const FilterNode*>& last, Backend& backend);
  WeightsState with_copies(const WeightsState& w, const std::vector<TensorSpec>& specs, const DataSource* source,
                           const FilterNode* folded, bool last, Backend& backend);
  DType storage_;
  uint64_t serial_ = 0;  // the load the copies are of
  std::unordered_map<const void*, Copy> copies_;  // by the master's data
  std::unordered_map<const FilterNode*, std::vector<WeightsState>> nodes_;
  std::unordered_map<const FilterNode*, WeightsState> folded_;
};

// One step's data-source updates. Built-in sources sharing a built-in optimizer are updated
// together (one launch on cuda, part of a captured step); the others update themselves.
struct Updates {
  struct Batch {
    BuiltinOptimizer* optimizer;
    OptimizerDescriptor descriptor;  // as it was when the step was encoded
    std::vector<TensorUpdate> tensors;
  };
  std::vector<Batch> batches;
  std::vector<std::pair<const FilterNode*, size_t>> others;  // node, index of its source
};
// The sources that update themselves (a Python optimizer or DataSource.update()).
std::vector<std::pair<const FilterNode*, size_t>> host_updates(const std::vector<const FilterNode*>& trained);
// The built-in optimizers' descriptors now (learning rates change between steps), for a step
// being encoded.
using Rates = std::vector<std::pair<const Optimizer*, OptimizerDescriptor>>;
Rates current_rates(const std::vector<ArrayDataSource*>& sources);
// What can fail in prepare_builtin, done first, before anything of the step changes: the
// optimizers' state vectors on the device, and which loss scaling (`scaling`, a float16
// graph's state, else null) the step counts skip.
void prepare_slots(const std::vector<const FilterNode*>& trained, Parameters& p,
                   const std::shared_ptr<const Buffer>& scaling);
// The built-in sources' tensors, their step counts advanced.
Updates prepare_builtin(const std::vector<const FilterNode*>& trained, Parameters& p, Gradients& g,
                        const Rates& rates);
// Runs every host update; if one raises, puts back what the others changed and rethrows.
void apply_host_updates(const std::vector<std::pair<const FilterNode*, size_t>>& others, Parameters& p,
                        Gradients& g);

// Gives the default-labelled ArrayDataSources of the structure's nodes distinct labels
// (their node's label, numbered where two would meet), so checkpoints can name them.
void name_data_sources(const Structure& s);

}  // namespace nngraph
