#include "nngraph/graph.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "backends/backend.h"
#include "graph/executor.h"
#include "graph/parameters.h"
#include "graph/plan.h"
#include "nngraph/error.h"
#include "ops/cast.h"

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

struct GraphSpec {
  std::vector<ImageNodePtr> results, roots;
  Device device;
  int max_in_flight = 2;
  std::shared_ptr<Parameters> shared_weights;  // null: load from data sources
  std::vector<ImageNodePtr> loss_results;      // training graphs: what evaluation() computes besides results
  bool inference = false;                      // forward nodes in inference mode even beside loss nodes
};

struct Graph::Impl {
  Device device;
  Backend& backend;
  int max_in_flight;
  std::vector<ImageNodePtr> results, roots;  // own every node the structure points at
  std::vector<ImageNodePtr> loss_results;
  std::vector<ArrayDataSource*> array_sources;  // of the nodes, each once
  Structure structure;
  std::vector<ImageNodePtr> image_sources;
  std::atomic<bool> check_numerics{false}, allow_tf32{false};
  std::atomic<uint64_t> encodes{0};
  mutable std::mutex mutex;  // plans, latest shapes, weights
  std::map<std::vector<int>, std::shared_ptr<const Plan>> plans;
  std::vector<ImageShape> latest_shapes;
  std::shared_ptr<Parameters> weights;
  // Touched only by the worker:
  std::shared_ptr<Buffer> arena;
  Gradients gradients;

  explicit Impl(const GraphSpec& spec)
      : device(spec.device), backend(backend_for(spec.device)), max_in_flight(spec.max_in_flight),
        results(spec.results), roots(spec.roots), loss_results(spec.loss_results),
        structure(build_structure(results, roots, spec.inference)), executor(spec.max_in_flight) {
    for (int i : structure.image_sources) image_sources.push_back(structure.sources[i]);
  }

  // Plans are keyed by image shapes alone: label shapes follow the loss sources.
  std::shared_ptr<const Plan> plan_for(const std::vector<ImageShape>& images) {
    std::vector<int> key;
    for (const auto& s : images) key.insert(key.end(), {s.c, s.h, s.w});
    std::lock_guard<std::mutex> lock(mutex);
    latest_shapes = images;
    auto& slot = plans[key];
    if (!slot) {
      std::vector<ImageShape> shapes(structure.sources.size(), ImageShape{1, 1, 1});
      for (size_t i = 0; i < images.size(); ++i) shapes[structure.image_sources[i]] = images[i];
      try {
        slot = std::make_shared<const Plan>(make_plan(structure, shapes));
      } catch (...) {
        plans.erase(key);
        throw;
      }
    }
    return slot;
  }

  std::vector<GradientState>& gradients_for(const FilterNode* forward, const std::vector<WeightsState>& ws) {
    auto& gs = gradients[forward];
    if (gs.size() != ws.size()) {
      gs.assign(ws.size(), {});
      for (size_t i = 0; i < ws.size(); ++i) {
        const WeightsState& w = ws[i];
        GradientState& g = gs[i];
        g.weight_count = w.weight_count;
        g.weights = backend.allocate(w.weight_count * sizeof(float));
        if (w.biases) {
          g.bias_count = w.bias_count;
          g.biases = backend.allocate(w.bias_count * sizeof(float));
        }
      }
    }
    return gs;
  }

  void check_finite(const std::vector<Image>& losses, const std::vector<const FilterNode*>& trained) {
    for (size_t i = 0; i < losses.size(); ++i)
      if (!dispatch<AllFiniteKernel>(backend, losses[i]))
        fail<DeviceError>("[", structure.losses[i].node->label(), "] loss is NaN or infinite; no weights were updated");
    for (const FilterNode* f : trained)
      for (const GradientState& g : gradients.at(f))
        if (!dispatch<AllFiniteKernel>(backend, Tensor::vector(g.weights, g.weight_count)) ||
            (g.biases && !dispatch<AllFiniteKernel>(backend, Tensor::vector(g.biases, g.bias_count))))
          fail<DeviceError>("[", f->label(), "] weight gradient is NaN or infinite; no weights were updated");
  }

