// The shape-independent structure of a graph: its nodes in order, the neurons and batch
// normalizations folded into their producers, aliases, dead steps and replays.
#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "graph/plan.h"
#include "nngraph/error.h"
#include "ops/arithmetic.h"
#include "ops/concatenation.h"
#include "ops/conv.h"
#include "ops/neuron.h"

namespace nngraph {
namespace {

// Post-order DFS: every node after its sources; sources collected left to right.
void visit(const ImageNodePtr& image, Structure& s, std::unordered_set<const FilterNode*>& seen,
           std::unordered_map<const ImageNode*, int>& tensor) {
  FilterNode* f = image->producer();
  if (!f) {
    if (!tensor.count(image.get())) {
      tensor[image.get()] = static_cast<int>(s.sources.size());
      s.sources.push_back(image);
    }
    return;
  }
  if (!seen.insert(f).second) return;
  for (const auto& src : f->sources()) visit(src, s, seen, tensor);
  s.order.push_back(f);
}

void number_default_labels(const std::vector<FilterNode*>& order) {
  std::map<std::string, int> count, next;
  for (auto* f : order) ++count[f->label()];
  for (auto* f : order)
    if (f->has_default_label() && count[f->label()] > 1) {
      const std::string base = f->label();
      std::string name;
      do name = base + "_" + std::to_string(++next[base]); while (count.count(name));
      f->set_label(name);
      count[name] = 1;
    }
}

bool same_neuron(const NeuronDescriptor& x, const NeuronDescriptor& y) {
  return x.type == y.type && x.a == y.a && x.b == y.b && x.c == y.c;
}

// Training: a result that the gradient pass reads again, from a node that replays it (batch
// normalization + relu before a convolution), is computed again just before its first reader
// there, into a new tensor those readers read: the forward result dies with its last forward
// reader. Only where the node's own gradient (which keeps the source alive anyway) comes
// after. A residual sum (+ relu) of such a node's result and an image the gradient pass keeps
// anyway (the block before's output) is computed again by that node, joined to the addition
// as its forward step is (make_plan); never two sums in a row, so the addend is there.
void add_replays(Structure& s, DeviceType device) {
  const int n = static_cast<int>(s.steps.size());
  std::vector<std::vector<std::pair<int, size_t>>> readers(s.tensor_count());
  std::vector<int> producer(s.tensor_count(), -1);
  int backward = n;  // the first step of the gradient pass
  for (int j = 0; j < n; ++j) {
    producer[s.steps[j].output] = j;
    if (s.steps[j].node->is_gradient()) backward = std::min(backward, j);
    for (size_t k = 0; k < s.steps[j].inputs.size(); ++k)
      if (s.steps[j].node->reads_values(k)) readers[s.steps[j].inputs[k]].emplace_back(j, k);
  }
  std::vector<bool> result(s.tensor_count(), false), recomputed(s.tensor_count(), false);
  for (int t : s.results) result[s.root[t]] = true;
  auto read_after = [&](int t, int from) {
    int first = n;
    for (const auto& [j, k] : readers[t])
      if (j >= from) first = std::min(first, j);
    return first;
  };
  std::vector<std::vector<Step>> before(n + 1);  // replay steps to insert before step j
  for (int i = 0; i < backward; ++i) {
    const Step& st = s.steps[i];
    const int y = st.output;
    if (!st.output_needed || result[y]) continue;
    Step replay = st;  // the step that computes y again
    if (st.node->sums_sources() && st.inputs.size() == 2 && st.state < 0) {
      int b = -1;
      for (int k = 1; k >= 0 && b < 0; --k) {  // the later addend's normalization, as the plan joins
        const int q = producer[st.inputs[k]], other = st.inputs[1 - k];
        if (q < 0 || !s.steps[q].node->replays_result() || !s.steps[q].node->accepts_addend(device) ||
            s.steps[q].fused.type != NeuronType::None || readers[st.inputs[k]].size() != 1 || recomputed[other] ||
            read_after(other, backward) == n || producer[other] > q)
          continue;
        b = q;
        replay = s.steps[q];
      }
      if (b < 0) continue;
    } else if (!st.node->replays_result()) {
      continue;
    }
    const int first = read_after(y, backward);
    int own = n;
    for (int j = backward; j < n && own == n; ++j)
      if (s.steps[j].node->trains() == replay.node) own = j;
    if (first == n || own == n || own < first) continue;
    const int copy = static_cast<int>(s.tensor_count());
    s.recomputed.push_back(y);
    s.root.push_back(copy);
    recomputed[y] = true;
    for (const auto& [j, k] : readers[y])
      if (j >= backward) s.steps[j].inputs[k] = copy;
    replay.output = copy;
    replay.state = -1;
    replay.trains_weights = false;
    replay.replay = true;
    before[first].push_back(replay);
  }
  if (s.recomputed.empty()) return;
  std::vector<Step> steps;
  for (int j = 0; j < n; ++j) {
    steps.insert(steps.end(), before[j].begin(), before[j].end());
    steps.push_back(s.steps[j]);
  }
  s.steps = std::move(steps);
}

}  // namespace

Structure build_structure(const std::vector<ImageNodePtr>& results, const std::vector<ImageNodePtr>& roots,
                          bool inference, DeviceType device) {
  if (results.empty() && roots.empty()) fail("[graph] needs at least one result image");
  Structure s;
  std::unordered_set<const FilterNode*> seen;
  std::unordered_map<const ImageNode*, int> tensor;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i]) fail("[graph] result image ", i, " is None");
    if (!results[i]->producer())
      fail("[graph] result image ", i, (results[i]->label().empty() ? "" : " '" + results[i]->label() + "'"),
           " is a source image that no filter node produces; pass a node's result_image");
    visit(results[i], s, seen, tensor);
  }
  for (const auto& r : roots) visit(r, s, seen, tensor);
  number_default_labels(s.order);
  const int n_src = static_cast<int>(s.sources.size());
  std::unordered_map<const FilterNode*, int> out_of;
  for (size_t i = 0; i < s.order.size(); ++i) {
    out_of[s.order[i]] = n_src + static_cast<int>(i);
    s.training = !inference && (s.training || s.order[i]->is_gradient());
  }
  const int n_nodes = static_cast<int>(s.order.size());
  auto id_of = [&](const ImageNodePtr& img) {
    if (!img->producer()) return tensor.at(img.get());
    return out_of.at(img->producer()) + (img->is_state() ? n_nodes : 0);
  };
  for (auto* f : s.order) {
    std::vector<int> ins;
    for (const auto& src : f->sources()) ins.push_back(id_of(src));
    s.node_inputs.push_back(std::move(ins));
    if (auto* loss = dynamic_cast<const LossNode*>(f))
      s.losses.push_back({loss, id_of(loss->labels()), id_of(loss->label_weights())});
  }
  for (int i = 0; i < n_src; ++i) {
    bool label = false;
    for (const auto& l : s.losses) label = label || l.labels == i || l.weights == i;
    if (!label) s.image_sources.push_back(i);
  }
  for (const auto& r : results) s.results.push_back(id_of(r));

  // Consumers of each tensor; results count as one.
  std::vector<int> uses(s.tensor_count(), 0);
  for (const auto& ins : s.node_inputs)
    for (int t : ins) ++uses[t];
  for (int t : s.results) ++uses[t];
  std::vector<std::vector<const FilterNode*>> readers(s.tensor_count());
  for (size_t i = 0; i < s.order.size(); ++i)
    for (int t : s.node_inputs[i]) readers[t].push_back(s.order[i]);
  // Whether a training graph may fold neuron f, whose derivative needs its input t, into t's
  // producer: every other reader of t is f's own gradient, whose result only the producer's
  // gradient reads, which then recomputes t (takes_neuron_gradient_of) so nothing reads it.
  auto input_recomputed = [&](const FilterNode* f, int t, const FilterNode* producer) {
    if (!producer->recomputes_neuron_input()) return false;
    int others = 0;
    for (const FilterNode* r : readers[t]) {
      if (r == f) continue;
      const auto* g = dynamic_cast<const NeuronGradientNode*>(r);
      if (!g || g->forward() != f) return false;
      const int out = out_of.at(g);
      if (uses[out] != 1 || readers[out].size() != 1 || readers[out][0]->takes_neuron_gradient_of() != producer)
        return false;
      ++others;
    }
    return uses[t] == 1 + others;
  };

  s.root.resize(s.tensor_count());
  for (size_t t = 0; t < s.root.size(); ++t) s.root[t] = static_cast<int>(t);
  std::vector<int> step_of(s.tensor_count(), -1);
  // The step that computes `src` when a neuron (or its gradient) may fold into it: src has no
  // other reader and the step has no folded neuron yet.
  auto fold_target = [&](int src) -> Step* {
    const int producer = step_of[src];
    if (producer < 0 || uses[src] != 1) return nullptr;
    Step& p = s.steps[producer];
    return p.fused.type == NeuronType::None ? &p : nullptr;
  };
  for (size_t i = 0; i < s.order.size(); ++i) {
    FilterNode* f = s.order[i];
    const int out = n_src + static_cast<int>(i);
    const auto& ins = s.node_inputs[i];
    if (f->identity(s.training)) {
      s.root[out] = s.root[ins[0]];
      continue;
    }
    // A neuron folds into the step computing its source (a convolution's epilogue). In
    // training, one whose derivative needs its input only where that input is recomputed.
    if (const NeuronDescriptor* neuron = f->fusable_neuron()) {
      Step* p = fold_target(ins[0]);
      if (s.training && !neuron->derivative_from_output()) {
        const int producer = step_of[ins[0]];
        const bool free = producer >= 0 && s.steps[producer].fused.type == NeuronType::None;
        p = free && input_recomputed(f, ins[0], s.steps[producer].node) ? &s.steps[producer] : nullptr;
      }
      if (p && p->node->accepts_fused_neuron()) {
        p->fused = *neuron;
        s.root[out] = s.root[ins[0]];
        continue;
      }
    }
    // Inference: a node folds its parameters into the step computing its source (batch
    // normalization into a convolution), which then also takes a neuron after it.
    if (!s.training) {
      Step* p = fold_target(ins[0]);
      if (p && !p->folded && f->folds_into(*p->node)) {
        p->folded = f;
        s.root[out] = s.root[ins[0]];
        step_of[out] = step_of[ins[0]];
        continue;
      }
    }
    // A neuron gradient whose dY comes from a gradient step for the neuron's own output (max
    // pooling after relu) folds into that step: one pass instead of two.
    // (Only where the derivative comes from the output: source 1 may be the input of a neuron
    // folded into its producer, which then holds the output.)
    // A sum (the gradients a residual block's output receives) reads the neuron's output as a
    // third source and multiplies by f' of it in the same pass.
    if (const NeuronDescriptor* neuron = f->fusable_neuron_gradient(); neuron && neuron->derivative_from_output()) {
      Step* p = fold_target(ins[0]);
      const bool sum = p && p->node->sums_sources();
      if (p && ((p->node->accepts_fused_neuron_gradient() && p->inputs[1] == s.root[ins[1]]) || sum)) {
        if (sum) p->inputs.push_back(s.root[ins[1]]);
        p->fused = *neuron;
        s.root[out] = ins[0];
        continue;
      }
    }
    std::vector<int> roots_in;
    for (int t : ins) roots_in.push_back(s.root[t]);
    // A gradient node whose dY is only a neuron gradient's result, for the neuron folded into
    // its forward node's step (batch normalization + relu), takes that neuron gradient's dY
    // and applies f' itself; the neuron gradient's step is left without readers and dropped.
    // (Where it could also read the result, a neuron whose derivative comes from its output
    // is not recomputed: the result holds that output.)
    NeuronDescriptor through;
    if (const FilterNode* forward = f->takes_neuron_gradient_of()) {
      const Step* p = fold_target(ins[0]);
      const NeuronDescriptor* neuron = p ? p->node->fusable_neuron_gradient() : nullptr;
      const int q = neuron ? step_of[p->inputs[1]] : -1;
      if (q >= 0 && s.steps[q].node == forward && same_neuron(s.steps[q].fused, *neuron) &&
          !(neuron->derivative_from_output() && f->takes_neuron_gradient_of_result())) {
        through = *neuron;
        roots_in[0] = p->inputs[0];
      }
    }
    if (through.type == NeuronType::None && f->takes_neuron_gradient_of_result()) {
      // A convolution's gradient whose dY is only the gradient of a neuron over the
      // convolution's result reads that result and applies f' of it as it reads dY (the
      // neuron's input, or its output where the neuron folded into the convolution and its
      // derivative comes from the output): one pass instead of two.
      const Step* p = fold_target(ins[0]);
      const NeuronDescriptor* neuron = p ? p->node->fusable_neuron_gradient() : nullptr;
      const auto forward = out_of.find(f->trains());  // absent: a gradient node built on its own
      const int result = forward == out_of.end() ? -1 : s.root[forward->second];
      // Not where this very neuron folded into the forward step needing its input, which the
      // result no longer holds (takes_neuron_gradient_of recomputes it there).
      const int q = result >= 0 ? step_of[result] : -1;
      const bool holds_output = neuron && q >= 0 && same_neuron(s.steps[q].fused, *neuron);
      if (neuron && result >= 0 && p->inputs[1] == result && (!holds_output || neuron->derivative_from_output())) {
        through = *neuron;
        roots_in[0] = p->inputs[0];
        roots_in.push_back(result);
      }
    }
    step_of[out] = static_cast<int>(s.steps.size());
    s.steps.push_back(Step{f, std::move(roots_in), out, true, through});
    s.steps.back().state = s.state_of(i);
  }

  // Dead steps: those whose results nothing needs and whose data sources train nothing.
  std::vector<bool> trainable(s.steps.size(), false);
  for (size_t k = 0; k < s.steps.size(); ++k)
    if (const FilterNode* trains = s.steps[k].node->trains())
      for (const auto& w : trains->weight_sources()) trainable[k] = trainable[k] || w.source->trainable();
  const std::vector<StepNeed> need = step_needs(s, trainable);
  std::vector<Step> kept;
  for (size_t k = 0; k < s.steps.size(); ++k) {
    if (!need[k].runs) continue;
    Step st = s.steps[k];
    st.output_needed = need[k].output;
    st.trains_weights = trainable[k];
    if (!need[k].state) st.state = -1;
    kept.push_back(st);
  }
  s.steps = std::move(kept);
  if (s.training) add_replays(s, device);
  return s;
}

