#pragma once
// Graph nodes: image nodes are data edges, filter nodes are operations (MPSNNFilterNode).
// Each op family declares its nodes in src/ops/<family>.h.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "nngraph/data_source.h"
#include "nngraph/descriptors.h"
#include "nngraph/image.h"

namespace nngraph {

class Backend;
class FilterNode;
struct RunningStatistics;  // ops/normalization.h

// A data edge. Made directly it is a graph source, optionally with a declared C×H×W shape
// (then the graph checks every shape when it is built); a filter node makes its result.
class ImageNode {
 public:
  explicit ImageNode(std::optional<ImageShape> shape = {}, std::string label = "");
  FilterNode* producer() const { return producer_; }
  // True for the training state a node leaves for its gradient node (FilterNode::state_image).
  bool is_state() const { return is_state_; }
  const std::optional<ImageShape>& shape() const { return shape_; }
  const std::string& label() const { return label_; }
  void set_label(std::string label) { label_ = std::move(label); }

 private:
  friend class FilterNode;
  FilterNode* producer_ = nullptr;
  bool is_state_ = false;
  std::optional<ImageShape> shape_;
  std::string label_;
};
using ImageNodePtr = std::shared_ptr<ImageNode>;
using FilterNodePtr = std::shared_ptr<FilterNode>;

// A node's parameters by name, as exports read them (Python: a dict).
using AttributeValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, NeuronDescriptor>;
using Attributes = std::vector<std::pair<std::string, AttributeValue>>;

struct EncodeArgs {
  Backend& backend;
  std::vector<const Image*> sources;
  const Image& result;          // empty when nothing consumes it
  const WeightsState* weights;  // one per weight source of the node (or of the node a gradient node trains)
  GradientState* gradients;     // weight gradients a gradient node writes, one per source (else null)
  NeuronDescriptor fused;       // a neuron the graph folded into this node
  const uint64_t* step;         // counts encodes (in the backend's memory): seeds dropout masks
  const Image* losses;          // loss nodes: per-image loss values (N×1×1×1)
  bool allow_tf32;              // matrix products may use tf32 tensor cores (cuda)
  const Image* state = nullptr;  // training graphs: the state this node leaves for its gradient node
  bool training = false;         // the graph trains: forward nodes run in training mode
  // Training graphs: the batch state of the node (or of the node a gradient node trains),
  // kept for the whole step (batch_state_size).
  const Buffer* batch_state = nullptr;
  // Loss nodes of a float16 training graph: the loss scale their gradient is multiplied by
  // (in the backend's memory; null: 1).
  const float* loss_scale = nullptr;
  // How the step stores its images: NHWC in a channels-last graph where the node reads it
  // (FilterNode::channels_last; its kernels take Tensor::image(image, layout)), else NCHW.
  Layout layout = Layout::NCHW;
  // An image of the result's shape the step adds before its fused neuron (Plan::joins): the
  // other addend of an addition whose step this one does too.
  const Image* addend = nullptr;
  // Training graphs: this forward node's result computed again for the gradient pass
  // (replays_result), from its batch state as the forward pass left it; nothing else changes.
  bool replay = false;
  // Inference: the node's filter as prepare_filter() wrote it, where it has one (else null).
  const float* prepared = nullptr;
  // The weights of the nodes reads_weights_of() names, one array per node (as `weights`), and
  // their gradients where they train this step (else null; as `gradients`).
  std::vector<const WeightsState*> read_weights;
  std::vector<GradientState*> read_gradients;
};

class FilterNode : public std::enable_shared_from_this<FilterNode> {
 public:
  virtual ~FilterNode() = default;
  FilterNode(const FilterNode&) = delete;
  FilterNode& operator=(const FilterNode&) = delete;

  // Shares ownership with this node, so holding the result keeps the node alive.
  ImageNodePtr result_image();
  const std::vector<ImageNodePtr>& sources() const { return sources_; }
  const std::string& label() const { return result_.label(); }
  void set_label(std::string label) {
    result_.set_label(std::move(label));
    default_label_ = false;
  }
  // True while the label is the node kind's default, which a graph may number.
  bool has_default_label() const { return default_label_; }