  // A step recorded once and replayed (backends that capture): fixed buffers for the
  // sources and losses, valid while the arena, the weights and tf32 stay as captured.
  struct Replay {
    std::vector<Image> sources, losses;
    std::vector<bool> holds_unit;  // per source: filled from the unit weights, which never change
    std::shared_ptr<void> captured;
    int eager_runs = 0;
    bool failed = false;
  };
  std::map<std::tuple<const Plan*, int, void*, const Parameters*, bool>, Replay> replays;
  std::shared_ptr<Buffer> step_counter;  // in the backend's memory: dropout reads it
  Executor executor;  // last: destroyed first, so queued work finishes while the rest exists

  Replay& replay_for(const Plan& plan, int n, const Parameters& wm, const std::vector<Image>& sources) {
    auto key = std::make_tuple(&plan, n, arena->data(), &wm, allow_tf32.load());
    auto found = replays.find(key);
    if (found != replays.end()) return found->second;
    if (replays.size() > 16) replays.clear();  // stale arenas or weights: start over
    Replay& r = replays[key];
    for (const auto& img : sources) r.sources.push_back(Image::allocate(img.descriptor(), device));
    r.holds_unit.assign(sources.size(), false);
    for (size_t i = 0; i < structure.losses.size(); ++i)
      r.losses.push_back(Image::allocate({n, {1, 1, 1}, DType::Float32}, device));
    return r;
  }

  // Label weights of 1 for a batch of n, made once: most steps weigh every image alike. Kept
  // for the last few batch sizes (a replay that holds them copied them; it needs them no more).
  std::map<int, Image> unit_weights;
  const Image& ones(int n) {
    if (!unit_weights.count(n) && unit_weights.size() >= 4) unit_weights.clear();
    Image& w = unit_weights[n];
    if (w.empty())
      w = Image::from_host({n, {1, 1, 1}, DType::Float32}, device,
                           [n](void* p) { std::fill_n(static_cast<float*>(p), n, 1.f); });
    return w;
  }

