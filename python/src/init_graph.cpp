// Graph, Handle and the marshalling of a run's sources and results.
#include "bindings.h"
#include "nngraph/error.h"
#include "nngraph/graph.h"
#include "ops/loss.h"

namespace nngraph::py_bind {
namespace {


std::vector<ImageNodePtr> to_results(const py::object& result) {
  std::vector<ImageNodePtr> out;
  if (py::isinstance<py::list>(result) || py::isinstance<py::tuple>(result)) {
    for (const auto& r : result) out.push_back(to_image_node(r, "graph"));
  } else {
    out.push_back(to_image_node(result, "graph"));
  }
  return out;
}

std::string source_name(const ImageNodePtr& s, size_t i) {
  return s->label().empty() ? cat("source ", i) : s->label();
}

// The sources' entries in `uploads`, in the graph's order.
std::vector<size_t> to_sources(const Graph& g, const py::object& images, Layout layout, Uploads& uploads) {
  const auto& srcs = g.sources();
  std::vector<py::object> items(srcs.size());
  if (py::isinstance<py::dict>(images)) {
    auto d = images.cast<py::dict>();
    size_t used = 0;
    for (size_t i = 0; i < srcs.size(); ++i) {
      py::object key = py::cast(srcs[i]);
      if (d.contains(key)) {
        items[i] = d[key];
      } else if (!srcs[i]->label().empty() && d.contains(srcs[i]->label())) {
        items[i] = d[py::str(srcs[i]->label())];
      } else {
        fail("[graph] no image given for ", source_name(srcs[i], i));
      }
      ++used;
    }
    if (used != d.size()) fail("[graph] got ", d.size(), " images for ", srcs.size(), " sources");
  } else if (py::isinstance<py::list>(images) || py::isinstance<py::tuple>(images)) {
    auto seq = images.cast<py::sequence>();
    bool per_source = seq.size() == srcs.size();
    for (const auto& item : seq)
      per_source = per_source && (py::isinstance<py::array>(item) || py::isinstance<Image>(item));
    if (per_source) {
      for (size_t i = 0; i < srcs.size(); ++i) items[i] = seq[i];
    } else if (srcs.size() == 1) {  // nested lists (or a list of images): one batch
      items[0] = images;
    } else {
      fail("[graph] expected a list of ", srcs.size(), " arrays, one per source, got ", seq.size(), " items");
    }
  } else {
    if (srcs.size() != 1) fail("[graph] expected a list of ", srcs.size(), " source images");
    items[0] = images;
  }
  std::vector<size_t> out;
  for (size_t i = 0; i < srcs.size(); ++i)
    out.push_back(uploads.add(items[i], layout, source_name(srcs[i], i), srcs[i]->shape()));
  return out;
}

py::object to_python(const std::vector<Image>& results, Layout layout, Handle* from = nullptr) {
  if (results.size() == 1) return image_to_array(results[0], layout, from);
  py::list out;
  for (const auto& r : results) out.append(image_to_array(r, layout, from));
  return out;
}

// Labels for each loss node: an array (class indices, one-hot or targets), a LossLabels, or a
// list with one of those per loss. nngraph.losses does the numpy side of the conversion.
// Each loss's (labels, weights or none) entries in `uploads`.
using LabelEntries = std::vector<std::pair<size_t, std::optional<size_t>>>;
LabelEntries to_labels(Graph& g, const std::vector<ImageShape>& shapes, int n, const py::object& labels,
                       std::vector<py::object>* given, Uploads& uploads) {
  const auto losses = g.loss_nodes();
  if (losses.empty()) {
    if (!labels.is_none()) fail("[graph] has no loss node, so it takes no labels");
    return {};
  }
  if (labels.is_none()) fail("[", losses[0]->label(), "] labels are required by this training graph");
  std::vector<py::object> items;
  if (losses.size() > 1) {
    auto seq = labels.cast<py::sequence>();
    if (seq.size() != losses.size()) fail("[graph] expected labels for ", losses.size(), " loss nodes, got ", seq.size());
    for (const auto& item : seq) items.push_back(py::reinterpret_borrow<py::object>(item));
  } else {
    items.push_back(labels);
  }
  const auto label_shapes = g.label_shapes(shapes);
  LabelEntries out;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& sh = label_shapes[i];
    const std::string name = losses[i]->label();
    given->push_back(items[i]);
    if (py::isinstance<Image>(items[i])) {  // a DeviceDataset's batch, already on the device
      out.push_back({uploads.add(items[i], Layout::NCHW, name), std::nullopt});
      continue;
    }
    if (py::isinstance<py::array>(items[i])) {  // the common case, class indices (N,), needs no Python
      const auto array = py::reinterpret_borrow<py::array>(items[i]);
      const char kind = array.dtype().kind();
      if ((kind == 'i' || kind == 'u') && array.ndim() == 1 && array.shape(0) == n) {
        out.push_back({one_hot(array, n, sh, name, uploads), std::nullopt});
        continue;
      }
    }
    py::object marshal = py::module_::import("nngraph.losses").attr("_marshal_labels");
    auto pair = marshal(items[i], n, py::make_tuple(sh.c, sh.h, sh.w), name).cast<py::tuple>();
    const auto array = pair[0].cast<py::array>();
    const char kind = array.dtype().kind();
    const size_t l = kind == 'i' || kind == 'u' ? one_hot(array, n, sh, name, uploads)
                                                : uploads.add(array, Layout::NCHW, name, sh);
    std::optional<size_t> w;
    if (!pair[1].is_none()) w = uploads.add(pair[1], Layout::NCHW, name + " weights");
    out.push_back({l, w});
  }
  return out;
}

// A run's sources (in the graph's order) and labels, marshalled and then uploaded together.
struct RunInputs {
  std::vector<Image> sources;
  std::vector<LossLabels> labels;
};

RunInputs run_inputs(Graph& g, const py::object& images, const py::object& labels, Layout layout,
                     std::vector<py::object>* given) {
  Uploads uploads;
  const auto sources = to_sources(g, images, layout, uploads);
  std::vector<ImageShape> shapes;
  for (size_t i : sources) shapes.push_back(uploads.descriptor(i).shape);
  const int n = sources.empty() ? 0 : uploads.descriptor(sources[0]).n;
  const auto loss_entries = to_labels(g, shapes, n, labels, given, uploads);
  const auto made = uploads.upload(g.device());
  RunInputs r;
  for (size_t i : sources) r.sources.push_back(made[i]);
  for (const auto& [l, w] : loss_entries) r.labels.push_back({made[l], w ? made[*w] : Image()});
  return r;
}

py::object losses_to_python(Handle& h, size_t i) {
  const std::vector<Image>* l;
  {
    py::gil_scoped_release release;
    l = &h.losses();
  }
  if (i >= l->size()) fail("[handle] no loss ", i, ": the graph has ", l->size(), " loss node(s)");
  return image_to_array((*l)[i], Layout::NCHW, &h).attr("reshape")(-1);
}

Callback wrap_callback(const py::object& fn) {
  if (fn.is_none()) return {};
  if (!PyCallable_Check(fn.ptr())) fail("[graph] callback must be callable");
  std::shared_ptr<py::object> held(new py::object(fn), [](py::object* o) {
    py::gil_scoped_acquire gil;
    std::unique_ptr<py::object> owned(o);
  });
  return [held](Handle& h) {
    py::gil_scoped_acquire gil;
    (*held)(h.shared_from_this());
  };
}

}  // namespace

