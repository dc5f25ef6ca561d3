#include "graph/plan.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "nngraph/error.h"

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

}  // namespace

Structure build_structure(const std::vector<ImageNodePtr>& results) {
  if (results.empty()) fail("[graph] needs at least one result image");
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
  number_default_labels(s.order);
  const int n_src = static_cast<int>(s.sources.size());
  std::unordered_map<const FilterNode*, int> out_of;
  for (size_t i = 0; i < s.order.size(); ++i) out_of[s.order[i]] = n_src + static_cast<int>(i);
  auto id_of = [&](const ImageNodePtr& img) {
    return img->producer() ? out_of.at(img->producer()) : tensor.at(img.get());
  };
  for (auto* f : s.order) {
    std::vector<int> ins;
    for (const auto& src : f->sources()) ins.push_back(id_of(src));
    s.node_inputs.push_back(std::move(ins));
  }
  for (const auto& r : results) s.results.push_back(id_of(r));

  // Consumers of each tensor; results count as one.
  std::vector<int> uses(s.tensor_count(), 0);
  for (const auto& ins : s.node_inputs)
    for (int t : ins) ++uses[t];
  for (int t : s.results) ++uses[t];

  s.root.resize(s.tensor_count());
  for (size_t t = 0; t < s.root.size(); ++t) s.root[t] = static_cast<int>(t);
  std::vector<int> step_of(s.tensor_count(), -1);
  for (size_t i = 0; i < s.order.size(); ++i) {
    FilterNode* f = s.order[i];
    const int out = n_src + static_cast<int>(i);
    const auto& ins = s.node_inputs[i];
    if (f->identity_at_inference()) {
      s.root[out] = s.root[ins[0]];
      continue;
    }
    if (auto* neuron = dynamic_cast<NeuronNode*>(f)) {
      const int src = ins[0];
      const int producer = step_of[src];
      if (producer >= 0 && s.root[src] == src && uses[src] == 1 &&
          s.steps[producer].node->accepts_fused_neuron() &&
          s.steps[producer].fused.type == NeuronType::None) {
        s.steps[producer].fused = neuron->neuron();
        s.root[out] = src;
        continue;
      }
    }
    std::vector<int> roots;
    for (int t : ins) roots.push_back(s.root[t]);
    step_of[out] = static_cast<int>(s.steps.size());
    s.steps.push_back(Step{f, std::move(roots), out, NeuronDescriptor{}});
  }
  return s;
}

Plan make_plan(const Structure& s, const std::vector<ImageShape>& source_shapes) {
  Plan p;
  p.shapes.resize(s.tensor_count());
  std::copy(source_shapes.begin(), source_shapes.end(), p.shapes.begin());
  const size_t n_src = s.sources.size();
  for (size_t i = 0; i < s.order.size(); ++i) {
    std::vector<ImageShape> ins;
    for (int t : s.node_inputs[i]) ins.push_back(p.shapes[t]);
    p.shapes[n_src + i] = s.order[i]->infer(ins);
    p.naive += p.shapes[n_src + i].count();
  }
  // Liveness of each arena tensor in step indices: [def, last use]; results live to the end.
  const int n_steps = static_cast<int>(s.steps.size());
  std::vector<int> def(s.tensor_count(), -1), last(s.tensor_count(), -1);
  for (int i = 0; i < n_steps; ++i) {
    def[s.steps[i].output] = i;
    last[s.steps[i].output] = std::max(last[s.steps[i].output], i);
    for (int t : s.steps[i].inputs) last[t] = std::max(last[t], i);
  }
  for (int t : s.results) last[s.root[t]] = n_steps;
  auto padded = [&](int t) { return (p.shapes[t].count() + 15) / 16 * 16; };  // 64-byte aligned
  std::vector<int> arena;
  for (size_t t = n_src; t < s.tensor_count(); ++t)
    if (def[t] >= 0) arena.push_back(static_cast<int>(t));
  std::stable_sort(arena.begin(), arena.end(), [&](int a, int b) { return padded(a) > padded(b); });
  // Greedy first fit, largest first, among tensors whose lifetimes overlap.
  p.offset.assign(s.tensor_count(), 0);
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
    p.arena = std::max(p.arena, at + padded(t));
    placed.push_back(t);
  }
  return p;
}

}  // namespace nngraph