  // Gradient node(s) of this node, one per source: each turns d(loss)/d(result) into
  // d(loss)/d(source i) (MPS gradientFiltersWithSources).
  std::vector<FilterNodePtr> gradient_filters(const ImageNodePtr& source_gradient);
  // The single gradient node of a one-source node.
  FilterNodePtr gradient_filter(const ImageNodePtr& source_gradient);

  // The op's one name ("convolution", "max_pooling" is a label): errors, summaries, exports.
  const char* kind() const { return kind_; }
  // Result shape from source shapes; throws InvalidInput naming this node.
  virtual ImageShape infer(const std::vector<ImageShape>& sources) const = 0;
  // Its parameters for sources of these shapes, geometry resolved (paddings as explicit
  // amounts): what an export writes beside kind() and the data sources. None by default.
  virtual Attributes attributes(const std::vector<ImageShape>& sources) const {
    (void)sources;
    return {};
  }
  virtual void encode(const EncodeArgs& args) const = 0;
  // Trainable nodes: their data sources, each with the descriptor its weights must match.
  virtual std::vector<WeightSource> weight_sources() const { return {}; }
  // Floats per image this node leaves for its gradient node in a training graph (its
  // training state, read through state_image()); 0 when it leaves none.
  virtual size_t state_size(const std::vector<ImageShape>& sources) const {
    (void)sources;
    return 0;
  }
  ImageNodePtr state_image();
  // Floats a training step keeps for this node whatever the batch size (batch normalization's
  // per-channel statistics): written by the node, read by its gradient node and by
  // commit. 0 when it keeps none.
  virtual size_t batch_state_size(const std::vector<ImageShape>& sources) const {
    (void)sources;
    return 0;
  }
  // Training graphs, nodes with a batch state: the running statistics a step moves, added to
  // `out`. The step moves every node's in one dispatch with the weight updates, after every
  // check passed, so a failed step changes nothing.
  virtual void commit(const EncodeArgs& args, std::vector<RunningStatistics>& out) const {
    (void)args;
    (void)out;
  }
  // True when the result is source 0 itself (dropout at inference): no kernel runs.
  virtual bool identity(bool training) const {
    (void)training;
    return false;
  }
  // Whether source i may hold one image while the batch holds N (it broadcasts along N).
  virtual bool broadcasts_batch(size_t source) const {
    (void)source;
    return false;
  }
  // True when, for sources of these shapes, the result is source 0 unchanged: each plan
  // aliases it and runs no kernel (the gradient of an addend of the result's shape).
  virtual bool passes_through(const std::vector<ImageShape>& sources) const {
    (void)sources;
    return false;
  }

  // Whether its kernel reads source i's values; false where it needs only the shape (the
  // gradients of a concatenation and of a sum), so the planner need not keep that source.
  virtual bool reads_values(size_t source) const {
    (void)source;
    return true;
  }

  // A concatenation along channels of its sources, in order (views of whose result its parts
  // may be made in place).
  virtual bool concatenates() const { return false; }
  // Where the result is channels [k, k + C) of source 0 for sources of these shapes (the
  // gradient of a concatenation's part): k, else -1.
  virtual int slices_channels(const std::vector<ImageShape>& sources) const {
    (void)sources;
    return -1;
  }
  // Channels-last graphs: whether its kernels write the result, or read source i, as a view of
  // some channels of a wider image (Image::channels): a concatenation's part made in place, the
  // part's gradient read in place.
  virtual bool writes_channel_view() const { return false; }
  virtual bool reads_channel_view(size_t source) const {
    (void)source;
    return false;
  }

  // Channels-last graphs: whether this node reads and writes NHWC images (EncodeArgs::layout)
  // on `device` for sources of these shapes. The graph hands the others NCHW copies. A node
  // and its gradient node answer alike where they share a training state.
  virtual bool channels_last(DeviceType device, const std::vector<ImageShape>& sources) const {
    (void)device;
    (void)sources;
    return false;
  }

