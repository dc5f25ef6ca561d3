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
    PYBIND11_OVERRIDE_PURE(ConvolutionDescriptor, DataSource, descriptor);
  }
  std::string label() override { PYBIND11_OVERRIDE_PURE(std::string, DataSource, label); }
  bool load() override { PYBIND11_OVERRIDE_PURE(bool, DataSource, load); }
  void purge() override {
    py::gil_scoped_acquire gil;
    held_weights_ = py::array();
    held_biases_ = py::array();
    py::function f = py::get_override(static_cast<const DataSource*>(this), "purge");
    if (!f) fail("[data source] subclass must define purge()");
    f();
  }
  WeightsView weights() override { return fetch("weights", held_weights_, false); }
  WeightsView biases() override { return fetch("biases", held_biases_, true); }
  WeightsLayout weights_layout() override {
    PYBIND11_OVERRIDE(WeightsLayout, DataSource, weights_layout);
  }
  bool trainable() override {
    py::gil_scoped_acquire gil;
    return static_cast<bool>(py::get_override(static_cast<const DataSource*>(this), "update"));
  }
  // Host update: update((dW, db), (W, b)) returns new (W, b), or None to keep them.
  bool update(const GradientState& gradient, WeightsState& weights) override {
    py::gil_scoped_acquire gil;
    py::function f = py::get_override(static_cast<const DataSource*>(this), "update");
    if (!f) return false;
    const ConvolutionDescriptor d = descriptor();
    const std::vector<py::ssize_t> wshape{d.output_feature_channels, d.input_feature_channels / d.groups,
                                          d.kernel_height, d.kernel_width};
    auto host = [](const std::shared_ptr<Buffer>& b, std::vector<py::ssize_t> shape) -> py::object {
      if (!b) return py::none();
      py::array_t<float> a(shape);
      backend_for(b->device()).copy_to_host(a.mutable_data(), b->data(), b->bytes());
      return std::move(a);
    };
    const py::ssize_t o = d.output_feature_channels;
    py::object r = f(py::make_tuple(host(gradient.weights, wshape), host(gradient.biases, {o})),
                     py::make_tuple(host(weights.weights, wshape), host(weights.biases, {o})));
    if (r.is_none()) return true;
    auto pair = r.cast<py::tuple>();
    if (pair.size() != 2) fail("[", label(), "] update must return (weights, biases) or None");
    py::array nw = float_array(pair[0], label() + " updated weights");
    if (static_cast<size_t>(nw.size()) != weights.weight_count)
      fail("[", label(), "] update returned ", nw.size(), " weights, expected ", weights.weight_count);
    py::array nb;
    if (weights.biases) {
      nb = float_array(pair[1], label() + " updated biases");
      if (static_cast<size_t>(nb.size()) != weights.bias_count)
        fail("[", label(), "] update returned ", nb.size(), " biases, expected ", weights.bias_count);
    }
    auto put = [](const std::shared_ptr<Buffer>& b, const py::array& a) {
      const std::vector<float> v = to_floats(a);
      backend_for(b->device()).copy_from_host(b->data(), v.data(), b->bytes());
    };
    put(weights.weights, nw);
    if (weights.biases) put(weights.biases, nb);
    return true;
  }

 private:
  WeightsView fetch(const char* name, py::array& held, bool optional) {
    py::gil_scoped_acquire gil;
    py::function f = py::get_override(static_cast<const DataSource*>(this), name);
    if (!f) fail("[data source] subclass must define ", name, "()");
    py::object r = f();
    if (r.is_none()) {
      if (!optional) fail("[data source] ", name, "() returned None");
      held = py::array();
      return {};
    }
    held = float_array(r, std::string("data source ") + name);
    const DType dt = held.dtype().itemsize() == 2 ? DType::Float16 : DType::Float32;
    return {held.data(), static_cast<size_t>(held.size()), dt};
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
      .def("load_optimizer_state", [](ArrayDataSource& ds, const py::dict& state) {
             std::vector<std::vector<float>> slots;
             for (const auto& s : state["slots"].cast<py::list>()) {
               slots.push_back(to_floats(float_array(s, ds.label() + " optimizer state")));
             }
             ds.set_optimizer_state(slots, state["step"].cast<int64_t>());
           },
           py::arg("state"));
}

}  // namespace nngraph::py_bind