  // Runs on the worker. Returns the results; fills per-image losses.
  std::vector<Image> execute(const Plan& plan, Parameters& wm, const std::vector<Image>& src,
                             const std::vector<LossLabels>& labels, uint64_t step, const Rates& rates,
                             std::vector<Image>& losses) {
    int n = 0;  // a source of one image may broadcast along the batch
    for (const Image& img : src) n = std::max(n, img.batch());
    const size_t need = plan.arena * n * sizeof(float);
    if (!arena || arena->bytes() < need) {
      arena.reset();  // free the old arena before taking a larger one
      replays.clear();
      arena = backend.allocate(need);
    }
    if (!step_counter) step_counter = backend.allocate(sizeof(uint64_t));
    auto* counter = static_cast<uint64_t*>(step_counter->data());
    const auto& s = structure;
    // Sources in tensor order: images, then each loss's labels and weights.
    std::vector<Image> sources(s.sources.size());
    bool all_half = true, all_float = true;
    for (size_t i = 0; i < src.size(); ++i) {
      all_half = all_half && src[i].dtype() == DType::Float16;
      all_float = all_float && src[i].dtype() == DType::Float32;
      sources[s.image_sources[i]] = src[i].dtype() == DType::Float32 ? src[i] : src[i].converted(DType::Float32);
    }
    for (size_t i = 0; i < s.losses.size(); ++i) {
      sources[s.losses[i].labels] = labels[i].labels;
      sources[s.losses[i].weights] = labels[i].weights.empty() ? ones(n) : labels[i].weights;
      losses.push_back(Image::allocate({n, {1, 1, 1}, DType::Float32}, device));
    }
    refresh_parameters(wm, s, backend);  // another graph may have trained a shared source
    // Gradient buffers are made before any capture: what a capture allocates is its scratch.
    std::vector<const FilterNode*> trained;
    for (const Step& st : s.steps) {
      if (!st.trains_weights) continue;
      trained.push_back(st.node->trains() ? st.node->trains() : st.node);
      gradients_for(trained.back(), wm.of.at(trained.back()));
    }
    const auto others = host_updates(trained);
    Profile profile(backend);
    // A step whose sources update themselves on the host is not captured: it must undo them on failure.
    Replay* r = backend.can_capture() && all_float && !check_numerics && !profile.on() && others.empty()
                    ? &replay_for(plan, n, wm, sources) : nullptr;
    std::vector<Image> t(s.tensor_count());
    std::vector<Backend::Copy> copies_in, copies_out;  // into the replay's buffers; out of them and the arena
    const auto unit = unit_weights.find(n);
    for (size_t i = 0; i < sources.size(); ++i) {
      t[i] = r ? r->sources[i] : sources[i];
      if (!r) continue;
      const bool is_unit = unit != unit_weights.end() && unit->second.data() == sources[i].data();
      if (!is_unit || !r->holds_unit[i])
        copies_in.push_back({t[i].data(), sources[i].data(), sources[i].descriptor().bytes()});
      r->holds_unit[i] = is_unit;
    }
    const std::vector<Image>& loss_out = r ? r->losses : losses;
    const size_t n_src = s.sources.size();
    for (size_t i = n_src; i < t.size(); ++i)
      if (plan.root[i] == static_cast<int>(i) && plan.in_arena[i])
        t[i] = Image({n, plan.shapes[i], DType::Float32}, arena, plan.offset[i] * n * sizeof(float));
    for (size_t i = n_src; i < t.size(); ++i)
      if (plan.root[i] != static_cast<int>(i)) t[i] = t[plan.root[i]];
    for (size_t i = 0; r && i < losses.size(); ++i)
      copies_out.push_back({losses[i].data(), r->losses[i].data(), losses[i].descriptor().bytes()});
    std::vector<Image> out;
    for (int res : s.results) {
      if (all_half) continue;  // converted after the step
      out.push_back(Image::allocate(t[res].descriptor(), device));
      copies_out.push_back({out.back().data(), t[res].data(), t[res].descriptor().bytes()});
    }
    auto run = [&] {
      const Image none;
      for (size_t k = 0; k < s.steps.size(); ++k) {
        const Step& st = s.steps[k];
        if (plan.passes[k]) continue;
        std::vector<const Image*> ins;
        for (int id : st.inputs) ins.push_back(&t[id]);
        const FilterNode* owner = st.node->trains() ? st.node->trains() : st.node;
        auto w = wm.of.find(owner);
        const Image* loss = nullptr;
        for (size_t i = 0; i < s.losses.size(); ++i)
          if (s.losses[i].node == st.node) loss = &loss_out[i];
        st.node->encode(EncodeArgs{backend, ins, st.output_needed ? t[st.output] : none,
                                   w == wm.of.end() ? nullptr : w->second.data(),
                                   st.trains_weights ? gradients.at(owner).data() : nullptr, st.fused,
                                   counter, loss, allow_tf32, st.state >= 0 ? &t[st.state] : nullptr, s.training});
        profile.mark(st.node->label());
      }
    };
    // The whole step, which a capture records. Without its nodes it is the launches whose
    // arguments change from step to step, which re-point a captured step. Its built-in updates
    // are prepared after the nodes ran unless they were before (a replay's).
    std::optional<Updates> updates;
    auto whole = [&](bool nodes) {
      backend.store(counter, step);
      if (r) backend.copy_all(copies_in);
      if (nodes) {
        run();
        if (check_numerics) check_finite(losses, trained);
        // Every gradient is ready before the first update. The host updates go first, all or
        // nothing, so a failure among them leaves every weight as it was.
        apply_host_updates(others, wm, gradients);
        if (!updates) updates = prepare_builtin(trained, wm, gradients, rates);
      }
      for (const auto& b : updates->batches) b.optimizer->apply_all(device, b.tensors, b.descriptor);
      profile.mark("updates");
      backend.copy_all(copies_out);
    };
    if (!r || r->failed || (!r->captured && ++r->eager_runs <= 2)) {  // warm-up: algorithms found, buffers sized
      whole(true);
    } else {
      updates = prepare_builtin(trained, wm, gradients, rates);
      bool ran = false;
      try {
        if (!r->captured) {
          r->captured = backend.capture([&] { whole(true); });
          backend.replay(r->captured, {});
        } else {
          backend.replay(r->captured, [&] { whole(false); });
        }
        ran = true;
      } catch (const Error&) {
        r->captured.reset();
        r->failed = true;  // this shape runs eagerly from now on
      }
      if (!ran) whole(true);
    }
    if (all_half)
      for (int res : s.results) out.push_back(t[res].converted(DType::Float16));
    return out;
  }
};

