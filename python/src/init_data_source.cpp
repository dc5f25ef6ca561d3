// DataSource (subclassable from Python) and ArrayDataSource.
#include "backends/backend.h"
#include "bindings.h"
#include "nngraph/error.h"

namespace nngraph::py_bind {
namespace {

// Python subclasses: weights()/biases() return arrays that stay referenced until purge().
class PyDataSource : public DataSource {
 public:
  ConvolutionDescriptor descriptor() override {
    return call_override<ConvolutionDescriptor>(self(), "descriptor", "an nngraph.ConvolutionDescriptor");
  }
  std::string label() override { return call_override<std::string>(self(), "label", "a str"); }
  bool load() override { return call_override<bool>(self(), "load", "a bool"); }
  void purge() override {
    py::gil_scoped_acquire gil;
    held_weights_ = py::array();
    held_biases_ = py::array();
    call_override<py::object>(self(), "purge", "None");
  }
  WeightsView weights() override { return fetch("weights", held_weights_, false); }
  WeightsView biases() override { return fetch("biases", held_biases_, true); }
  WeightsLayout weights_layout() override {
    py::gil_scoped_acquire gil;
    if (!py::get_override(self(), "weights_layout")) return WeightsLayout::OIHW;
    return call_override<WeightsLayout>(self(), "weights_layout", "an nngraph.WeightsLayout");
  }
  bool trainable() override {
    py::gil_scoped_acquire gil;
    return static_cast<bool>(py::get_override(self(), "update"));
  }
  // Host update: update((dW, db), (W, b)) returns new (W, b), or None to keep them. The graph
  // puts the old values back if a later update of the same step fails.
  bool update(const GradientState& gradient, WeightsState& weights) override {
    py::gil_scoped_acquire gil;
    if (!py::get_override(self(), "update")) return false;
    const ConvolutionDescriptor d = descriptor();
    const std::string name = label();
    const std::vector<py::ssize_t> wshape{d.output_feature_channels, d.input_feature_channels / d.groups,
                                          d.kernel_height, d.kernel_width};
    auto host = [](const std::shared_ptr<Buffer>& b, std::vector<py::ssize_t> shape) -> py::object {
      if (!b) return py::none();
      py::array_t<float> a(shape);
      backend_for(b->device()).copy_to_host(a.mutable_data(), b->data(), b->bytes());
      return std::move(a);
    };
    const py::ssize_t o = d.output_feature_channels;
    auto r = call_override<py::object>(self(), "update", "(weights, biases) or None",
                                       py::make_tuple(host(gradient.weights, wshape), host(gradient.biases, {o})),
                                       py::make_tuple(host(weights.weights, wshape), host(weights.biases, {o})));
    if (r.is_none()) return true;
    if (!py::isinstance<py::sequence>(r) || py::isinstance<py::str>(r) || py::len(r) != 2)
      fail("[", name, "] update() must return (weights, biases) or None, got ", type_name(r));
    auto pair = r.cast<py::sequence>();
    py::array nw = float_array(pair[0], name + " updated weights");
    if (static_cast<size_t>(nw.size()) != weights.weight_count)
      fail("[", name, "] update returned ", nw.size(), " weights, expected ", weights.weight_count);
    py::array nb;
    if (weights.biases) {
      nb = float_array(pair[1], name + " updated biases");
      if (static_cast<size_t>(nb.size()) != weights.bias_count)
        fail("[", name, "] update returned ", nb.size(), " biases, expected ", weights.bias_count);
    }
    const std::vector<float> w = to_floats(nw), b = weights.biases ? to_floats(nb) : std::vector<float>{};
    Backend& backend = backend_for(weights.weights->device());
    backend.copy_from_host(weights.weights->data(), w.data(), weights.weights->bytes());
    if (weights.biases) backend.copy_from_host(weights.biases->data(), b.data(), weights.biases->bytes());
    return true;
  }

