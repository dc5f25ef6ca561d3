#include "graph/plan.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "nngraph/error.h"
#include "ops/arithmetic.h"
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

// Per root tensor of a plan, among the steps that run a kernel: the one computing it and the
// (step, source) pairs reading its values (step -1: a result).
struct Uses {
  std::vector<int> producer;
  std::vector<std::vector<std::pair<int, size_t>>> readers;
};
Uses uses_of(const Structure& s, const Plan& p) {
  Uses u{std::vector<int>(s.tensor_count(), -1), std::vector<std::vector<std::pair<int, size_t>>>(s.tensor_count())};
  for (int i = 0; i < static_cast<int>(s.steps.size()); ++i) {
    if (p.passes[i]) continue;
    u.producer[p.root[s.steps[i].output]] = i;
    for (size_t k = 0; k < s.steps[i].inputs.size(); ++k)
      if (s.steps[i].node->reads_values(k)) u.readers[p.root[s.steps[i].inputs[k]]].emplace_back(i, k);
  }
  for (int t : s.results) u.readers[p.root[t]].emplace_back(-1, 0);
  return u;
}

// A residual addition (+ its neuron) joins the step computing one addend where that step
// accepts one, has no neuron of its own, runs after the other addend exists, and its result,
// of the sum's shape, has no other reader: batch norm + add + relu in one pass. Where both
// addends qualify, the later step joins (the other addend is then ready).
void join_additions(const Structure& s, Plan& p) {
  const int n_steps = static_cast<int>(s.steps.size());
  p.joins.assign(n_steps, {});
  const Uses u = uses_of(s, p);
  const auto& producer = u.producer;
  for (int j = 0; j < n_steps; ++j) {
    const Step& add = s.steps[j];
    if (p.passes[j] || p.converts[j] || !add.node->sums_sources() || add.inputs.size() != 2 || add.state >= 0 ||
        !add.output_needed)
      continue;
    const ImageShape& shape = p.shapes[add.output];
    int best = -1, addend = -1;
    for (int k = 0; k < 2; ++k) {
      const int t = p.root[add.inputs[k]], other = p.root[add.inputs[1 - k]];
      const int i = producer[t];
      if (i < 0 || i <= best || u.readers[t].size() != 1 || p.joins[i].step >= 0 || p.converts[i]) continue;
      const Step& st = s.steps[i];
      if (!st.node->accepts_addend() || st.fused.type != NeuronType::None || !(p.shapes[t] == shape) ||
          !(p.shapes[other] == shape) || p.dtypes[t] != p.dtypes[other] || producer[other] >= i)
        continue;
      best = i;
      addend = other;
    }
    if (best < 0) continue;
    p.joins[best] = {j, addend};
    p.passes[j] = true;
    p.root[add.output] = p.root[s.steps[best].output];
  }
  for (size_t t = 0; t < p.root.size(); ++t) p.root[t] = p.root[p.root[t]];
}