  // Fusion hooks; the planner folds a node into the step producing its source 0 where the
  // producer accepts it and nothing else reads that source.
  // A node applying a neuron to source 0 that a producer may apply in its epilogue instead.
  virtual const NeuronDescriptor* fusable_neuron() const { return nullptr; }
  // Producers that apply a following neuron in their epilogue (EncodeArgs::fused).
  virtual bool accepts_fused_neuron() const { return false; }
  // Producers whose gradient recomputes their output from what it reads anyway, so that in a
  // training graph a neuron whose derivative needs its input (GELU) may fold in too.
  virtual bool recomputes_neuron_input() const { return false; }
  // A gradient node computing dY ⊙ f'(source 1) (dY its source 0), which dY's producer may
  // do in its own pass when that producer reads the same source 1.
  virtual const NeuronDescriptor* fusable_neuron_gradient() const { return nullptr; }
  // Gradient producers that apply a following neuron gradient, ⊙ f'(source 1), in their pass.
  virtual bool accepts_fused_neuron_gradient() const { return false; }
  // A gradient node that can take its dY (source 0) through the gradient of the neuron folded
  // into its forward node's step, recomputing that neuron's output from what it reads itself:
  // returns that forward node. The planner then drops the neuron gradient's own pass and hands
  // the neuron over as EncodeArgs::fused.
  virtual const FilterNode* takes_neuron_gradient_of() const { return nullptr; }
  // A gradient node that can take its dY (source 0) through the gradient of a neuron applied
  // to its forward node's result: it then reads that result as one more source and applies f'
  // of it (EncodeArgs::fused) in its own pass over dY, and the neuron gradient's pass is dropped.
  virtual bool takes_neuron_gradient_of_result() const { return false; }
  // An elementwise sum of its sources (then any neuron folded into it); of two, the producer of
  // one addend may compute it in its own pass where that producer accepts_addend().
  virtual bool sums_sources() const { return false; }
  // Producers that add an image of their result's shape before their fused neuron
  // (EncodeArgs::addend) on that device: batch normalization, or a convolution where the
  // backend has the kernel, + a residual addition (+ relu) in one pass.
  virtual bool accepts_addend(DeviceType) const { return false; }
  // Training graphs: whether it can compute its result again, to the same values, from its
  // sources and batch state without changing either (EncodeArgs::replay), so a result that only
  // gradient steps read later is computed again before them instead of kept (Graph::recompute).
  virtual bool replays_result() const { return false; }
  // Inference: a node whose parameters fold into those of the node producing its source 0
  // (batch normalization into a convolution); that node's step then computes both with the
  // parameters fold() writes, and takes a neuron after this node.
  virtual bool folds_into(const FilterNode& producer) const {
    (void)producer;
    return false;
  }
  // Writes into `folded` (the producer's weights and one bias per output channel) the
  // producer's parameters with this node's (`own`) folded in.
  virtual void fold(Backend& backend, const WeightsState& producer, const WeightsState& own,
                    const WeightsState& folded) const;
  // Inference: the floats of a copy of its filter that its kernels on `backend` read beside
  // it (EncodeArgs::prepared) for a source of shape `in`, made by prepare_filter() again
  // whenever its weights change (the cpu's lane convolutions: the filter packed); 0: none.
  virtual size_t prepared_filter_floats(Backend& backend, const ImageShape& in) const {
    (void)backend;
    (void)in;
    return 0;
  }
  virtual void prepare_filter(Backend& backend, const WeightsState& weights, const ImageShape& in,
                              float* prepared) const;
  // Gradient and loss nodes: a graph holding one runs forward nodes in training mode.
  virtual bool is_gradient() const { return false; }
  // Gradient nodes of trainable nodes: the forward node whose weights they train.
  virtual const FilterNode* trains() const { return nullptr; }
  // Gradient nodes that read the weights of forward nodes and write their weight gradients
  // while those nodes' own gradient nodes train them (the stacked gradient of sibling 1×1
  // convolutions): those nodes, in the order of EncodeArgs::read_weights and read_gradients.
  virtual std::vector<const FilterNode*> reads_weights_of() const { return {}; }

 protected:
  FilterNode(std::vector<ImageNodePtr> sources, std::string label, const char* kind);
  virtual std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient);

 private:
  std::vector<ImageNodePtr> sources_;
  ImageNode result_, state_;
  const char* kind_;
  bool default_label_ = false;

 protected:
  void set_default_label(std::string label) {
    if (!default_label_ && !result_.label().empty()) return;
    result_.set_label(std::move(label));
    default_label_ = true;
  }
};

}  // namespace nngraph