 private:
  const DataSource* self() const { return this; }
  WeightsView fetch(const char* name, py::array& held, bool optional) {
    py::gil_scoped_acquire gil;
    auto r = call_override<py::object>(self(), name, optional ? "an array or None" : "an array");
    if (r.is_none()) {
      if (!optional) fail("[", label(), "] ", name, "() returned None");
      held = py::array();
      return {};
    }
    held = float_array(r, label() + " " + name + "()");
    const DType dt = held.dtype().itemsize() == 2 ? DType::Float16 : DType::Float32;
    return {held.data(), static_cast<size_t>(held.size()), dt, {held.shape(), held.shape() + held.ndim()}};
  }
  py::array held_weights_, held_biases_;
};

py::array view_to_array(const WeightsView& v, std::vector<py::ssize_t> shape) {
  py::array_t<float> out(shape);
  convert_host(v.data, v.dtype, out.mutable_data(), DType::Float32, v.count);
  return out;
}

std::vector<float> initial_or_given(const py::object& weights, const ConvolutionDescriptor& d,
                                    uint64_t seed, const std::string& label) {
  if (py::isinstance<py::str>(weights)) {
    const auto name = weights.cast<std::string>();
    if (name == "he") return ArrayDataSource::initial_weights(d, Initializer::He, seed);
    if (name == "glorot") return ArrayDataSource::initial_weights(d, Initializer::Glorot, seed);
    if (name == "zeros") return ArrayDataSource::initial_weights(d, Initializer::Zeros, seed);
    fail("[", label, "] unknown initializer '", name, "' (expected he, glorot, zeros or an array)");
  }
  py::array a = float_array(weights, label + " weights");
  const std::vector<py::ssize_t> want{d.output_feature_channels, d.input_feature_channels / d.groups,
                                      d.kernel_height, d.kernel_width};
  const bool full = a.ndim() == 4 && std::equal(want.begin(), want.end(), a.shape());
  const bool flat = a.ndim() == 2 && d.kernel_height == 1 && d.kernel_width == 1 &&
                    a.shape(0) == want[0] && a.shape(1) == want[1];
  if (!full && !flat)
    fail("[", label, "] weights must have shape (", want[0], ", ", want[1], ", ", want[2], ", ", want[3],
         ") (output, input/groups, kernel height, kernel width)");
  return to_floats(a);
}

std::vector<float> initial_biases(const py::object& biases, const ConvolutionDescriptor& d,
                                  const std::string& label) {
  if (biases.is_none()) return {};
  if (py::isinstance<py::str>(biases)) {
    if (biases.cast<std::string>() != "zeros") fail("[", label, "] biases must be 'zeros', None or an array");
    return std::vector<float>(d.output_feature_channels, 0.f);
  }
  py::array a = float_array(biases, label + " biases");
  if (a.ndim() != 1 || a.shape(0) != d.output_feature_channels)
    fail("[", label, "] biases must have shape (", d.output_feature_channels, ",)");
  return to_floats(a);
}

// {'step': int, 'slots': [arrays]} as the engine takes it; anything else raises naming the source.
std::pair<std::vector<std::vector<float>>, int64_t> optimizer_state_arg(ArrayDataSource& ds, const py::object& state) {
  const std::string what = "[" + ds.label() + "] optimizer state";
  if (!py::isinstance<py::dict>(state)) fail(what, " must be a dict {'step': int, 'slots': [arrays]}");
  const auto d = state.cast<py::dict>();
  if (!d.contains("step") || !d.contains("slots")) fail(what, " needs 'step' and 'slots'");
  const py::object step = d["step"], slots = d["slots"];
  if (!py::isinstance<py::int_>(step) && !py::isinstance(step, py::module_::import("numpy").attr("integer")))
    fail(what, " step must be an integer, got ", type_name(step));
  if (!py::isinstance<py::sequence>(slots)) fail(what, " slots must be a list of arrays");
  std::vector<std::vector<float>> out;
  for (const auto& v : slots.cast<py::sequence>()) out.push_back(to_floats(float_array(v, ds.label() + " optimizer state")));
  return {out, step.cast<int64_t>()};
}

}  // namespace

void init_data_source(py::module_& m) {
  py::enum_<WeightsLayout>(m, "WeightsLayout")
      .value("OIHW", WeightsLayout::OIHW)
      .value("OHWI", WeightsLayout::OHWI);

  py::class_<DataSource, PyDataSource, std::shared_ptr<DataSource>>(
      m, "DataSource",
      "The only way weights enter a graph. Subclass and define descriptor(), label(), load(), "
      "purge(), weights() and biases() (None for no bias); weights_layout() is optional.")
      .def(py::init<>())
      .def("descriptor", &DataSource::descriptor)
      .def("label", &DataSource::label)
      .def("load", &DataSource::load)
      .def("purge", &DataSource::purge)
      .def("weights_layout", &DataSource::weights_layout)
      .def("trainable", &DataSource::trainable)
      .def("weights", [](DataSource& ds) {
        const auto d = ds.descriptor();
        return view_to_array(ds.weights(), {d.output_feature_channels, d.input_feature_channels / d.groups,
                                            d.kernel_height, d.kernel_width});
      })
      .def("biases", [](DataSource& ds) -> py::object {
        const WeightsView v = ds.biases();
        if (!v.count) return py::none();
        return view_to_array(v, {static_cast<py::ssize_t>(v.count)});
      });

  py::class_<ArrayDataSource, DataSource, std::shared_ptr<ArrayDataSource>>(
      m, "ArrayDataSource",
      "Weights from an array (O, I/groups, kh, kw) or an initializer: 'he', 'glorot', 'zeros'.")
      .def(py::init([](const ConvolutionDescriptor& d, const py::object& weights, const py::object& biases,
                       const std::string& label, uint64_t seed, const py::object& optimizer) {
             d.validate(label.empty() ? "data source" : label);
             auto ds = std::make_shared<ArrayDataSource>(d, initial_or_given(weights, d, seed, label),
                                                         initial_biases(biases, d, label), label);
             if (!optimizer.is_none()) ds->set_optimizer(hold_python<Optimizer>(optimizer, "Optimizer"));
             return ds;
           }),
           py::arg("descriptor"), py::arg("weights") = "he", py::arg("biases") = "zeros",
           py::arg("label") = "", py::arg("seed") = 0, py::arg("optimizer") = py::none())
      .def_property("optimizer", &ArrayDataSource::optimizer,
                    [](ArrayDataSource& ds, const py::object& o) { ds.set_optimizer(hold_python<Optimizer>(o, "Optimizer")); },
                    "Updates the weights in training graphs; its state (momentum, velocity, step) lives here.")
      .def("set_weights", [](ArrayDataSource& ds, const py::object& weights, const py::object& biases) {
             const auto d = ds.descriptor();
             std::vector<float> b;
             if (!biases.is_none()) b = initial_biases(biases, d, ds.label());
             ds.set_values(initial_or_given(weights, d, 0, ds.label()), std::move(b));
           },
           py::arg("weights"), py::arg("biases") = py::none(),
           "Replaces the values, here and in the graph that trains them.")
      .def("optimizer_state", [](ArrayDataSource& ds) {
             py::list slots;
             for (const auto& v : ds.optimizer_slots()) slots.append(py::array_t<float>(v.size(), v.data()));
             py::dict out;
             out["step"] = ds.optimizer_step();
             out["slots"] = slots;
             return out;
           },
           "{'step': updates so far, 'slots': [weight slots..., bias slots...]} as numpy arrays.")
      .def("check_optimizer_state", [](ArrayDataSource& ds, const py::object& state) {
             const auto [slots, step] = optimizer_state_arg(ds, state);
             ds.check_optimizer_state(slots, step);
           },
           py::arg("state"), "Raises where load_optimizer_state(state) would; changes nothing.")
      .def("load_optimizer_state", [](ArrayDataSource& ds, const py::object& state) {
             const auto [slots, step] = optimizer_state_arg(ds, state);
             ds.set_optimizer_state(slots, step);
           },
           py::arg("state"), "Restores what optimizer_state() returned (checked first); used at the next update.");
}

}  // namespace nngraph::py_bind
