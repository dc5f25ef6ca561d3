#pragma once
#include <cstddef>
#include <cstdint>
// Shape-independent structure of a graph (order, fusion, aliases, dead steps) and the
// per-shape plan (descriptors and arena offsets) derived from it.
#include <set>
#include <string>
#include <vector>

#include "nngraph/nodes.h"
#include "ops/loss.h"

namespace nngraph {

struct Step {
  const FilterNode* node;
  std::vector<int> inputs;  // tensor ids (alias roots)
  int output;
  bool output_needed;       // false: a gradient step kept only for its weight gradients
  NeuronDescriptor fused;
  bool trains_weights = false;  // a gradient step whose forward node's data sources train
  int state = -1;               // tensor of the training state it writes, when a gradient step reads it
  // Inference: the batch normalization folded into this convolution (it computes with the
  // folded weights and biases, and any neuron after the normalization is `fused`).
  const FilterNode* folded = nullptr;
  // Training: computes again, for the gradient steps after it, the result of this node's
  // forward step (FilterNode::replays_result) into a tensor of Structure::recomputed, or the
  // residual sum that step computes where the plan joins them (taking the same Plan::joins).
  bool replay = false;
};

struct LossBinding {
  const LossNode* node;
  int labels, weights;  // source tensor ids
};

// Tensors 0..S-1 are the graph sources; tensor S+i is the result of order[i], S+O+i its
// training state (O nodes) and S+2O+r the r-th recomputed result.
struct Structure {
  std::vector<ImageNodePtr> sources;   // every producer-less image node
  std::vector<int> image_sources;      // of those, the ones encode() takes as images
  std::vector<LossBinding> losses;     // the others: label states of loss nodes
  std::vector<FilterNode*> order;
  std::vector<std::vector<int>> node_inputs;  // per order[i]
  std::vector<int> results;                   // tensor ids
  std::vector<int> root;                      // tensor whose memory a tensor uses
  std::vector<Step> steps;
  // Per recomputed result: the tensor a replay step computes again (what the gradient steps
  // after it read instead, so it need not live through the forward pass's end).
  std::vector<int> recomputed;
  bool training = false;  // holds gradient or loss nodes: forward nodes run in training mode
  size_t tensor_count() const { return sources.size() + 2 * order.size() + recomputed.size(); }
  int recomputed_of(int t) const {  // the tensor that t computes again, else t
    const int r = t - static_cast<int>(sources.size() + 2 * order.size());
    return r >= 0 ? recomputed[r] : t;
  }
  int state_of(size_t i) const { return static_cast<int>(sources.size() + order.size() + i); }
};

// Walks back from results and roots (images to compute without returning them), orders
// nodes, numbers default labels, folds neurons into convolutions (and, in inference, batch
// normalizations into the convolutions before them), aliases identity nodes and drops steps
// whose results nothing needs. Throws on a result no filter produced. Forward
// nodes run in training mode where gradient or loss nodes are present, unless `inference`.
// `device`: what its backend computes in one pass decides which residual sums are recomputed.
Structure build_structure(const std::vector<ImageNodePtr>& results, const std::vector<ImageNodePtr>& roots,
                          bool inference = false, DeviceType device = DeviceType::CPU);

// Per step of s: whether it runs (something reads its result or state, or it trains weights
// per `trains`, a flag per step, or writes the gradients of weights a step trains), and whether
// its result and its state are read.
struct StepNeed {
  bool runs = false, output = false, state = false;
};
std::vector<StepNeed> step_needs(const Structure& s, const std::vector<bool>& trains);

// Every gradient node from `loss` back to the graph sources; returns their result images.
std::vector<ImageNodePtr> build_gradient_pass(const std::vector<std::shared_ptr<LossNode>>& losses);

struct Plan {
  DType storage = DType::Float32;  // of every image between nodes
  std::vector<ImageShape> shapes;  // per tensor
  std::vector<DType> dtypes;       // per tensor: `storage` for images, float32 for states and labels
  std::vector<int> root;           // the structure's, with the aliases of steps that pass through
  // Per step: it runs no kernel, its result being its source 0 for these shapes, or computed by
  // the step that joins it.
  std::vector<bool> passes;
  // Per step, for the tensors trained now (a data source may freeze some between steps):
  // whether it runs at all (one that does not is in `passes` too), and whether its result and
  // state are needed (Step's, or less).
  std::vector<StepNeed> need;
  // Per step: the addition step whose sum it computes too (-1: none), adding that step's other
  // source, `addend` (EncodeArgs::addend), and applying its neuron; the two share a result.
  struct Join {
    int step = -1, addend = -1;
  };
  std::vector<Join> joins;
  // Per tensor: channels [channel, channel + C) of tensor `whole` (Image::channels), which
  // holds its memory, where a concatenation's part is made or its gradient read in place.
  struct View {
    int whole = -1, channel = 0;
  };
  std::vector<View> views;
  std::vector<size_t> offset;      // per root tensor, bytes per image in the arena
  // Per tensor: in the arena, written by a step or, for an image source the graph stores in
  // another dtype than float32 or NHWC, by the cast of the source at the start of the step.
  std::vector<bool> in_arena;
  std::vector<size_t> batch_state; // per step: floats of its batch state (training forward steps)
  Layout layout = Layout::NCHW;    // of the images between nodes
  // Per tensor: NHWC for a channels-last plan's images of more than one channel and pixel,
  // else NCHW (label sources, states, and images where the two are the same memory).
  std::vector<Layout> layouts;
  // Per step: its node does not read its NHWC images on this device, so it runs on NCHW
  // copies of them.
  std::vector<bool> converts;
  // The nodes (a gradient step's: the node it trains) with a step that reads NHWC images
  // itself; they read their filters channels-last (KRSC) too.
  std::set<const FilterNode*> channels_last_nodes;
  size_t arena = 0;                // bytes per image
  size_t naive = 0;                // bytes per image with one buffer per filter result
};

// Infers every shape (errors name the node; label states take their loss source's shape)
// and places intermediates, stored as `storage` in `layout` (NCHW or NHWC), in one arena.
// With `recompute` a replay step computes its result again only where keeping that result
// would make the arena larger; without it none does, and the results are kept. `budget` (0 to 1):
// the share of the bytes those recomputations save that the plan may spend keeping results
// again, the largest results first.
// `trains`: per step, whether it trains a tensor now (empty: every step that trains weights).
Plan make_plan(const Structure& s, const std::vector<ImageShape>& source_shapes, DType storage = DType::Float32,
               Layout layout = Layout::NCHW, DeviceType device = DeviceType::CPU, bool recompute = true,
               std::vector<bool> trains = {}, double budget = 0);

}  // namespace nngraph