// Channels-last plans: a concatenation's part that only the concatenation reads, from a
// producer that writes channel views, is made in place as a view of the result (the
// concatenation copies only the others, and runs no kernel where there are none); a part's
// gradient whose every reader reads channel views is read in place from the result's
// gradient (its slicing step runs no kernel). Views of views resolve to the tensor that owns
// the memory.
void place_channel_views(const Structure& s, Plan& p) {
  const int n_steps = static_cast<int>(s.steps.size());
  p.views.assign(s.tensor_count(), {});
  const Uses u = uses_of(s, p);
  const auto& [producer, readers] = u;
  auto last = [&](int t) { return p.layouts[t] == Layout::NHWC; };
  for (int i = 0; i < n_steps; ++i) {
    const Step& st = s.steps[i];
    const int out = p.root[st.output];
    if (p.passes[i] || p.converts[i] || !last(out)) continue;
    if (st.node->concatenates()) {
      int channel = 0, copies = 0;
      for (size_t k = 0; k < st.inputs.size(); ++k) {
        const int t = p.root[st.inputs[k]], q = producer[t];
        const bool in_place = q >= 0 && last(t) && readers[t].size() == 1 && s.steps[q].node->writes_channel_view() &&
                              !p.converts[q] && p.views[t].whole < 0;
        if (in_place) p.views[t] = {out, channel};
        copies += !in_place;
        channel += p.shapes[t].c;
      }
      p.passes[i] = copies == 0;
      continue;
    }
    std::vector<ImageShape> shapes;
    for (int t : st.inputs) shapes.push_back(p.shapes[t]);
    const int channel = st.node->slices_channels(shapes);
    const int whole = p.root[st.inputs[0]];
    if (channel < 0 || !last(whole) || readers[out].empty()) continue;
    bool viewed = true;
    for (const auto& [r, k] : readers[out])
      viewed = viewed && r >= 0 && s.steps[r].node->reads_channel_view(k) && !p.converts[r];
    if (!viewed) continue;
    p.views[out] = {whole, channel};
    p.passes[i] = true;
  }
  for (auto& v : p.views)
    while (v.whole >= 0 && p.views[v.whole].whole >= 0) v = {p.views[v.whole].whole, v.channel + p.views[v.whole].channel};
}

// Training: a result that the gradient pass reads again, from a node that replays it (batch
// normalization + relu before a convolution), is computed again just before its first reader
// there, into a new tensor those readers read: the forward result dies with its last forward
// reader. Only where the node's own gradient (which keeps the source alive anyway) comes
// after. A residual sum (+ relu) of such a node's result and an image the gradient pass keeps
// anyway (the block before's output) is computed again by that node, joined to the addition
// as its forward step is (make_plan); never two sums in a row, so the addend is there.
void add_replays(Structure& s) {
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
        if (q < 0 || !s.steps[q].node->replays_result() || !s.steps[q].node->accepts_addend() ||
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
                          bool inference) {
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
      const bool sum = p && p->node->sums_sources() && p->inputs.size() == 2;
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
    NeuronDescriptor through;
    if (const FilterNode* forward = f->takes_neuron_gradient_of()) {
      const Step* p = fold_target(ins[0]);
      const NeuronDescriptor* neuron = p ? p->node->fusable_neuron_gradient() : nullptr;
      const int q = neuron ? step_of[p->inputs[1]] : -1;
      if (q >= 0 && s.steps[q].node == forward && same_neuron(s.steps[q].fused, *neuron)) {
        through = *neuron;
        roots_in[0] = p->inputs[0];
      }
    }
    step_of[out] = static_cast<int>(s.steps.size());
    s.steps.push_back(Step{f, std::move(roots_in), out, true, through});
    s.steps.back().state = s.state_of(i);
  }

  // Dead steps, last to first: a step runs if something needs its result or it trains weights.
  // Loss steps always run: their per-image losses are results too, trained or not.
  std::vector<bool> live(s.tensor_count(), false);
  for (int t : s.results) live[s.root[t]] = true;
  for (const LossBinding& l : s.losses)
    for (const Step& st : s.steps)
      if (st.node == l.node) live[st.output] = true;
  std::vector<Step> kept;
  for (auto it = s.steps.rbegin(); it != s.steps.rend(); ++it) {
    bool trainable = false;
    if (const FilterNode* trains = it->node->trains())
      for (const auto& w : trains->weight_sources()) trainable = trainable || w.source->trainable();
    it->output_needed = live[it->output];
    it->trains_weights = trainable;
    if (!live[it->state]) it->state = -1;
    if (!it->output_needed && it->state < 0 && !trainable) continue;
    for (int t : it->inputs) live[t] = true;
    kept.push_back(*it);
  }
  s.steps.assign(kept.rbegin(), kept.rend());
  if (s.training) add_replays(s);
  return s;
}

