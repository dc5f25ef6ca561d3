#include "graph/parameters.h"

#include <algorithm>
#include <atomic>
#include <initializer_list>
#include <map>
#include <set>
#include <string>

#include "backends/backend.h"
#include "nngraph/error.h"
#include "ops/cast.h"

namespace nngraph {
namespace {

const FilterNode* owner(const FilterNode* node) { return node->trains() ? node->trains() : node; }

// Calls fn(node, index, source) for each weight source of the structure's nodes, each node once.
template <class F>
void each_source(const Structure& s, F&& fn) {
  std::set<const FilterNode*> seen;
  for (const FilterNode* node : s.order) {
    const FilterNode* f = owner(node);
    if (!seen.insert(f).second) continue;
    const auto sources = f->weight_sources();
    for (size_t i = 0; i < sources.size(); ++i) fn(f, i, sources[i]);
  }
}

void write(Backend& b, const std::shared_ptr<Buffer>& dst, const std::vector<float>& v) {
  if (dst) b.copy_from_host(dst->data(), v.data(), v.size() * sizeof(float));
}

// The loads and changes of a node's parameters: equal while its values are.
std::vector<uint64_t> stamps_of(const Parameters& p, std::initializer_list<const FilterNode*> nodes) {
  std::vector<uint64_t> stamps{p.serial};
  for (const FilterNode* f : nodes) {
    DataSource* ds = f->weight_sources()[0].source;
    auto* array = dynamic_cast<ArrayDataSource*>(ds);
    stamps.push_back(array ? array->changes() : p.versions.at(ds));
  }
  return stamps;
}

}  // namespace

std::shared_ptr<Parameters> load_parameters(const Structure& s, Backend& backend) {
  static std::atomic<uint64_t> loads{0};
  auto p = std::make_shared<Parameters>();
  p->serial = ++loads;
  each_source(s, [&](const FilterNode* f, size_t, const WeightSource& ws) {
    if (auto* array = dynamic_cast<ArrayDataSource*>(ws.source)) {
      p->of[f].push_back(array->device_values(backend.device(), f->label()));
      return;
    }
    const uint64_t version = ws.source->version();
    p->of[f].push_back(to_device(read_data_source(*ws.source, ws.descriptor, f->label()), backend.device()));
    p->versions[ws.source] = version;
  });
  return p;
}

void refresh_parameters(Parameters& p, const Structure& s, Backend& backend) {
  std::map<const DataSource*, uint64_t> reread;
  each_source(s, [&](const FilterNode* f, size_t i, const WeightSource& ws) {
    WeightsState& held = p.of.at(f)[i];
    if (auto* array = dynamic_cast<ArrayDataSource*>(ws.source)) {
      array->device_values(backend.device(), f->label());  // the same buffers, brought up to date
      return;
    }
    const uint64_t version = ws.source->version();
    if (p.versions[ws.source] == version) return;
    const LoadedWeights w = read_data_source(*ws.source, ws.descriptor, f->label());
    for (size_t t = 0; t < w.tensors.size(); ++t)
      if (w.tensors[t].size() != held.counts[t])
        fail("[", f->label(), "] data source '", ws.source->label(), "' changed whether it has ",
             tensor_specs(ws.descriptor)[t].name);
    for (size_t t = 0; t < w.tensors.size(); ++t)  // in place: captured steps keep their pointers
      write(backend, held.tensors[t], w.tensors[t]);
    reread[ws.source] = version;
  });
  for (const auto& [source, version] : reread) p.versions[source] = version;
}

bool FoldedParameters::refresh(const Structure& s, const Parameters& p, Backend& backend) {
  bool allocated = false;
  for (const Step& st : s.steps) {
    if (!st.folded) continue;
    const WeightsState& conv = p.of.at(st.node)[0];
    const WeightsState& norm = p.of.at(st.folded)[0];  // one value per output channel in each tensor
    std::vector<uint64_t> stamps = stamps_of(p, {st.node, st.folded});
    Entry& e = entries_[st.node];
    if (e.values.tensors.empty()) {
      const size_t channels = norm.counts.at(0);
      e.values.tensors = {backend.allocate(conv.weight_count() * sizeof(float)), backend.allocate(channels * sizeof(float))};
      e.values.counts = {conv.weight_count(), channels};
      allocated = true;
    } else if (e.stamps == stamps) {
      continue;
    }
    st.folded->fold(backend, conv, norm, e.values);
    e.stamps = std::move(stamps);
    ++e.folds;
  }
  return allocated;
}

const WeightsState* FoldedParameters::of(const FilterNode* conv) const {
  auto it = entries_.find(conv);
  return it == entries_.end() ? nullptr : &it->second.values;
}

uint64_t FoldedParameters::folds(const FilterNode* conv) const {
  auto it = entries_.find(conv);
  return it == entries_.end() ? 0 : it->second.folds;
}

const float* PreparedFilters::of(const Step& st, const WeightsState& weights, const ImageShape& in,
                                 const Parameters& p, const FoldedParameters& folded, Backend& backend) {
  Entry& e = entries_[st.node];
  if (!e.asked || !(e.in == in)) {  // the node's answer for this shape, asked once
    const size_t floats = st.node->prepared_filter_floats(backend, in);
    e = Entry{in, true, floats ? backend.allocate(floats * sizeof(float)) : nullptr, {}};
  }
  if (!e.buffer) return nullptr;
  std::vector<uint64_t> stamps = stamps_of(p, {st.node});
  if (st.folded) stamps.push_back(folded.folds(st.node));
  auto* prepared = static_cast<float*>(e.buffer->data());
  if (e.stamps == stamps) return prepared;
  e.stamps.clear();  // until the copy is whole
  st.node->prepare_filter(backend, weights, in, prepared);
  e.stamps = std::move(stamps);
  return prepared;
}

WeightsState ParameterCopies::with_copies(const WeightsState& w, const std::vector<TensorSpec>& specs,
                                          const DataSource* source, const FilterNode* folded, bool last,
                                          Backend& backend) {
  WeightsState out = w;
  out.dtypes.assign(w.tensors.size(), DType::Float32);
  out.layouts.assign(w.tensors.size(), Layout::NCHW);
  for (size_t t = 0; t < w.tensors.size() && t < specs.size(); ++t) {
    if (!specs[t].operand || !w.tensors[t]) continue;
    const bool krsc = last && specs[t].shape.size() == 4;
    if (storage_ == DType::Float32 && !krsc) continue;  // the master is what the kernels read
    Copy& c = copies_[w.tensors[t]->data()];
    if (!c.buffer) {
      c = {w.tensors[t], backend.allocate(w.counts[t] * dtype_size(storage_)), w.counts[t], source,
           dynamic_cast<const ArrayDataSource*>(source), folded};
      const auto& d = specs[t].shape;  // OIHW
      if (krsc) {
        c.outputs = static_cast<int>(d[0]);
        c.filter = {static_cast<int>(d[1]), static_cast<int>(d[2]), static_cast<int>(d[3])};
      }
    }
    out.tensors[t] = c.buffer;
    out.dtypes[t] = storage_;
    out.layouts[t] = c.outputs ? Layout::NHWC : Layout::NCHW;  // the copy's, where another node made it
  }
  return out;
}

void ParameterCopies::make(const Structure& s, const Parameters& p, const FoldedParameters& folded,
                           const std::set<const FilterNode*>& last, Backend& backend) {
  copies_.clear();
  nodes_.clear();
  folded_.clear();
  // A filter shared with a node that reads it in order (OIHW) keeps that order for both.
  std::set<const void*> in_order;
  each_source(s, [&](const FilterNode* f, size_t i, const WeightSource&) {
    if (!last.count(f))
      for (const auto& t : p.of.at(f)[i].tensors)
        if (t) in_order.insert(t->data());
  });
  each_source(s, [&](const FilterNode* f, size_t i, const WeightSource& ws) {
    auto& node = nodes_[f];
    node.resize(p.of.at(f).size());
    const WeightsState& w = p.of.at(f)[i];
    const bool shared = std::any_of(w.tensors.begin(), w.tensors.end(),
                                    [&](const auto& t) { return t && in_order.count(t->data()); });
    node[i] = with_copies(w, tensor_specs(ws.descriptor), ws.source, nullptr, last.count(f) && !shared, backend);
  });
  for (const Step& st : s.steps)
    if (const WeightsState* w = st.folded ? folded.of(st.node) : nullptr)
      folded_[st.node] = with_copies(*w, tensor_specs(st.node->weight_sources()[0].descriptor), nullptr, st.node,
                                     last.count(st.node), backend);
  serial_ = p.serial;
}

bool ParameterCopies::refresh(const Structure& s, const Parameters& p, const FoldedParameters& folded,
                              const std::set<const FilterNode*>& last, Backend& backend) {
  const bool fresh = serial_ != p.serial;
  if (fresh) make(s, p, folded, last, backend);
  for (auto& [master, c] : copies_) {
    const uint64_t stamp = c.folded ? folded.folds(c.folded) : c.array ? c.array->changes() : p.versions.at(c.source);
    if (c.cast && c.stamp == stamp) continue;
    if (c.outputs)  // OIHW as an O×I×kh×kw batch of images, to NHWC: KRSC
      dispatch<CastKernel>(backend, Tensor(master, c.outputs, c.filter),
                           Tensor(c.buffer->data(), c.outputs, c.filter, storage_, Layout::NHWC));
    else
      dispatch<CastKernel>(backend, Tensor::vector(master, c.count),
                           Tensor::vector(c.buffer->data(), c.count, storage_));
    c.stamp = stamp;
    c.cast = true;
  }
  return fresh;
}

const std::vector<WeightsState>* ParameterCopies::of(const FilterNode* node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? nullptr : &it->second;
}

const WeightsState* ParameterCopies::folded(const FilterNode* conv) const {
  auto it = folded_.find(conv);
  return it == folded_.end() ? nullptr : &it->second;
}

void ParameterCopies::attach(std::vector<TensorUpdate>& tensors) {
  for (TensorUpdate& t : tensors) {
    auto it = copies_.find(t.values);
    const bool reordered = it != copies_.end() && it->second.outputs;
    if (t.gradient_in_copy_order && !reordered) fail("a KRSC weight gradient without its channels-last copy");
    if (it == copies_.end()) continue;
    Copy& c = it->second;
    t.copy = c.buffer->data();
    t.copy_dtype = storage_;
    t.copy_inputs = c.outputs ? c.filter.c : 0;
    t.copy_taps = c.outputs ? c.filter.h * c.filter.w : 0;
    // The update's change is counted already (prepare_update): the copy written with it is current.
    if (c.array) c.stamp = c.array->changes();
  }
}

std::vector<std::pair<const FilterNode*, size_t>> host_updates(const std::vector<const FilterNode*>& trained) {
  std::vector<std::pair<const FilterNode*, size_t>> out;
  for (const FilterNode* f : trained) {
    const auto sources = f->weight_sources();
    for (size_t i = 0; i < sources.size(); ++i)
      if (!builtin_optimizer(sources[i].source)) out.push_back({f, i});
  }
  return out;
}

Rates current_rates(const std::vector<ArrayDataSource*>& sources) {
  Rates out;
  for (ArrayDataSource* ds : sources) {
    const Optimizer* opt = ds->optimizer().get();
    if (opt && std::none_of(out.begin(), out.end(), [&](const auto& r) { return r.first == opt; }))
      out.push_back({opt, opt->descriptor});
  }
  return out;
}

void prepare_slots(const std::vector<const FilterNode*>& trained, Parameters& p,
                   const std::shared_ptr<const Buffer>& scaling) {
  for (const FilterNode* f : trained) {
    const auto sources = f->weight_sources();
    for (size_t i = 0; i < sources.size(); ++i) {
      if (!builtin_optimizer(sources[i].source)) continue;
      auto* array = static_cast<ArrayDataSource*>(sources[i].source);
      array->prepare_slots(p.of.at(f)[i]);
      array->count_skips(scaling);
    }
  }
}

Updates prepare_builtin(const std::vector<const FilterNode*>& trained, Parameters& p, Gradients& g,
                        const Rates& rates) {
  Updates u;
  for (const FilterNode* f : trained) {
    const auto sources = f->weight_sources();
    for (size_t i = 0; i < sources.size(); ++i) {
      BuiltinOptimizer* opt = builtin_optimizer(sources[i].source);
      if (!opt) continue;
      auto* ds = static_cast<ArrayDataSource*>(sources[i].source);
      auto batch = std::find_if(u.batches.begin(), u.batches.end(), [&](const auto& b) { return b.optimizer == opt; });
      if (batch == u.batches.end()) {
        auto rate = std::find_if(rates.begin(), rates.end(), [&](const auto& r) { return r.first == opt; });
        batch = u.batches.insert(u.batches.end(), {opt, rate == rates.end() ? opt->descriptor : rate->second, {}});
      }
      auto tensors = ds->prepare_update(g.at(f)[i], p.of.at(f)[i]);
      batch->tensors.insert(batch->tensors.end(), tensors.begin(), tensors.end());
    }
  }
  return u;
}

void apply_host_updates(const std::vector<std::pair<const FilterNode*, size_t>>& others, Parameters& p,
                        Gradients& g) {
  std::vector<std::function<void()>> undo;
  std::vector<DataSource*> changed;  // told only once every update succeeded
  try {
    for (const auto& [f, i] : others) {
      DataSource* ds = f->weight_sources()[i].source;
      WeightsState& w = p.of.at(f)[i];
      if (auto* array = dynamic_cast<ArrayDataSource*>(ds)) {
        undo.push_back(array->snapshot(w));
        array->update(g.at(f)[i], w);
        continue;
      }
      undo.push_back(save_buffers(w));
      if (ds->update(g.at(f)[i], w)) changed.push_back(ds);
    }
  } catch (...) {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) (*it)();
    throw;
  }
  for (DataSource* ds : changed) {  // other graphs read the new values before their next run
    ds->advance_version();
    p.versions[ds] = ds->version();
  }
}

void name_data_sources(const Structure& s) {
  std::vector<std::pair<ArrayDataSource*, std::string>> unnamed;  // source, its node's label
  std::map<std::string, int> used;
  each_source(s, [&](const FilterNode* f, size_t, const WeightSource& ws) {
    auto* array = dynamic_cast<ArrayDataSource*>(ws.source);
    if (array && array->has_default_label()) {
      if (std::none_of(unnamed.begin(), unnamed.end(), [&](const auto& u) { return u.first == array; }))
        unnamed.push_back({array, f->label()});
    } else {
      ++used[ws.source->label()];
    }
  });
  std::map<std::string, int> wanted;  // how many unnamed sources would take each name
  for (auto& [ds, node] : unnamed) {
    if (ds->label().empty()) ds->set_label(node, true);
    ++wanted[ds->label()];
  }
  std::map<std::string, int> next;
  for (auto& [ds, node] : unnamed) {
    const std::string base = ds->label();
    std::string name = base;
    if (wanted[base] > 1 || used.count(base))
      do name = base + "_" + std::to_string(++next[base]); while (used.count(name) || wanted.count(name));
    ds->set_label(name, false);  // named once: later graphs keep it
    ++used[name];
  }
}

}  // namespace nngraph