Graph::Graph(std::vector<ImageNodePtr> results, Device device, int max_in_flight)
    : Graph(GraphSpec{std::move(results), {}, device, max_in_flight, nullptr, {}, false}) {}

Graph::Graph(GraphSpec spec) {
  if (spec.max_in_flight < 1) fail("[graph] max_in_flight must be >= 1, got ", spec.max_in_flight);
  impl_ = std::make_unique<Impl>(spec);
  std::vector<ImageShape> declared;
  for (const auto& s : impl_->image_sources)
    if (s->shape()) declared.push_back(*s->shape());
  if (declared.size() == impl_->image_sources.size()) impl_->plan_for(declared);
  impl_->weights = spec.shared_weights ? spec.shared_weights : load_parameters(impl_->structure, impl_->backend);
  name_data_sources(impl_->structure);  // once the graph is whole: a failed build renames nothing
  for (DataSource* ds : data_sources())
    if (auto* array = dynamic_cast<ArrayDataSource*>(ds)) impl_->array_sources.push_back(array);
}

std::shared_ptr<Graph> Graph::training(const std::shared_ptr<LossNode>& loss, Device device, int max_in_flight,
                                       std::shared_ptr<Optimizer> optimizer) {
  if (!loss) fail("[graph] training needs a loss node");
  const Structure forward = build_structure({loss->sources()[0]}, {});
  for (const FilterNode* f : forward.order)
    for (const WeightSource& w : f->weight_sources()) {
      auto* ds = dynamic_cast<ArrayDataSource*>(w.source);
      if (ds && !ds->optimizer()) {
        if (!optimizer)
          fail("[", f->label(), "] data source '", ds->label(),
               "' has no optimizer: give ArrayDataSource(optimizer=...) or training_graph(optimizer=...)");
        ds->set_optimizer(optimizer);
      }
    }
  return std::make_shared<Graph>(GraphSpec{{loss->sources()[0]}, build_gradient_pass(loss), device, max_in_flight,
                                           nullptr, {loss->result_image()}, false});
}

std::shared_ptr<Graph> Graph::inference() const {
  std::shared_ptr<Parameters> weights;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    weights = impl_->weights;
  }
  return std::make_shared<Graph>(GraphSpec{impl_->results, {}, impl_->device, impl_->max_in_flight, weights, {}, false});
}

std::shared_ptr<Graph> Graph::evaluation() const {
  if (impl_->loss_results.empty()) fail("[graph] evaluation() needs a training graph (it computes its losses)");
  std::shared_ptr<Parameters> weights;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    weights = impl_->weights;
  }
  return std::make_shared<Graph>(GraphSpec{impl_->results, impl_->loss_results, impl_->device, impl_->max_in_flight,
                                           weights, {}, true});
}

Graph::~Graph() = default;

const Device& Graph::device() const { return impl_->device; }
int Graph::max_in_flight() const { return impl_->max_in_flight; }
const std::vector<ImageNodePtr>& Graph::sources() const { return impl_->image_sources; }
const std::vector<ImageNodePtr>& Graph::results() const { return impl_->results; }
bool Graph::is_training() const { return impl_->structure.training; }
void Graph::set_check_numerics(bool on) { impl_->check_numerics = on; }
bool Graph::check_numerics() const { return impl_->check_numerics; }
void Graph::set_allow_tf32(bool on) { impl_->allow_tf32 = on; }
bool Graph::allow_tf32() const { return impl_->allow_tf32; }

std::vector<const LossNode*> Graph::loss_nodes() const {
  std::vector<const LossNode*> out;
  for (const auto& l : impl_->structure.losses) out.push_back(l.node);
  return out;
}