std::vector<ImageNodePtr> build_gradient_pass(const std::vector<std::shared_ptr<LossNode>>& losses) {
  Structure fwd;
  std::unordered_set<const FilterNode*> seen;
  std::unordered_map<const ImageNode*, int> tensor;
  std::unordered_map<const ImageNode*, std::vector<ImageNodePtr>> incoming;
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
    // A result read by several nodes receives the sum of their gradients.
    ImageNodePtr dy = found->second[0];
    for (size_t k = 1; k < found->second.size(); ++k)
      dy = ArithmeticNode::create(ArithmeticOp::Add, dy, found->second[k], f->label() + "_gradient_sum")->result_image();
    const auto grads = f->gradient_filters(dy);
    for (size_t i = 0; i < grads.size(); ++i) {
      roots.push_back(grads[i]->result_image());
      if (f->sources()[i]->producer()) incoming[f->sources()[i].get()].push_back(grads[i]->result_image());
    }
  }
  return roots;
}

Plan make_plan(const Structure& s, const std::vector<ImageShape>& source_shapes, DType storage, Layout layout,
               DeviceType device, bool recompute) {
  Plan p;
  p.storage = storage;
  p.layout = layout;
  p.shapes.resize(s.tensor_count());
  p.dtypes.assign(s.tensor_count(), DType::Float32);  // label sources and states
  for (int t : s.image_sources) p.dtypes[t] = storage;
  std::fill_n(p.dtypes.begin() + s.sources.size(), s.order.size(), storage);
  std::copy(source_shapes.begin(), source_shapes.end(), p.shapes.begin());
  const size_t n_src = s.sources.size();
  std::unordered_set<int> states;  // training states some step writes
  for (const Step& st : s.steps)
    if (st.state >= 0) states.insert(st.state);
  for (size_t i = 0; i < s.order.size(); ++i) {
    for (const auto& l : s.losses)  // label states take the shape of what the loss compares
      if (l.node == s.order[i]) p.shapes[l.labels] = p.shapes[s.node_inputs[i][0]];
    std::vector<ImageShape> ins;
    for (int t : s.node_inputs[i]) ins.push_back(p.shapes[t]);
    p.shapes[n_src + i] = s.order[i]->infer(ins);
    p.naive += p.shapes[n_src + i].count() * dtype_size(storage);
    if (states.count(s.state_of(i))) p.shapes[s.state_of(i)] = {static_cast<int>(s.order[i]->state_size(ins)), 1, 1};
  }
  p.layouts.assign(s.tensor_count(), Layout::NCHW);
  auto lay_out = [&](size_t t) {
    const ImageShape& sh = p.shapes[t];
    if (layout == Layout::NHWC && sh.c > 1 && sh.h * sh.w > 1) p.layouts[t] = Layout::NHWC;
  };
  for (int t : s.image_sources) lay_out(t);
  for (size_t i = 0; i < s.order.size(); ++i) lay_out(n_src + i);
  for (size_t t = n_src + 2 * s.order.size(); t < s.tensor_count(); ++t) {  // recomputed results
    const int of = s.recomputed_of(static_cast<int>(t));
    p.shapes[t] = p.shapes[of];
    p.dtypes[t] = p.dtypes[of];
    p.layouts[t] = p.layouts[of];
  }
  // Steps that pass their source through for these shapes alias it instead (tensor ids only
  // point back, so one pass in order resolves chains).
  const int n_steps = static_cast<int>(s.steps.size());
  p.root = s.root;
  p.passes.assign(n_steps, false);
  p.converts.assign(n_steps, false);
  p.batch_state.assign(n_steps, 0);
  for (int i = 0; i < n_steps; ++i) {
    const Step& st = s.steps[i];
    std::vector<ImageShape> ins;
    bool last = p.layouts[st.output] == Layout::NHWC;
    for (int t : st.inputs) {
      ins.push_back(p.shapes[t]);
      last = last || p.layouts[t] == Layout::NHWC;
    }
    p.converts[i] = last && !st.node->channels_last(device, ins);
    if (s.training && !st.node->is_gradient()) p.batch_state[i] = st.node->batch_state_size(ins);
    if (st.replay && !recompute) {  // the forward result is kept instead
      p.passes[i] = true;
      p.root[st.output] = p.root[s.recomputed_of(st.output)];
    } else if (st.state < 0 && st.node->passes_through(ins)) {
      p.passes[i] = true;
      p.root[st.output] = p.root[st.inputs[0]];
    } else if (last && !p.converts[i]) {
      p.channels_last_nodes.insert(st.node->trains() ? st.node->trains() : st.node);
    }
  }
  for (size_t t = 0; t < p.root.size(); ++t) p.root[t] = p.root[p.root[t]];
  join_additions(s, p);
  // A replay of a residual sum takes its node's forward join; where this plan joins no such
  // pair, the sum is kept instead.
  for (int i = 0; i < n_steps; ++i) {
    const Step& st = s.steps[i];
    if (!st.replay || p.passes[i]) continue;
    const int again = s.recomputed_of(st.output);
    int b = 0;
    while (s.steps[b].replay || s.steps[b].node != st.node) ++b;  // the forward step
    if (s.steps[b].output == again) continue;
    if (const int j = p.joins[b].step; j >= 0 && s.steps[j].output == again) {
      p.joins[i] = p.joins[b];
    } else {
      p.passes[i] = true;
      p.root[st.output] = p.root[again];
    }
  }
  place_channel_views(s, p);
  // Liveness of each arena tensor in step indices: [def, last use]; results live to the end.
  // A view's reads and writes count for the tensor that holds its memory.
  auto memory = [&](int t) { return p.views[p.root[t]].whole >= 0 ? p.views[p.root[t]].whole : p.root[t]; };
  std::vector<int> def(s.tensor_count(), -1), last(s.tensor_count(), -1);
  auto use = [&](int t, int i) { last[memory(t)] = std::max(last[memory(t)], i); };
  for (int i = 0; i < n_steps; ++i) {
    if (p.passes[i]) continue;
    for (int t : {s.steps[i].output_needed ? s.steps[i].output : -1, s.steps[i].state}) {
      if (t < 0) continue;
      if (def[memory(t)] < 0) def[memory(t)] = i;
      use(t, i);
    }
  }
  for (int i = 0; i < n_steps; ++i) {  // a step that passes its source through reads nothing
    for (size_t k = 0; k < s.steps[i].inputs.size() && !p.passes[i]; ++k)
      if (s.steps[i].node->reads_values(k)) use(s.steps[i].inputs[k], i);
    if (p.joins[i].addend >= 0) use(p.joins[i].addend, i);
  }
  for (int t : s.results) use(t, n_steps);
  for (int t : s.image_sources)  // cast or permuted in before the first step
    if (storage != DType::Float32 || p.layouts[t] == Layout::NHWC) def[t] = 0;
  auto padded = [&](int t) {  // 64-byte aligned
    return (p.shapes[t].count() * dtype_size(p.dtypes[t]) + 63) / 64 * 64;
  };
  std::vector<int> arena;
  for (size_t t = 0; t < s.tensor_count(); ++t)
    if (def[t] >= 0 && p.shapes[t].count()) arena.push_back(static_cast<int>(t));
  std::stable_sort(arena.begin(), arena.end(), [&](int a, int b) { return padded(a) > padded(b); });
  // Greedy first fit, largest first, among tensors whose lifetimes overlap.
  p.offset.assign(s.tensor_count(), 0);
  p.in_arena.assign(s.tensor_count(), false);
  std::vector<int> placed;
  for (int t : arena) {
    std::vector<std::pair<size_t, size_t>> busy;
    for (int u : placed)
      if (def[u] <= last[t] && def[t] <= last[u]) busy.emplace_back(p.offset[u], p.offset[u] + padded(u));
    std::sort(busy.begin(), busy.end());
    size_t at = 0;
    for (const auto& [b, e] : busy) {
      if (at + padded(t) <= b) break;
      at = std::max(at, e);
    }
    p.offset[t] = at;
    p.in_arena[t] = true;
    p.arena = std::max(p.arena, at + padded(t));
    placed.push_back(t);
  }
  return p;
}

}  // namespace nngraph
