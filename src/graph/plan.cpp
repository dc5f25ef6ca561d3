// Per-shape plans: shapes, passes, joins, channel views, liveness and arena offsets.
#include <algorithm>
#include <unordered_set>

#include "graph/plan.h"
#include "nngraph/error.h"

namespace nngraph {
namespace {

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
void join_additions(const Structure& s, Plan& p, DeviceType device) {
  const int n_steps = static_cast<int>(s.steps.size());
  p.joins.assign(n_steps, {});
  const Uses u = uses_of(s, p);
  const auto& producer = u.producer;
  for (int j = 0; j < n_steps; ++j) {
    const Step& add = s.steps[j];
    if (p.passes[j] || p.converts[j] || !add.node->sums_sources() || add.inputs.size() != 2 || add.state >= 0 ||
        !p.need[j].output)
      continue;
    const ImageShape& shape = p.shapes[add.output];
    int best = -1, addend = -1;
    for (int k = 0; k < 2; ++k) {
      const int t = p.root[add.inputs[k]], other = p.root[add.inputs[1 - k]];
      const int i = producer[t];
      if (i < 0 || i <= best || u.readers[t].size() != 1 || p.joins[i].step >= 0 || p.converts[i]) continue;
      const Step& st = s.steps[i];
      if (!st.node->accepts_addend(device) || st.fused.type != NeuronType::None || !(p.shapes[t] == shape) ||
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

// Channels-last plans: a concatenation's part from a producer that writes channel views, read
// once by the concatenation and otherwise only by steps that read channel views (max
// pooling's gradient reads its result), is made in place as a view of the result (the
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
  auto reads_view = [&](int r, size_t k) { return r >= 0 && s.steps[r].node->reads_channel_view(k) && !p.converts[r]; };
  for (int i = 0; i < n_steps; ++i) {
    const Step& st = s.steps[i];
    const int out = p.root[st.output];
    if (p.passes[i] || p.converts[i] || !last(out)) continue;
    if (st.node->concatenates()) {
      int channel = 0, copies = 0;
      for (size_t k = 0; k < st.inputs.size(); ++k) {
        const int t = p.root[st.inputs[k]], q = producer[t];
        int by_this = 0;
        bool others_view = true;
        for (const auto& [r, j] : readers[t]) {
          by_this += r == i;
          others_view = others_view && (r == i || reads_view(r, j));
        }
        const bool in_place = q >= 0 && last(t) && by_this == 1 && others_view &&
                              s.steps[q].node->writes_channel_view() && !p.converts[q] && p.views[t].whole < 0;
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
    for (const auto& [r, k] : readers[out]) viewed = viewed && reads_view(r, k);
    if (!viewed) continue;
    p.views[out] = {whole, channel};
    p.passes[i] = true;
  }
  for (auto& v : p.views)
    while (v.whole >= 0 && p.views[v.whole].whole >= 0) v = {p.views[v.whole].whole, v.channel + p.views[v.whole].channel};
}

// The plan from its shapes, layouts and needs on: passes, joins, views, liveness and arena
// offsets, with the replay steps `replayed` computing again and the others' results kept.
Plan place(const Structure& s, Plan p, const std::vector<bool>& replayed, DeviceType device) {
  // Steps that pass their source through for these shapes alias it instead (tensor ids only
  // point back, so one pass in order resolves chains).
  const int n_steps = static_cast<int>(s.steps.size());
  p.root = s.root;
  p.passes.assign(n_steps, false);
  for (int i = 0; i < n_steps; ++i) p.passes[i] = !p.need[i].runs;
  p.converts.assign(n_steps, false);
  p.batch_state.assign(n_steps, 0);
  for (int i = 0; i < n_steps; ++i) {
    const Step& st = s.steps[i];
    if (!p.need[i].runs) continue;
    std::vector<ImageShape> ins;
    bool last = p.layouts[st.output] == Layout::NHWC;
    for (int t : st.inputs) {
      ins.push_back(p.shapes[t]);
      last = last || p.layouts[t] == Layout::NHWC;
    }
    p.converts[i] = last && !st.node->channels_last(device, ins);
    if (s.training && !st.node->is_gradient()) p.batch_state[i] = st.node->batch_state_size(ins);
    if (st.replay && !replayed[i]) {  // the forward result is kept instead
      p.passes[i] = true;
      p.root[st.output] = p.root[s.recomputed_of(st.output)];
    } else if (!p.need[i].state && st.node->passes_through(ins)) {
      p.passes[i] = true;
      p.root[st.output] = p.root[st.inputs[0]];
    } else if (last && !p.converts[i]) {
      p.channels_last_nodes.insert(st.node->trains() ? st.node->trains() : st.node);
    }
  }
  for (size_t t = 0; t < p.root.size(); ++t) p.root[t] = p.root[p.root[t]];
  join_additions(s, p, device);
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
    for (int t : {p.need[i].output ? s.steps[i].output : -1, p.need[i].state ? s.steps[i].state : -1}) {
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
    if (p.storage != DType::Float32 || p.layouts[t] == Layout::NHWC) def[t] = 0;
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

}  // namespace

Plan make_plan(const Structure& s, const std::vector<ImageShape>& source_shapes, DType storage, Layout layout,
               DeviceType device, bool recompute, std::vector<bool> trains, double budget) {
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
  const int n_steps = static_cast<int>(s.steps.size());
  if (trains.empty())
    for (const Step& st : s.steps) trains.push_back(st.trains_weights);
  p.need = step_needs(s, trains);
  // Recomputing a result pays a pass for memory: each replay is kept only where dropping it
  // (keeping the forward result instead) would make the arena larger.
  std::vector<bool> replayed(n_steps, false);
  for (int i = 0; i < n_steps; ++i) replayed[i] = recompute && s.steps[i].replay && p.need[i].runs;
  Plan best = place(s, p, replayed, device);
  for (int i = 0; i < n_steps; ++i) {
    if (!replayed[i]) continue;
    replayed[i] = false;
    Plan without = place(s, p, replayed, device);
    if (without.arena <= best.arena)
      best = std::move(without);
    else
      replayed[i] = true;
  }
  std::vector<int> left;  // replays still computing again, the largest result first
  for (int i = 0; i < n_steps; ++i)
    if (replayed[i]) left.push_back(i);
  if (budget <= 0 || left.empty()) return best;
  std::stable_sort(left.begin(), left.end(), [&](int a, int b) {
    return p.shapes[s.steps[a].output].count() > p.shapes[s.steps[b].output].count();
  });
  Plan kept = place(s, p, std::vector<bool>(n_steps, false), device);
  if (budget >= 1) return kept;
  const double limit = static_cast<double>(best.arena) +
                       budget * std::max(0.0, static_cast<double>(kept.arena) - static_cast<double>(best.arena));
  for (int i : left) {
    replayed[i] = false;
    Plan without = place(s, p, replayed, device);
    if (static_cast<double>(without.arena) <= limit)
      best = std::move(without);
    else
      replayed[i] = true;
  }
  return best;
}

}  // namespace nngraph