std::vector<StepNeed> step_needs(const Structure& s, const std::vector<bool>& trains) {
  // Last to first: a step runs if a result, a loss or a running step reads its result or
  // state, or it trains weights, or it writes the weight gradients of a node a step trains
  // (FilterNode::reads_weights_of). Loss steps always run: their per-image losses are results too.
  std::unordered_set<const FilterNode*> trained;  // the nodes whose weights a step trains
  for (size_t j = 0; j < s.steps.size(); ++j)
    if (trains[j] && s.steps[j].node->trains()) trained.insert(s.steps[j].node->trains());
  std::vector<bool> writes(s.steps.size(), false);
  for (size_t k = 0; k < s.steps.size(); ++k)
    for (const FilterNode* f : s.steps[k].node->reads_weights_of()) writes[k] = writes[k] || trained.count(f);
  std::vector<bool> live(s.tensor_count(), false);
  for (int t : s.results) live[s.root[t]] = true;
  for (const LossBinding& l : s.losses)
    for (const Step& st : s.steps)
      if (st.node == l.node) live[st.output] = true;
  std::vector<StepNeed> need(s.steps.size());
  for (size_t k = s.steps.size(); k-- > 0;) {
    const Step& st = s.steps[k];
    StepNeed& n = need[k];
    n.output = live[st.output];
    n.state = st.state >= 0 && live[st.state];
    n.runs = n.output || n.state || trains[k] || writes[k];
    if (n.runs)
      for (int t : st.inputs) live[t] = true;
  }
  return need;
}

