#include "nngraph/graph.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <string>

#include "backends/backend.h"
#include "graph/executor.h"
#include "graph/parameters.h"
#include "graph/plan.h"
#include "graph/step.h"
#include "nngraph/error.h"

namespace nngraph {

struct GraphSpec {
  std::vector<ImageNodePtr> results, roots;
  Device device;
  int max_in_flight = 2;
  std::shared_ptr<Parameters> shared_weights;  // null: load from data sources
  std::vector<ImageNodePtr> loss_results;      // training graphs: what evaluation() computes besides results
  bool inference = false;                      // forward nodes in inference mode even beside loss nodes
  DType format = DType::Float32;               // of the images between nodes (MPSNNGraph's format)
  LossScaling scaling = LossScaling::off();    // float16 graphs of Graph::training
  Layout layout = Layout::Auto;                // of the images between nodes
};

// The loss nodes in the order their results were given (Graph::training's), not the order the
// gradient pass reached them: encode takes their labels in this order.
Structure with_losses_in_order(Structure s, const std::vector<ImageNodePtr>& loss_results) {
  auto rank = [&](const LossBinding& l) {
    for (size_t i = 0; i < loss_results.size(); ++i)
      if (loss_results[i]->producer() == l.node) return i;
    return loss_results.size();
  };
  std::stable_sort(s.losses.begin(), s.losses.end(),
                   [&](const LossBinding& a, const LossBinding& b) { return rank(a) < rank(b); });
  return s;
}

struct Graph::Impl {
  Device device;
  Backend& backend;
  int max_in_flight;
  DType format, storage;
  Layout layout;  // as asked: Auto is resolved per plan
  std::vector<ImageNodePtr> results, roots;  // own every node the structure points at
  std::vector<ImageNodePtr> loss_results;
  std::vector<ArrayDataSource*> array_sources;  // of the nodes, each once
  Structure structure;
  std::vector<ImageNodePtr> image_sources;
  std::atomic<bool> check_numerics{false}, allow_tf32{false}, recompute{true};
  std::atomic<double> memory_budget{0.0};
  std::atomic<uint64_t> encodes{0};
  mutable std::mutex mutex;  // plans, latest shapes, weights
  std::map<std::vector<int>, std::shared_ptr<const Plan>> plans;
  std::vector<ImageShape> latest_shapes;
  std::shared_ptr<Parameters> weights;
  // inference() and evaluation() while someone holds them (their plans and captures kept;
  // not held here, so their arenas go with their last user), forgotten when the weights are reloaded.
  std::weak_ptr<Graph> inference, evaluation;

  explicit Impl(const GraphSpec& spec)
      : device(spec.device), backend(backend_for(spec.device)), max_in_flight(spec.max_in_flight),
        format(spec.format), storage(backend.storage_for(spec.format)),
        layout(spec.layout), results(spec.results),
        roots(spec.roots),
        loss_results(spec.loss_results),
        structure(with_losses_in_order(build_structure(results, roots, spec.inference, spec.device.type()), spec.loss_results)),
        runner(structure, backend, device, storage, spec.scaling),
        executor(spec.max_in_flight) {
    for (int i : structure.image_sources) image_sources.push_back(structure.sources[i]);
    for (size_t k = 0; k < structure.steps.size(); ++k) {
      const Step& st = structure.steps[k];
      if (!st.trains_weights) continue;
      auto& tensors = trained.emplace_back(k, std::vector<std::pair<DataSource*, size_t>>{}).second;
      for (const WeightSource& w : (st.node->trains() ? st.node->trains() : st.node)->weight_sources()) {
        const auto specs = tensor_specs(w.descriptor);
        for (size_t t = 0; t < specs.size(); ++t)
          if (specs[t].trained) tensors.emplace_back(w.source, t);
      }
    }
  }

  // Layout::Auto as the backend resolves it under the current tf32 setting.
  Layout resolved_layout() const {
    return layout == Layout::Auto ? backend.layout_for(storage, allow_tf32) : layout;
  }

  // Per step: whether it trains a tensor now. Data sources may freeze tensors between steps;
  // the gradient steps that then feed only frozen tensors are dead in that plan.
  std::vector<bool> trains_now() const {
    std::vector<bool> now(structure.steps.size(), false);
    for (const auto& [k, tensors] : trained)
      for (const auto& [source, t] : tensors) now[k] = now[k] || source->trains(t);
    return now;
  }