std::vector<ImageShape> Graph::label_shapes(const std::vector<ImageShape>& source_shapes) {
  if (source_shapes.size() != impl_->image_sources.size())
    fail("[graph] expected ", impl_->image_sources.size(), " source shape(s), got ", source_shapes.size());
  auto plan = impl_->plan_for(source_shapes);
  std::vector<ImageShape> out;
  for (const auto& l : impl_->structure.losses) out.push_back(plan->shapes[l.labels]);
  return out;
}

std::vector<DataSource*> Graph::data_sources() const {
  std::vector<DataSource*> out;
  for (const auto* node : impl_->structure.order) {
    const FilterNode* f = node->trains() ? node->trains() : node;
    for (const WeightSource& w : f->weight_sources())
      if (std::find(out.begin(), out.end(), w.source) == out.end()) out.push_back(w.source);
  }
  return out;
}

std::vector<Graph::NodeSummary> Graph::summary() const {
  std::vector<ImageShape> shapes;
  std::shared_ptr<Parameters> weights;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    shapes = impl_->latest_shapes;
    weights = impl_->weights;
  }
  std::shared_ptr<const Plan> plan = shapes.empty() ? nullptr : impl_->plan_for(shapes);
  const auto& s = impl_->structure;
  std::vector<NodeSummary> out;
  for (size_t i = 0; i < s.order.size(); ++i) {
    const FilterNode* f = s.order[i];
    if (f->is_gradient()) continue;
    NodeSummary row{f->label(), f->kind(), std::nullopt, 0};
    if (plan) row.shape = plan->shapes[s.sources.size() + i];
    const auto held = weights->of.find(f);
    if (held != weights->of.end())
      for (const WeightsState& w : held->second) row.parameters += w.weight_count + w.bias_count;
    out.push_back(row);
  }
  return out;
}

std::vector<std::string> Graph::node_labels() const {
  std::vector<std::string> out;
  for (const auto* f : impl_->structure.order) out.push_back(f->label());
  return out;
}

namespace {

std::string source_name(const ImageNodePtr& s, size_t i) {
  return s->label().empty() ? cat("source ", i) : cat("source ", i, " '", s->label(), "'");
}

}  // namespace

// A source of one image beside a batch of N reaches only steps that broadcast it.
void Graph::check_broadcast(const std::vector<Image>& sources, int batch) const {
  const auto& s = impl_->structure;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].batch() == batch) continue;
    const int id = s.image_sources[i];
    if (sources[i].batch() != 1)
      fail("[graph] source images differ in batch size: ", sources[i].batch(), " and ", batch);
    for (const Step& st : s.steps)
      for (size_t k = 0; k < st.inputs.size(); ++k)
        if (st.inputs[k] == id && !st.node->broadcasts_batch(k))
          fail("[", st.node->label(), "] ", source_name(impl_->image_sources[i], i), " holds 1 image but the batch has ",
               batch, ": only an arithmetic node's operand broadcasts along the batch");
  }
}