std::vector<ImageNodePtr> build_gradient_pass(const std::vector<std::shared_ptr<LossNode>>& losses) {
  Structure fwd;
  std::unordered_set<const FilterNode*> seen;
  std::unordered_map<const ImageNode*, int> tensor;
  std::unordered_map<const ImageNode*, std::vector<ImageNodePtr>> incoming;
  // Per image, the pointwise convolutions reading it, each with its dY and its gradient node.
  struct Sibling {
    std::shared_ptr<ConvolutionNode> conv;
    ImageNodePtr dy;
    std::shared_ptr<ConvolutionGradientNode> gradient;
  };
  std::unordered_map<const ImageNode*, std::vector<Sibling>> siblings;
  for (const auto& loss : losses) {  // each loss's gradient (its weight applied) flows into its source
    visit(loss->sources()[0], fwd, seen, tensor);
    incoming[loss->sources()[0].get()].push_back(loss->result_image());
  }
  std::vector<ImageNodePtr> roots;
  for (auto it = fwd.order.rbegin(); it != fwd.order.rend(); ++it) {
    FilterNode* f = *it;
    if (f->is_gradient()) fail("[", f->label(), "] a loss source depends on this gradient node");
    auto found = incoming.find(f->result_image().get());
    if (found == incoming.end()) continue;
    // A result read by several nodes receives the sum of their gradients: of two by an
    // addition (which the plan may join to a step), of more in one pass. Its pointwise
    // convolutions (of one accumulation) take their gradients from stacked products.
    auto& in = found->second;
    if (auto sib = siblings.find(f->result_image().get()); sib != siblings.end()) {
      std::map<AccumulatorPrecision, std::vector<Sibling>> by_accumulator;
      for (Sibling& c : sib->second) by_accumulator[c.conv->accumulator_precision()].push_back(c);
      for (auto& [accumulator, group] : by_accumulator) {
        if (group.size() < 2) continue;
        std::vector<ImageNodePtr> dys;
        std::vector<std::shared_ptr<ConvolutionNode>> convs;
        for (const Sibling& c : group) {
          in.erase(std::find(in.begin(), in.end(), c.gradient->result_image()));
          c.gradient->leave_to_stack();
          dys.push_back(c.dy);
          convs.push_back(c.conv);
        }
        const auto stacked = ConcatenationNode::create(dys, f->label() + "_stacked_dy")->result_image();
        const auto node = std::make_shared<StackedGradientNode>(stacked, f->result_image(), convs);
        roots.push_back(node->result_image());  // it writes weight gradients, whether or not dX is needed
        in.push_back(node->result_image());
      }
    }
    const std::string sum_label = f->label() + "_gradient_sum";
    ImageNodePtr dy = in[0];
    if (in.size() == 2)
      dy = ArithmeticNode::create(ArithmeticOp::Add, in[0], in[1], sum_label)->result_image();
    else if (in.size() > 2)
      dy = SumNode::create(in, sum_label)->result_image();
    const auto grads = f->gradient_filters(dy);
    for (size_t i = 0; i < grads.size(); ++i) {
      roots.push_back(grads[i]->result_image());
      if (f->sources()[i]->producer()) incoming[f->sources()[i].get()].push_back(grads[i]->result_image());
    }
    if (auto conv = std::dynamic_pointer_cast<ConvolutionNode>(f->shared_from_this());
        conv && conv->stacks_gradients() && f->sources()[0]->producer())
      siblings[f->sources()[0].get()].push_back(
          {conv, dy, std::static_pointer_cast<ConvolutionGradientNode>(grads[0])});
  }
  return roots;
}
}  // namespace nngraph
