#include "nngraph/graph.h"

#include <map>
#include <unordered_map>

#include "backends/backend.h"
#include "graph/executor.h"
#include "graph/plan.h"
#include "nngraph/error.h"

namespace nngraph {

using WeightsMap = std::unordered_map<const FilterNode*, NodeWeights>;

struct Graph::Impl {
  Device device;
  Backend& backend;
  int max_in_flight;
  std::vector<ImageNodePtr> results;
  Structure structure;
  mutable std::mutex mutex;  // plans, latest shapes, weights
  std::map<std::vector<int>, std::shared_ptr<const Plan>> plans;
  std::vector<ImageShape> latest_shapes;
  std::shared_ptr<const WeightsMap> weights;
  std::shared_ptr<Buffer> arena;  // touched only by the worker
  Executor executor;

  Impl(std::vector<ImageNodePtr> r, Device d, int in_flight)
      : device(d), backend(backend_for(d)), max_in_flight(in_flight), results(std::move(r)),
        structure(build_structure(results)), executor(in_flight) {}

  std::shared_ptr<const Plan> plan_for(const std::vector<ImageShape>& shapes) {
    std::vector<int> key;
    for (const auto& s : shapes) key.insert(key.end(), {s.c, s.h, s.w});
    std::lock_guard<std::mutex> lock(mutex);
    latest_shapes = shapes;
    auto& slot = plans[key];
    if (!slot) {
      try {
        slot = std::make_shared<const Plan>(make_plan(structure, shapes));
      } catch (...) {
        plans.erase(key);
        throw;
      }
    }
    return slot;
  }

  std::shared_ptr<const WeightsMap> load_weights() const {
    auto map = std::make_shared<WeightsMap>();
    for (const FilterNode* f : structure.order) {
      DataSource* ds = f->data_source();
      if (!ds) continue;
      if (!ds->load()) fail<DeviceError>("[", f->label(), "] data source '", ds->label(), "' failed to load");
      LoadedWeights w;
      try {
        w = read_data_source(*ds, *f->weights_descriptor(), f->label());
      } catch (...) {
        ds->purge();
        throw;
      }
      ds->purge();  // one node's host weights at a time
      NodeWeights& nw = (*map)[f];
      nw.weights = backend.allocate(w.weights.size() * sizeof(float));
      backend.copy_from_host(nw.weights->data(), w.weights.data(), nw.weights->bytes());
      if (!w.biases.empty()) {
        nw.biases = backend.allocate(w.biases.size() * sizeof(float));
        backend.copy_from_host(nw.biases->data(), w.biases.data(), nw.biases->bytes());
      }
    }
    return map;
  }

  // Runs on the worker.
  std::vector<Image> execute(const Plan& plan, const WeightsMap& wm, const std::vector<Image>& src) {
    const int n = src[0].batch();
    const size_t need = plan.arena * n * sizeof(float);
    if (!arena || arena->bytes() < need) {
      arena.reset();  // free the old arena before taking a larger one
      arena = backend.allocate(need);
    }
    const auto& s = structure;
    std::vector<Image> t(s.tensor_count());
    bool all_half = true;
    for (size_t i = 0; i < src.size(); ++i) {
      all_half = all_half && src[i].dtype() == DType::Float16;
      t[i] = src[i].dtype() == DType::Float32 ? src[i] : src[i].converted(DType::Float32);
    }
    for (size_t i = src.size(); i < t.size(); ++i)
      if (s.root[i] == static_cast<int>(i))
        t[i] = Image({n, plan.shapes[i], DType::Float32}, arena, plan.offset[i] * n * sizeof(float));
    for (size_t i = src.size(); i < t.size(); ++i)
      if (s.root[i] != static_cast<int>(i)) t[i] = t[s.root[i]];
    for (const Step& step : s.steps) {
      std::vector<const Image*> ins;
      for (int id : step.inputs) ins.push_back(&t[id]);
      auto w = wm.find(step.node);
      step.node->encode(EncodeArgs{backend, ins, t[step.output], w == wm.end() ? nullptr : &w->second, step.fused});
    }
    std::vector<Image> out;
    for (int r : s.results) {
      const Image& img = t[r];
      if (all_half) {
        out.push_back(img.converted(DType::Float16));
      } else {
        out.push_back(Image::allocate(img.descriptor(), device));
        backend.copy(out.back().data(), img.data(), img.descriptor().bytes());
      }
    }
    return out;
  }
};

Graph::Graph(std::vector<ImageNodePtr> results, Device device, int max_in_flight) {
  if (max_in_flight < 1) fail("[graph] max_in_flight must be >= 1, got ", max_in_flight);
  impl_ = std::make_unique<Impl>(std::move(results), device, max_in_flight);
  std::vector<ImageShape> declared;
  for (const auto& s : impl_->structure.sources)
    if (s->shape()) declared.push_back(*s->shape());
  if (declared.size() == impl_->structure.sources.size()) impl_->plan_for(declared);
  impl_->weights = impl_->load_weights();
}

Graph::~Graph() = default;

const Device& Graph::device() const { return impl_->device; }
int Graph::max_in_flight() const { return impl_->max_in_flight; }
const std::vector<ImageNodePtr>& Graph::sources() const { return impl_->structure.sources; }
const std::vector<ImageNodePtr>& Graph::results() const { return impl_->results; }

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

HandlePtr Graph::encode(std::vector<Image> sources, Callback on_complete) {
  const auto& expected = impl_->structure.sources;
  if (sources.size() != expected.size())
    fail("[graph] expected ", expected.size(), " source image(s), got ", sources.size());
  std::vector<ImageShape> shapes;
  for (size_t i = 0; i < sources.size(); ++i) {
    const Image& img = sources[i];
    if (img.empty()) fail("[graph] ", source_name(expected[i], i), " is empty");
    if (img.batch() < 1) fail("[graph] ", source_name(expected[i], i), ": empty batch");
    if (img.batch() != sources[0].batch())
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
  auto plan = impl_->plan_for(shapes);
  std::shared_ptr<const WeightsMap> weights;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    weights = impl_->weights;
  }
  auto handle = std::make_shared<Handle>();
  Impl* impl = impl_.get();
  impl_->executor.submit([impl, plan, weights, handle, srcs = std::move(sources),
                          cb = std::move(on_complete)]() mutable {
    try {
      handle->set_results(impl->execute(*plan, *weights, srcs));
    } catch (...) {
      handle->set_error(std::current_exception());
    }
    srcs.clear();
    if (cb) {
      try {
        cb(*handle);
      } catch (...) {
        handle->set_error(std::current_exception());
      }
      cb = nullptr;
    }
    handle->finish();
  });
  return handle;
}

std::vector<Image> Graph::run(std::vector<Image> sources) {
  auto h = encode(std::move(sources));
  h->wait();
  return h->results();
}

void Graph::reload_from_data_sources() {
  auto fresh = impl_->load_weights();  // may throw: the old weights stay
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
  for (const Step& s : impl_->structure.steps)
    m.steps.push_back(s.fused.type == NeuronType::None ? s.node->label()
                                                       : s.node->label() + "+" + s.fused.name());
  return m;
}

}  // namespace nngraph