std::shared_ptr<Graph> python_owned(std::shared_ptr<Graph> graph) {
  // The graph's worker may be waiting for the GIL (a Python callback): drop the GIL while
  // the graph finishes its queued work and joins.
  Graph* raw = graph.get();
  return std::shared_ptr<Graph>(raw, [held = std::move(graph)](Graph*) mutable {
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      held.reset();
    }
    held.reset();
  });
}

namespace {

// One Loss, or a list of them (their weighted sum trains).
std::vector<std::shared_ptr<LossNode>> to_losses(const py::object& loss) {
  std::vector<std::shared_ptr<LossNode>> out;
  auto one = [&](const py::handle& l) {
    if (!py::isinstance<LossNode>(l)) fail("[graph] training takes a Loss or a list of them, got ", type_name(l));
    out.push_back(l.cast<std::shared_ptr<LossNode>>());
  };
  if (py::isinstance<py::list>(loss) || py::isinstance<py::tuple>(loss)) {
    for (const auto& l : loss) one(l);
  } else {
    one(loss);
  }
  return out;
}

std::shared_ptr<Graph> training_graph(const py::object& loss_or_losses, const py::object& device,
                                      const py::object& optimizer, int max_in_flight, bool check_numerics,
                                      const std::string& format, const py::object& loss_scaling,
                                      const std::string& layout) {
  const auto losses = to_losses(loss_or_losses);
  const LossScaling scaling = loss_scaling.is_none() ? LossScaling{} : loss_scaling.cast<LossScaling>();
  auto g = Graph::training(losses, to_device(device), max_in_flight, hold_python<Optimizer>(optimizer, "Optimizer"),
                           dtype_named(format.c_str(), "graph"), scaling, layout_named(layout, "graph"));
  g->set_check_numerics(check_numerics);
  auto owned = python_owned(std::move(g));
  std::string frozen;  // sources the given optimizer cannot reach
  for (DataSource* ds : owned->data_sources())
    if (!ds->trainable()) frozen += (frozen.empty() ? "'" : ", '") + ds->label() + "'";
  if (!optimizer.is_none() && !frozen.empty()) {
    const std::string msg = cat("[", losses[0]->label(), "] data source(s) ", frozen,
                                " define no update() and stay frozen: the optimizer trains ArrayDataSources");
    if (PyErr_WarnEx(PyExc_UserWarning, msg.c_str(), 2) < 0) throw py::error_already_set();
  }
  return owned;
}

}  // namespace