  // Plans are keyed by image shapes, layout and the steps training now: label shapes follow
  // the loss sources.
  std::shared_ptr<const Plan> plan_for(const std::vector<ImageShape>& images) {
    const Layout resolved = resolved_layout();
    const bool again = recompute;
    const double budget = again ? memory_budget.load() : 0.0;  // it shares out what recomputing saves
    const std::vector<bool> now = trains_now();
    std::vector<int> key{static_cast<int>(resolved), again, static_cast<int>(std::lround(budget * 1e6))};
    for (const auto& s : images) key.insert(key.end(), {s.c, s.h, s.w});
    key.insert(key.end(), now.begin(), now.end());
    std::lock_guard<std::mutex> lock(mutex);
    latest_shapes = images;
    auto& slot = plans[key];
    if (!slot) {
      std::vector<ImageShape> shapes(structure.sources.size(), ImageShape{1, 1, 1});
      for (size_t i = 0; i < images.size(); ++i) shapes[structure.image_sources[i]] = images[i];
      try {
        slot = std::make_shared<const Plan>(make_plan(structure, shapes, storage, resolved, device.type(), again, now, budget));
      } catch (...) {
        plans.erase(key);
        throw;
      }
    }
    return slot;
  }

  // Per step that trains weights: its data sources' trained tensors (source, index).
  std::vector<std::pair<size_t, std::vector<std::pair<DataSource*, size_t>>>> trained;
  StepRunner runner;  // touched only by the worker
  Executor executor;  // last: destroyed first, so queued work finishes while the rest exists
};

Graph::Graph(std::vector<ImageNodePtr> results, Device device, int max_in_flight, DType format, Layout layout)
    : Graph(GraphSpec{std::move(results), {}, device, max_in_flight, nullptr, {}, false, format, LossScaling::off(),
                      layout}) {}

Graph::Graph(GraphSpec spec) {
  if (spec.max_in_flight < 1) fail("[graph] max_in_flight must be >= 1, got ", spec.max_in_flight);
  spec.scaling.validate();
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
                                       std::shared_ptr<Optimizer> optimizer, DType format, LossScaling scaling,
                                       Layout layout) {
  return training(std::vector<std::shared_ptr<LossNode>>{loss}, device, max_in_flight, std::move(optimizer), format,
                  scaling, layout);
}

std::shared_ptr<Graph> Graph::training(const std::vector<std::shared_ptr<LossNode>>& losses, Device device,
                                       int max_in_flight, std::shared_ptr<Optimizer> optimizer, DType format,
                                       LossScaling scaling, Layout layout) {
  if (losses.empty()) fail("[graph] training needs a loss node");
  std::vector<ImageNodePtr> sources, results;
  for (size_t i = 0; i < losses.size(); ++i) {
    if (!losses[i]) fail("[graph] training: loss ", i, " is None");
    for (size_t j = 0; j < i; ++j)
      if (losses[j] == losses[i]) fail("[", losses[i]->label(), "] is given twice");
    sources.push_back(losses[i]->sources()[0]);
    results.push_back(losses[i]->result_image());
  }
  const Structure forward = build_structure(sources, {});
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
  return std::make_shared<Graph>(GraphSpec{sources, build_gradient_pass(losses), device, max_in_flight, nullptr,
                                           results, false, format, scaling, layout});
}

namespace {

// The graph `made` still points at, else a new one from `spec`, remembered there.
// It takes the asking graph's tf32 setting, as it is now.
std::shared_ptr<Graph> kept_or_made(std::weak_ptr<Graph>& made, const GraphSpec& spec, bool tf32) {
  auto g = made.lock();
  if (!g) {
    g = std::make_shared<Graph>(spec);
    made = g;
  }
  g->set_allow_tf32(tf32);
  return g;
}

}  // namespace

std::shared_ptr<Graph> Graph::inference() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return kept_or_made(impl_->inference, GraphSpec{impl_->results, {}, impl_->device, impl_->max_in_flight,
                                                  impl_->weights, {}, false, impl_->format, LossScaling::off(),
                                                  impl_->layout},
                      impl_->allow_tf32);
}

