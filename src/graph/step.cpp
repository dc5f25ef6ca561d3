#include "graph/step.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "backends/backend.h"
#include "nngraph/error.h"
#include "ops/cast.h"
#include "ops/loss_scale.h"
#include "ops/normalization.h"

namespace nngraph {
namespace {

// NNGRAPH_PROFILE=1: each step waits for the device and prints its time to stderr.
class Profile {
 public:
  explicit Profile(Backend& b) : backend_(b), on_(std::getenv("NNGRAPH_PROFILE") != nullptr) {
    if (on_) start_ = std::chrono::steady_clock::now();
  }
  bool on() const { return on_; }
  void mark(const std::string& what) {
    if (!on_) return;
    backend_.synchronize();
    const auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "[profile] %-28s %9.3f ms\n", what.c_str(),
                 std::chrono::duration<double, std::milli>(now - start_).count());
    start_ = now;
  }

 private:
  Backend& backend_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

StepRunner::StepRunner(const Structure& structure, Backend& backend, Device device, DType storage,
                       LossScaling scaling)
    : structure_(structure), backend_(backend), device_(device), copies_(storage), captures_(device), rule_(scaling) {
  if (storage != DType::Float16 || !structure.training || !rule_.enabled) return;
  math::LossScaleState initial;
  initial.scale = rule_.initial;
  scaling_ = backend_.upload(sizeof initial, [&](void* p) { std::memcpy(p, &initial, sizeof initial); });
}

std::pair<float, int64_t> StepRunner::loss_scale() const {
  if (!scaling_) return {1.f, 0};
  math::LossScaleState s;
  backend_.copy_to_host(&s, scaling_->data(), sizeof s);
  return {s.scale, s.skipped};
}

void StepRunner::gradients_for(const FilterNode* forward, const std::vector<WeightsState>& ws,
                               const std::vector<WeightsState>* copies) {
  // What the node's descriptors say, read once: statistics have no gradient, half operands a half one.
  auto [kind, first] = trainable_.try_emplace(forward);
  if (first) {
    for (const auto& w : forward->weight_sources()) {
      kind->second.sources.push_back(w.source);
      kind->second.specs.push_back(tensor_specs(w.descriptor));
    }
  }
  const Trainable& tr = kind->second;
  // Absent tensors and those the source leaves as they are (frozen) have none either.
  auto trains = [&](size_t i, size_t t) {
    return tr.specs[i][t].trained && ws[i].tensors[t] && tr.sources[i]->trains(t);
  };
  // A channels-last filter's gradient lies as its copy does (KRSC), which the built-in
  // optimizers read and write; an update on the host reads the descriptor's order.
  auto layout = [&](size_t i, size_t t) {
    const bool krsc = copies && (*copies)[i].layout(t) == Layout::NHWC && builtin_optimizer(tr.sources[i]);
    return krsc ? Layout::NHWC : Layout::NCHW;
  };
  auto& gs = gradients_[forward];
  bool same = gs.size() == ws.size();
  for (size_t i = 0; same && i < ws.size(); ++i) {
    same = gs[i].tensors.size() == ws[i].tensors.size();
    for (size_t t = 0; same && t < ws[i].tensors.size(); ++t)
      same = static_cast<bool>(gs[i].tensors[t]) == trains(i, t) && gs[i].layout(t) == layout(i, t);
  }
  if (same) return;
  captures_.clear();  // they write the old buffers
  gs.assign(ws.size(), {});
  for (size_t i = 0; i < ws.size(); ++i) {
    GradientState& g = gs[i];
    for (size_t t = 0; t < ws[i].tensors.size(); ++t) {
      const DType dtype = tr.specs[i][t].operand ? copies_.storage() : DType::Float32;
      const bool made = trains(i, t);
      g.tensors.push_back(made ? backend_.allocate(ws[i].counts[t] * dtype_size(dtype)) : nullptr);
      g.counts.push_back(made ? ws[i].counts[t] : 0);
      g.dtypes.push_back(dtype);
      g.layouts.push_back(layout(i, t));
    }
  }
}

void StepRunner::check_scaled(const std::vector<const FilterNode*>& trained, math::LossScaleState* state) {
  std::vector<Tensor> all;
  for (const FilterNode* f : trained)
    for (const GradientState& g : gradients_.at(f))
      for (size_t t = 0; t < g.tensors.size(); ++t)
        if (g.tensors[t]) all.push_back(Tensor::parameter(&g, t));
  dispatch<LossScaleCheckKernel>(backend_, all, state);
}

void StepRunner::check_finite(const std::vector<Image>& losses, const std::vector<const FilterNode*>& trained) {
  for (size_t i = 0; i < losses.size(); ++i)
    if (!dispatch<AllFiniteKernel>(backend_, losses[i]))
      fail<DeviceError>("[", structure_.losses[i].node->label(), "] loss is NaN or infinite; no weights were updated");
  for (const FilterNode* f : trained)
    for (const GradientState& g : gradients_.at(f))
      for (size_t t = 0; t < g.tensors.size(); ++t)
        if (g.tensors[t] && !dispatch<AllFiniteKernel>(backend_, Tensor::parameter(&g, t)))
          fail<DeviceError>("[", f->label(), "] weight gradient is NaN or infinite; no weights were updated");
}

Gradients StepRunner::float_gradients(const std::vector<std::pair<const FilterNode*, size_t>>& others) {
  Gradients out = gradients_;
  for (const auto& [f, i] : others) {
    GradientState& g = out.at(f)[i];
    for (size_t t = 0; t < g.tensors.size(); ++t) {
      if (!g.tensors[t] || g.dtype(t) == DType::Float32) continue;
      auto wide = backend_.allocate(g.counts[t] * sizeof(float));
      dispatch<CastKernel>(backend_, Tensor::parameter(&g, t), Tensor::vector(wide->data(), g.counts[t]));
      g.tensors[t] = std::move(wide);
    }
    g.dtypes.clear();
  }
  return out;
}

void StepRunner::make_batch_states(const Plan& plan) {
  for (size_t k = 0; k < plan.batch_state.size(); ++k) {
    const size_t bytes = plan.batch_state[k] * sizeof(float);
    if (!bytes) continue;
    auto& b = batch_states_[structure_.steps[k].node];
    if (b && b->bytes() >= bytes) continue;
    captures_.clear();  // they hold the old buffer
    b = backend_.allocate(bytes);
  }
}

void StepRunner::note_commits(Parameters& wm) const {
  for (const auto& [node, buffer] : batch_states_) {
    const auto sources = node->weight_sources();
    for (size_t i = 0; i < sources.size(); ++i)
      if (auto* array = dynamic_cast<ArrayDataSource*>(sources[i].source)) array->changed_on_device(wm.of.at(node)[i]);
  }
}

std::vector<Image> StepRunner::run(const Plan& plan, Parameters& wm, const std::vector<Image>& src,
                                   const std::vector<LossLabels>& labels, uint64_t step, const Rates& rates,
                                   Options options, std::vector<Image>& losses, Image& scaling) {
  int n = 0;  // a source of one image may broadcast along the batch
  for (const Image& img : src) n = std::max(n, img.batch());
  const size_t need = plan.arena * n;
  if (!arena_ || arena_->bytes() < need) {
    arena_.reset();  // free the old arena before taking a larger one
    captures_.clear();
    arena_ = backend_.allocate(need);
  }
  if (!step_counter_) step_counter_ = backend_.allocate(sizeof(uint64_t));
  auto* counter = static_cast<uint64_t*>(step_counter_->data());
  const auto& s = structure_;
  // Sources in tensor order: images, then each loss's labels and weights.
  std::vector<Image> sources(s.sources.size());
  bool all_half = true;
  const bool half_graph = plan.storage != DType::Float32;  // casts its image sources into the arena
  for (size_t i = 0; i < src.size(); ++i) {
    all_half = all_half && src[i].dtype() == DType::Float16;
    const bool as_given = half_graph || src[i].dtype() == DType::Float32;
    sources[s.image_sources[i]] = as_given ? src[i] : src[i].converted(DType::Float32);
  }
  // Results come back as float16 when every source is, else as float32.
  const DType result_dtype = all_half ? DType::Float16 : DType::Float32;
  for (size_t i = 0; i < s.losses.size(); ++i) {
    sources[s.losses[i].labels] = labels[i].labels;
    sources[s.losses[i].weights] = labels[i].weights.empty() ? captures_.ones(n) : labels[i].weights;
    losses.push_back(Image::allocate({n, {1, 1, 1}, DType::Float32}, device_));
  }
  refresh_parameters(wm, s, backend_);  // another graph may have trained a shared source
  if (folded_.refresh(s, wm, backend_)) captures_.clear();
  // Half graphs compute on copies, and so do channels-last filters (KRSC).
  const bool copied = half_graph || !plan.channels_last_nodes.empty();
  if (copied && copies_.refresh(s, wm, folded_, plan.channels_last_nodes, backend_)) captures_.clear();
  // Gradient buffers are made before any capture: what a capture allocates is its scratch.
  std::vector<const FilterNode*> trained;
  for (size_t k = 0; k < s.steps.size(); ++k) {
    const Step& st = s.steps[k];
    if (!st.trains_weights || !plan.need[k].runs) continue;  // its tensors are frozen now
    trained.push_back(st.node->trains() ? st.node->trains() : st.node);
    gradients_for(trained.back(), wm.of.at(trained.back()), copied ? copies_.of(trained.back()) : nullptr);
  }
  const auto others = host_updates(trained);
  auto* scale_state = scaling_ ? static_cast<math::LossScaleState*>(scaling_->data()) : nullptr;
  if (scale_state && !others.empty()) {
    const auto& [f, i] = others.front();
    fail<Unsupported>("[", f->label(), "] data source '", f->weight_sources()[i].source->label(),
                      "' updates itself on the host, which a float16 graph's loss scaling cannot skip or "
                      "unscale: give it a built-in optimizer, or train in bfloat16, or turn loss scaling off");
  }
  make_batch_states(plan);
  Profile profile(backend_);
  // A step whose sources update themselves on the host is not captured: it must undo them on failure.
  Replay* r = backend_.can_capture() && !options.check_numerics && !profile.on() && others.empty()
                  ? &captures_.replay_for(plan, n, arena_->data(), wm, options.allow_tf32, sources, s.losses.size())
                  : nullptr;
  std::vector<Image> t(s.tensor_count());
  std::vector<Backend::Copy> copies_in, copies_out;  // into the replay's buffers; out of them and the arena
  const Image* unit = captures_.made_ones(n);
  for (size_t i = 0; i < sources.size(); ++i) {
    t[i] = r ? r->sources[i] : sources[i];
    if (!r) continue;
    const bool is_unit = unit && unit->data() == sources[i].data();
    if (!is_unit || !r->holds_unit[i])
      copies_in.push_back({t[i].data(), sources[i].data(), sources[i].descriptor().bytes()});
    r->holds_unit[i] = is_unit;
  }
  const std::vector<Image>& loss_out = r ? r->losses : losses;
  const size_t n_src = s.sources.size();
  // Run eagerly, a result whose memory is its own (not a source's, nor part of another
  // tensor's) is written where it is returned: a copy out of the arena would read it again,
  // and fault a large result's pages in twice. Those converted after the step are not.
  std::map<int, Image> direct;  // root tensor → its memory
  for (int res : s.results) {
    const int root = plan.root[res];
    if (!r && root >= static_cast<int>(n_src) && plan.in_arena[root] && plan.views[root].whole < 0 &&
        plan.dtypes[root] == result_dtype && plan.layouts[root] != Layout::NHWC)
      direct.try_emplace(root, Image::allocate({n, plan.shapes[root], plan.dtypes[root]}, device_));
  }
  // A half or channels-last graph's sources into the arena, cast and permuted.
  std::vector<std::pair<Tensor, Tensor>> casts_in;
  for (size_t i = 0; i < t.size(); ++i) {
    if (plan.root[i] != static_cast<int>(i) || !plan.in_arena[i]) continue;
    const int batch = i < n_src ? t[i].batch() : n;
    Image slot({batch, plan.shapes[i], plan.dtypes[i]}, arena_, plan.offset[i] * n);
    if (i < n_src) casts_in.push_back({t[i], Tensor::image(slot, plan.layouts[i])});
    const auto d = direct.find(static_cast<int>(i));
    t[i] = d == direct.end() ? slot : d->second;
  }
  for (size_t i = n_src; i < t.size(); ++i)
    if (const Plan::View& v = plan.views[i]; v.whole >= 0) t[i] = t[v.whole].channels(v.channel, plan.shapes[i].c);
  for (size_t i = n_src; i < t.size(); ++i)
    if (plan.root[i] != static_cast<int>(i)) t[i] = t[plan.root[i]];
  for (size_t i = 0; r && i < losses.size(); ++i)
    copies_out.push_back({losses[i].data(), r->losses[i].data(), losses[i].descriptor().bytes()});
  if (scale_state) {
    scaling = Image::allocate({1, {2, 1, 1}, DType::Float32}, device_);
    copies_out.push_back({scaling.data(), scale_state->report, sizeof scale_state->report});
  }
  std::vector<Image> out;
  // Results in another dtype or in NHWC are converted after the step.
  auto converted = [&](int res) { return t[res].dtype() != result_dtype || plan.layouts[res] == Layout::NHWC; };
  for (int res : s.results) {
    if (converted(res)) continue;
    if (direct.erase(plan.root[res])) {  // returned once where it lies; a second time as a copy
      out.push_back(t[res]);
      continue;
    }
    out.push_back(Image::allocate(t[res].descriptor(), device_));
    copies_out.push_back({out.back().data(), t[res].data(), t[res].descriptor().bytes()});
  }
  const Image none;
  auto inputs_of = [&](const Step& st) {
    std::vector<const Image*> ins;
    for (int id : st.inputs) ins.push_back(&t[id]);
    return ins;
  };
  // The weights a node's kernels read: its compute copy (half, KRSC) where it has one.
  auto weights_of = [&](const FilterNode* owner) -> const WeightsState* {
    const std::vector<WeightsState>* copy = copied ? copies_.of(owner) : nullptr;
    const auto w = wm.of.find(owner);
    return copy ? copy->data() : w == wm.of.end() ? nullptr : w->second.data();
  };
  // `result`: where the step writes its result instead of the arena (its NCHW copy).
  auto args_of = [&](size_t k, const std::vector<const Image*>& ins, const Image* result = nullptr) {
    const Step& st = s.steps[k];
    const StepNeed& need = plan.need[k];
    const FilterNode* owner = st.node->trains() ? st.node->trains() : st.node;
    auto batch = batch_states_.find(owner);
    const Image* loss = nullptr;
    for (size_t i = 0; i < s.losses.size(); ++i)
      if (s.losses[i].node == st.node) loss = &loss_out[i];
    const WeightsState* folded = !st.folded ? nullptr : copied ? copies_.folded(st.node) : folded_.of(st.node);
    const WeightsState* weights = folded ? folded : weights_of(owner);
    EncodeArgs a{backend_, ins, result ? *result : need.output ? t[st.output] : none, weights,
                 st.trains_weights ? gradients_.at(owner).data() : nullptr, st.fused,
                 counter, loss, options.allow_tf32, need.state ? &t[st.state] : nullptr, s.training};
    a.batch_state = batch == batch_states_.end() ? nullptr : batch->second.get();
    if (scale_state) a.loss_scale = &scale_state->scale;
    a.layout = plan.layout;
    a.replay = st.replay;
    for (const FilterNode* f : st.node->reads_weights_of()) {
      a.read_weights.push_back(weights_of(f));
      const bool trains = std::find(trained.begin(), trained.end(), f) != trained.end();
      a.read_gradients.push_back(trains ? gradients_.at(f).data() : nullptr);
    }
    if (!s.training && weights && !ins.empty())
      a.prepared = prepared_.of(st, *weights, ins[0]->shape(), wm, folded_, backend_);
    return a;
  };
  // A step whose node does not read NHWC images: NCHW copies in, its NCHW result permuted back.
  auto encode_on_copies = [&](size_t k) {
    const Step& st = s.steps[k];
    std::vector<Image> copies;
    copies.reserve(st.inputs.size() + 1);
    std::vector<const Image*> ins = inputs_of(st);
    for (size_t j = 0; j < ins.size(); ++j) {
      if (plan.layouts[st.inputs[j]] != Layout::NHWC) continue;
      copies.push_back(Image::allocate(ins[j]->descriptor(), device_));
      dispatch<CastKernel>(backend_, Tensor::image(*ins[j], Layout::NHWC), copies.back());
      ins[j] = &copies.back();
    }
    const bool permute_out = plan.need[k].output && plan.layouts[st.output] == Layout::NHWC;
    if (permute_out) copies.push_back(Image::allocate(t[st.output].descriptor(), device_));
    EncodeArgs a = args_of(k, ins, permute_out ? &copies.back() : nullptr);
    a.layout = Layout::NCHW;
    st.node->encode(a);
    if (permute_out) dispatch<CastKernel>(backend_, copies.back(), Tensor::image(t[st.output], Layout::NHWC));
  };
  auto run = [&] {
    for (const auto& [from, to] : casts_in) dispatch<CastKernel>(backend_, from, to);
    for (size_t k = 0; k < s.steps.size(); ++k) {
      if (plan.passes[k]) continue;
      try {
        if (plan.converts[k]) {
          encode_on_copies(k);
        } else {
          EncodeArgs a = args_of(k, inputs_of(s.steps[k]));
          if (const Plan::Join& join = plan.joins[k]; join.step >= 0) {
            a.addend = &t[join.addend];
            a.fused = s.steps[join.step].fused;
          }
          s.steps[k].node->encode(a);
        }
      } catch (const KernelRefusal& e) {  // a kernel without this dtype or layout: name the node
        fail<Unsupported>("[", s.steps[k].node->label(), "] ", e.reason());
      }
      profile.mark(s.steps[k].node->label());
    }
  };
  auto commit = [&] {
    std::vector<RunningStatistics> moved;
    for (size_t k = 0; k < s.steps.size(); ++k) {
      const Step& st = s.steps[k];
      if (st.node->is_gradient() || st.replay || !plan.need[k].runs || !batch_states_.count(st.node)) continue;
      st.node->commit(args_of(k, inputs_of(st)), moved);
    }
    if (!moved.empty()) dispatch<BatchNormalizationStatisticsKernel>(backend_, moved);
  };
  // The whole step, which a capture records. Without its nodes it is the launches whose
  // arguments change from step to step, which re-point a captured step. Its built-in updates
  // are prepared after the nodes ran unless they were before (a replay's).
  std::optional<Updates> updates;
  auto prepare = [&] {  // with the copies the optimizers write
    Updates u = prepare_builtin(trained, wm, gradients_, rates);
    if (copied)
      for (auto& b : u.batches) copies_.attach(b.tensors);
    return u;
  };
  auto whole = [&](bool nodes) {
    backend_.store(counter, step);
    if (r) backend_.copy_all(copies_in);
    if (nodes) {
      run();
      // Loss scaling skips the updates of a step whose gradients overflowed instead.
      if (options.check_numerics) check_finite(losses, scale_state ? std::vector<const FilterNode*>{} : trained);
      // Every gradient is ready before the first update. What can fail of the built-in updates
      // goes first, then the host updates, all or nothing, so a failure in either leaves every
      // weight and step count as it was.
      if (!updates) prepare_slots(trained, wm, scaling_);
      if (half_graph && !others.empty()) {
        Gradients wide = float_gradients(others);
        apply_host_updates(others, wm, wide);
      } else {
        apply_host_updates(others, wm, gradients_);
      }
      commit();
      if (!updates) updates = prepare();
      if (scale_state) check_scaled(trained, scale_state);
    }
    for (const auto& b : updates->batches) b.optimizer->apply_all(device_, b.tensors, b.descriptor, scale_state);
    if (nodes && scale_state) dispatch<LossScaleUpdateKernel>(backend_, scale_state, rule_);
    profile.mark("updates");
    backend_.copy_all(copies_out);
  };
  if (!r || r->failed || (!r->captured && ++r->eager_runs <= 2)) {  // warm-up: algorithms found, buffers sized
    whole(true);
  } else {
    prepare_slots(trained, wm, scaling_);
    updates = prepare();
    bool ran = false;
    try {
      if (!r->captured) {
        r->captured = backend_.capture([&] { whole(true); });
        backend_.replay(r->captured, {});
      } else {
        backend_.replay(r->captured, [&] { whole(false); });
      }
      ran = true;
    } catch (const Error&) {
      r->captured.reset();
      r->failed = true;  // this shape runs eagerly from now on
    }
    if (!ran) whole(true);
  }
  note_commits(wm);
  for (size_t i = 0; i < s.results.size(); ++i) {  // in the results' order
    const Image& res = t[s.results[i]];
    if (!converted(s.results[i])) continue;
    Image wanted = Image::allocate({res.batch(), res.shape(), result_dtype}, device_);
    dispatch<CastKernel>(backend_, Tensor::image(res, plan.layouts[s.results[i]]), wanted);
    out.insert(out.begin() + i, wanted);
  }
  return out;
}

}  // namespace nngraph