void init_graph(py::module_& m) {
  py::class_<LossScaling>(m, "LossScaling",
                          "Dynamic loss scaling of a float16 training graph (torch.amp.GradScaler's rule), on the "
                          "device inside the step: the loss gradient is multiplied by the scale; a step whose "
                          "weight gradients overflow updates nothing and multiplies the scale by backoff; after "
                          "growth_interval clean steps it is multiplied by growth. enabled=False trains float16 "
                          "unscaled. bfloat16 and float32 graphs never scale.")
      .def(py::init([](bool enabled, float initial, float growth, float backoff, int growth_interval) {
             LossScaling s{enabled, initial, growth, backoff, growth_interval};
             s.validate();
             return s;
           }),
           py::kw_only(), py::arg("enabled") = true, py::arg("initial") = 65536.f, py::arg("growth") = 2.f,
           py::arg("backoff") = 0.5f, py::arg("growth_interval") = 2000)
      .def_readonly("enabled", &LossScaling::enabled)
      .def_readonly("initial", &LossScaling::initial)
      .def_readonly("growth", &LossScaling::growth)
      .def_readonly("backoff", &LossScaling::backoff)
      .def_readonly("growth_interval", &LossScaling::growth_interval)
      .def("__repr__", [](const LossScaling& s) {
        return cat("LossScaling(enabled=", s.enabled ? "True" : "False", ", initial=", s.initial, ", growth=", s.growth,
                   ", backoff=", s.backoff, ", growth_interval=", s.growth_interval, ")");
      });

  py::class_<Handle, HandlePtr>(m, "Handle", "One encode in flight: wait(), done, result().")
      .def("wait", [](Handle& h) {
        py::gil_scoped_release release;
        h.wait();
      }, "Blocks until the encode and its callback finished; raises what they raised.")
      .def_property_readonly("done", &Handle::done)
      .def("result", [](Handle& h, const std::string& layout) {
        const Layout l = parse_layout(layout);
        const std::vector<Image>* r;
        {
          py::gil_scoped_release release;
          r = &h.results();
        }
        return to_python(*r, l, &h);
      }, py::arg("layout") = "NCHW", "The result image(s) as numpy; waits for this encode (not later ones).")
      .def("losses", &losses_to_python, py::arg("index") = 0,
           "Per-image loss values of loss node `index` (N,), once the encode completed.")
      .def("loss", [](Handle& h, size_t i) {
        py::gil_scoped_release release;
        return h.loss(i);
      }, py::arg("index") = 0, "The reduced loss (what the gradient is of).")
      .def_property_readonly("loss_scale", [](Handle& h) {
        py::gil_scoped_release release;
        return h.loss_scale();
      }, "A float16 training step's loss scale (1.0 where the graph does not scale); waits for the step.")
      .def_property_readonly("skipped", [](Handle& h) {
        py::gil_scoped_release release;
        return h.skipped();
      }, "Whether this float16 training step's gradients overflowed, so it updated nothing; waits for the step.");

  py::class_<Graph, std::shared_ptr<Graph>>(
      m, "Graph",
      "Compiled graph from result image(s): orders nodes, infers shapes, fuses neurons into "
      "convolutions, plans one arena for intermediates and loads weights from data sources.")
      .def(py::init([](const py::object& result, const py::object& device, int max_in_flight,
                       const std::string& format, const std::string& layout) {
             return python_owned(std::make_shared<Graph>(to_results(result), to_device(device), max_in_flight,
                                                         dtype_named(format.c_str(), "graph"),
                                                         layout_named(layout, "graph")));
           }),
           py::arg("result"), py::arg("device") = "cpu", py::arg("max_in_flight") = 2, py::arg("format") = "float32",
           py::arg("layout") = "auto")
      .def_property_readonly("device", &Graph::device)
      .def_property_readonly("format", [](const Graph& g) { return std::string(dtype_name(g.format())); },
                             "The images' dtype between nodes it was made with: float32, float16 or bfloat16.")
      .def_property_readonly("storage", [](const Graph& g) { return std::string(dtype_name(g.storage())); },
                             "The dtype those images are stored and computed in on its device (cpu: float32).")
      .def_property_readonly("layout", [](const Graph& g) { return std::string(layout_name(g.layout())); },
                             "How those images lie on its device: 'NCHW', or channels-last 'NHWC' (layout='auto' "
                             "takes NHWC on cuda for half formats, and for float32 while allow_tf32 is on). Sources "
                             "and results stay NCHW.")
      .def_property_readonly("max_in_flight", &Graph::max_in_flight)
      .def_property_readonly("source_image_handles", &Graph::sources)
      .def_property_readonly("result_images", &Graph::results)
      .def_property_readonly("node_labels", &Graph::node_labels)
      .def_property_readonly("is_training", &Graph::is_training)
      .def_property_readonly("loss_labels", [](const Graph& g) {
        std::vector<std::string> out;
        for (const LossNode* l : g.loss_nodes()) out.push_back(l->label());
        return out;
      }, "Labels of the loss nodes, in the order encode() takes their labels (empty: takes none).")
      .def_property_readonly("data_sources", [](const Graph& g) {
        py::list out;
        for (DataSource* ds : g.data_sources()) out.append(py::cast(ds, py::return_value_policy::reference));
        return out;
      }, "The data sources of the graph's nodes, each once.")
      .def_property("check_numerics", &Graph::check_numerics, &Graph::set_check_numerics,
                    "Training graphs: a NaN or inf loss or weight gradient raises and updates no weight.")
      .def_property("allow_tf32", &Graph::allow_tf32, &Graph::set_allow_tf32,
                    "cuda: convolutions and fully connected layers may use tf32 tensor cores (about 1e-3 "
                    "relative error); off (the default): exact float32.")
      .def_property("recompute", &Graph::recompute, &Graph::set_recompute,
                    "Training graphs: a batch normalization's result (with its neuron, or a residual sum "
                    "it computes) that only later layers' gradients read again is computed again just "
                    "before them instead of kept through the forward pass: less memory for one more pass "
                    "each, taken only where keeping the result would make the plan's arena larger "
                    "(memory_plan shows 'bn1+relu (recomputed)'). On by default.")
      .def_property("memory_budget", &Graph::memory_budget, &Graph::set_memory_budget,
                    "Training graphs with recompute on: the share, 0 to 1, of the memory recomputation "
                    "saves that the plan may spend keeping results after all, the largest first (each "
                    "one kept saves a pass). 0 (the default): recompute wherever keeping would make the "
                    "arena larger; 1: keep every result, as recompute off does. Like PyTorch's "
                    "activation_memory_budget. Outside [0, 1]: InvalidInputError.")
      .def_property_readonly("loss_scale", [](const Graph& g) {
        py::gil_scoped_release release;
        return g.loss_scale();
      }, "Float16 training graphs: the loss scale of the next step (after the queued ones); else 1.0.")
      .def_property_readonly("skipped_steps", [](const Graph& g) {
        py::gil_scoped_release release;
        return g.skipped_steps();
      }, "Float16 training graphs: the steps skipped so far for overflowing gradients; else 0.")
      .def_static("training", &training_graph,
           py::arg("loss"), py::arg("device") = "cpu", py::arg("optimizer") = py::none(), py::arg("max_in_flight") = 2,
           py::arg("check_numerics") = false, py::arg("format") = "float32", py::arg("loss_scaling") = py::none(),
           py::arg("layout") = "auto",
           "The training graph of a loss node (see Loss.training_graph), or of a list of them: the gradient of "
           "their sum, each weighted by its LossDescriptor's weight (an auxiliary classifier's loss beside the main "
           "one). Its results are the losses' sources in that order; encode takes one labels array per loss, in "
           "loss_labels' order.")
      .def("inference", [](const Graph& g) { return python_owned(g.inference()); },
           "An inference graph over this graph's results, reading its (trained) weights in place. While "
           "one is referenced, later calls return that graph, planned and captured already. Each call gives it "
           "this graph's allow_tf32.")
      .def("evaluation", [](const Graph& g) { return python_owned(g.evaluation()); },
           "Of a training graph: forward nodes in inference mode plus the loss nodes. It takes labels and "
           "gives losses (a validation set's) but trains nothing; reads the weights in place. Kept while "
           "referenced, as inference().")
      .def("_summary_rows", [](const Graph& g) {
             py::list out;
             for (const auto& r : g.summary()) {
               py::object shape = py::none();
               if (r.shape) shape = py::make_tuple(r.shape->c, r.shape->h, r.shape->w);
               out.append(py::make_tuple(r.label, r.kind, shape, r.parameters));
             }
             return out;
           },
           "(label, kind, (C, H, W) or None, parameter count) per forward node; see summary().")
      .def("encode", [](Graph& g, const py::object& images, const py::object& labels, const py::object& callback,
                        const std::string& layout) {
             std::vector<py::object> given;
             auto in = run_inputs(g, images, labels, parse_layout(layout), &given);
             auto cb = wrap_callback(callback);
             HandlePtr h;
             {
               py::gil_scoped_release release;
               h = g.encode(std::move(in.sources), std::move(in.labels), std::move(cb));
             }
             for (size_t i = 0; i < given.size(); ++i)
               if (py::hasattr(given[i], "_attach")) given[i].attr("_attach")(h, i);
             return h;
           },
           py::arg("images"), py::arg("labels") = py::none(), py::arg("callback") = py::none(),
           py::arg("layout") = "NCHW",
           "Queues a run and returns a Handle at once (blocks only while max_in_flight are outstanding). "
           "callback(handle) runs on the graph's completion thread once the device has finished the run.")
      .def("run", [](Graph& g, const py::object& images, const py::object& labels, const std::string& layout) {
             const Layout l = parse_layout(layout);
             std::vector<py::object> given;
             auto in = run_inputs(g, images, labels, l, &given);
             std::vector<Image> out;
             {
               py::gil_scoped_release release;
               out = g.run(std::move(in.sources), std::move(in.labels));
             }
             return to_python(out, l);
           },
           py::arg("images"), py::arg("labels") = py::none(), py::arg("layout") = "NCHW",
           "Runs synchronously: one array per source (a list, a dict keyed by node or label, or "
           "the array alone for one source) → the result array(s).")
      .def("reload_from_data_sources", &Graph::reload_from_data_sources,
           "Reads every data source again (load, copy, purge); all or nothing. inference() and "
           "evaluation() are made anew.")
      .def("memory_plan", [](const Graph& g, int batch) {
             const MemoryPlan p = g.memory_plan(batch);
             py::dict d;
             d["batch"] = p.batch;
             d["planned_bytes"] = p.planned_bytes;
             d["naive_bytes"] = p.naive_bytes;
             d["steps"] = p.steps;
             return d;
           },
           py::arg("batch"), "Arena bytes (intermediates aliased by liveness) against one buffer each.");

  // Registered here, after Graph, so signatures name the Python types.
  py::reinterpret_borrow<py::class_<LossNode, FilterNode, std::shared_ptr<LossNode>>>(m.attr("Loss"))
      .def("training_graph", &training_graph, py::arg("device") = "cpu", py::arg("optimizer") = py::none(),
           py::arg("max_in_flight") = 2, py::arg("check_numerics") = false, py::arg("format") = "float32",
           py::arg("loss_scaling") = py::none(), py::arg("layout") = "auto",
           "Every gradient node at once, wired to the forward nodes; data sources update after each step. "
           "format: the images' dtype between nodes (float32, float16, bfloat16); parameters keep float32 "
           "masters that the optimizers update. loss_scaling: a LossScaling for float16 (None: the defaults). "
           "layout: 'NCHW', 'NHWC' (channels-last) or 'auto' for the images between nodes.");
}

}  // namespace nngraph::py_bind