std::shared_ptr<Graph> Graph::evaluation() const {
  if (impl_->loss_results.empty()) fail("[graph] evaluation() needs a training graph (it computes its losses)");
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return kept_or_made(impl_->evaluation, GraphSpec{impl_->results, impl_->loss_results, impl_->device,
                                                   impl_->max_in_flight, impl_->weights, {}, true, impl_->format,
                                                   LossScaling::off(), impl_->layout},
                      impl_->allow_tf32);
}

Graph::~Graph() = default;

const Device& Graph::device() const { return impl_->device; }
int Graph::max_in_flight() const { return impl_->max_in_flight; }
DType Graph::format() const { return impl_->format; }
DType Graph::storage() const { return impl_->storage; }
Layout Graph::layout() const { return impl_->resolved_layout(); }
const std::vector<ImageNodePtr>& Graph::sources() const { return impl_->image_sources; }
const std::vector<ImageNodePtr>& Graph::results() const { return impl_->results; }
bool Graph::is_training() const { return impl_->structure.training; }
void Graph::set_check_numerics(bool on) { impl_->check_numerics = on; }
bool Graph::check_numerics() const { return impl_->check_numerics; }
void Graph::set_allow_tf32(bool on) { impl_->allow_tf32 = on; }
bool Graph::allow_tf32() const { return impl_->allow_tf32; }
void Graph::set_recompute(bool on) { impl_->recompute = on; }
bool Graph::recompute() const { return impl_->recompute; }
void Graph::set_memory_budget(double share) {
  if (!(share >= 0 && share <= 1))  // NaN too
    throw InvalidInput("memory_budget must lie in [0, 1], got " + std::to_string(share));
  impl_->memory_budget = share;
}
double Graph::memory_budget() const { return impl_->memory_budget; }
double Graph::loss_scale() const { return impl_->runner.loss_scale().first; }
int64_t Graph::skipped_steps() const { return impl_->runner.loss_scale().second; }

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
      for (const WeightsState& w : held->second) row.parameters += w.parameter_count();
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
  return queue_run(std::move(sources), std::move(labels), std::move(on_complete), impl_->backend.asynchronous());
}

HandlePtr Graph::queue_run(std::vector<Image> sources, std::vector<LossLabels> labels, Callback on_complete,
                           bool here) {
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
    std::vector<Image> results, losses;
    Image scaling;
    bool ran = false;
    try {
      results = impl->runner.run(*plan, *weights, srcs, lbls, step, rates,
                                 {impl->check_numerics.load(), impl->allow_tf32.load()}, losses, scaling);
      ran = true;
    } catch (...) {
      handle->set_error(std::current_exception());
    }
    srcs.clear();  // freed in stream order
    lbls.clear();
    std::shared_ptr<Fence> fence;  // where the step's work, its results included, is done
    try {
      fence = impl->backend.fence();
    } catch (...) {
      handle->set_error(std::current_exception());
    }
    if (ran) handle->set_results(std::move(results), std::move(losses), divisors, std::move(scaling), fence);
    if (!cb) handle->set_fence(fence);
    impl->executor.complete(std::move(fence), std::move(handle), std::move(cb));
  }, here);
  return handle;
}

std::vector<Image> Graph::run(std::vector<Image> sources, std::vector<LossLabels> labels) {
  // On the calling thread where nothing is queued: no hand-offs to the executor's threads
  // (on the cpu, 40-50 µs a run).
  auto h = queue_run(std::move(sources), std::move(labels), {}, true);
  h->wait();
  return h->results();
}

void Graph::reload_from_data_sources() {
  auto fresh = load_parameters(impl_->structure, impl_->backend);  // may throw: the old weights stay
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->weights = std::move(fresh);
  impl_->inference.reset();
  impl_->evaluation.reset();
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
  m.planned_bytes = plan->arena * batch;
  m.naive_bytes = plan->naive * batch;
  const auto& steps = impl_->structure.steps;
  for (size_t k = 0; k < steps.size(); ++k) {
    if (plan->passes[k]) continue;
    std::string name = steps[k].node->label();
    if (steps[k].folded) name += "+" + steps[k].folded->label();
    const NeuronDescriptor* neuron = &steps[k].fused;
    if (const int j = plan->joins[k].step; j >= 0) {
      name += "+" + steps[j].node->label();
      neuron = &steps[j].fused;
    }
    if (neuron->type != NeuronType::None) name += std::string("+") + neuron->name();
    if (steps[k].replay) name += " (recomputed)";
    m.steps.push_back(name);
  }
  return m;
}

}  // namespace nngraph