HandlePtr Graph::encode(std::vector<Image> sources, std::vector<LossLabels> labels, Callback on_complete) {
  const auto& expected = impl_->image_sources;
  if (sources.size() != expected.size())
    fail("[graph] expected ", expected.size(), " source image(s), got ", sources.size());
  std::vector<ImageShape> shapes;
  for (size_t i = 0; i < sources.size(); ++i) {
    const Image& img = sources[i];
    if (img.empty()) fail("[graph] ", source_name(expected[i], i), " is empty");
    if (img.batch() < 1) fail("[graph] ", source_name(expected[i], i), ": empty batch");
    if (img.batch() != sources[0].batch() && img.batch() != 1 && sources[0].batch() != 1)
      fail("[graph] source images differ in batch size: ", sources[0].batch(), " and ", img.batch());
    if (img.device() != impl_->device)
      fail("[graph] ", source_name(expected[i], i), " is on ", img.device().str(), ", the graph runs on ",
           impl_->device.str());
    const auto& want = expected[i]->shape();
    if (want && *want != img.shape())
      fail("[graph] ", source_name(expected[i], i), " expects images of shape (N, ", want->c, ", ",
           want->h, ", ", want->w, "), got (", img.batch(), ", ", img.shape().c, ", ", img.shape().h,
           ", ", img.shape().w, ")");
    shapes.push_back(img.shape());
  }
  int batch = 0;
  for (const Image& img : sources) batch = std::max(batch, img.batch());
  check_broadcast(sources, batch);
  auto plan = impl_->plan_for(shapes);
  const auto& losses = impl_->structure.losses;
  if (labels.size() != losses.size())
    fail("[graph] expected labels for ", losses.size(), " loss node(s), got ", labels.size());
  std::vector<double> divisors;
  for (size_t i = 0; i < losses.size(); ++i) {
    const std::string& name = losses[i].node->label();
    const ImageShape want = plan->shapes[losses[i].labels];
    const Image& l = labels[i].labels;
    if (l.empty()) fail("[", name, "] no labels given");
    if (l.batch() != batch) fail("[", name, "] labels hold ", l.batch(), " images but the batch has ", batch);
    if (l.shape() != want) fail("[", name, "] labels must be ", want.str(), " per image, got ", l.shape().str());
    if (l.dtype() != DType::Float32 || l.device() != impl_->device)
      fail("[", name, "] labels must be float32 on ", impl_->device.str());
    const Image& w = labels[i].weights;
    if (!w.empty() && (w.batch() != l.batch() || w.shape() != ImageShape{1, 1, 1} || w.dtype() != DType::Float32 ||
                       w.device() != impl_->device))
      fail("[", name, "] label weights must be one float32 per image on ", impl_->device.str());
    divisors.push_back(losses[i].node->reduction_divisor(l.batch(), want));
  }
  std::shared_ptr<Parameters> weights;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    weights = impl_->weights;
  }
  auto handle = std::make_shared<Handle>();
  Impl* impl = impl_.get();
  const uint64_t step = impl_->encodes++;
  // A learning rate set after this encode is for later steps, even while this one waits in the queue.
  Rates rates = impl_->structure.training ? current_rates(impl_->array_sources) : Rates{};
  impl_->executor.submit(handle, [impl, plan, weights, handle, step, divisors, rates = std::move(rates),
                          srcs = std::move(sources), lbls = std::move(labels), cb = std::move(on_complete)]() mutable {
    try {
      std::vector<Image> losses;
      auto results = impl->execute(*plan, *weights, srcs, lbls, step, rates, losses);
      handle->set_results(std::move(results), std::move(losses), divisors);
    } catch (...) {
      handle->set_error(std::current_exception());
    }
    srcs.clear();  // freed in stream order
    lbls.clear();
    std::shared_ptr<Fence> fence;
    try {
      fence = impl->backend.fence();
    } catch (...) {
      handle->set_error(std::current_exception());
    }
    if (!cb) handle->set_fence(fence);
    impl->executor.complete(std::move(fence), std::move(handle), std::move(cb));
  }, impl_->backend.asynchronous());
  return handle;
}

std::vector<Image> Graph::run(std::vector<Image> sources, std::vector<LossLabels> labels) {
  auto h = encode(std::move(sources), std::move(labels));
  h->wait();
  return h->results();
}

void Graph::reload_from_data_sources() {
  auto fresh = load_parameters(impl_->structure, impl_->backend);  // may throw: the old weights stay
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->weights = std::move(fresh);
}

MemoryPlan Graph::memory_plan(int batch) const {
  if (batch < 1) fail("[graph] batch must be >= 1, got ", batch);
  std::vector<ImageShape> shapes;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    shapes = impl_->latest_shapes;
  }
  if (shapes.empty())
    fail("[graph] source shapes unknown: declare them on the source image nodes or run the graph once");
  auto plan = impl_->plan_for(shapes);
  MemoryPlan m;
  m.batch = batch;
  m.planned_bytes = plan->arena * batch * sizeof(float);
  m.naive_bytes = plan->naive * batch * sizeof(float);
  const auto& steps = impl_->structure.steps;
  for (size_t k = 0; k < steps.size(); ++k)
    if (!plan->passes[k])
      m.steps.push_back(steps[k].fused.type == NeuronType::None ? steps[k].node->label()
                                                                : steps[k].node->label() + "+" + steps[k].fused.name());
  return m;
}

}  // namespace nngraph
