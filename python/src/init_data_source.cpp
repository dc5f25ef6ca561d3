// DataSource (subclassable from Python) and ArrayDataSource.
#include <map>

#include "backends/backend.h"
#include "bindings.h"
#include "nngraph/error.h"

namespace nngraph::py_bind {
namespace {

// Python subclasses: one method per tensor the descriptor names (weights() and biases() for
// convolutions and matrices; gamma(), beta(), mean() and variance() for normalizations),
// returning arrays that stay referenced until purge().
class PyDataSource : public DataSource {
 public:
  ParameterDescriptor descriptor() override {
    return call_override<ParameterDescriptor>(
        self(), "descriptor", "an nngraph.ConvolutionDescriptor, MatrixDescriptor or NormalizationDescriptor");
  }
  std::string label() override { return call_override<std::string>(self(), "label", "a str"); }
  bool load() override { return call_override<bool>(self(), "load", "a bool"); }
  void purge() override {
    py::gil_scoped_acquire gil;
    held_.clear();
    call_override<py::object>(self(), "purge", "None");
  }
  WeightsView tensor(const std::string& name) override {
    py::gil_scoped_acquire gil;
    auto r = call_override<py::object>(self(), name.c_str(), "an array or None");
    if (r.is_none()) {
      held_.erase(name);
      return {};
    }
    py::array& held = held_[name] = float_array(r, label() + " " + name + "()");
    const DType dt = held.dtype().itemsize() == 2 ? DType::Float16 : DType::Float32;
    return {held.data(), static_cast<size_t>(held.size()), dt, {held.shape(), held.shape() + held.ndim()}};
  }
  WeightsLayout weights_layout() override {
    py::gil_scoped_acquire gil;
    if (!py::get_override(self(), "weights_layout")) return WeightsLayout::OIHW;
    return call_override<WeightsLayout>(self(), "weights_layout", "an nngraph.WeightsLayout");
  }
  bool trainable() override {
    py::gil_scoped_acquire gil;
    return static_cast<bool>(py::get_override(self(), "update"));
  }
  // Host update: update(gradients, values), tuples in the descriptor's tensor order (for a
  // convolution (dW, db), (W, b)), returns the new values in that order, or None to keep them.
  // The graph puts the old values back if a later update of the same step fails.
  bool update(const GradientState& gradient, WeightsState& values) override {
    py::gil_scoped_acquire gil;
    if (!py::get_override(self(), "update")) return false;
    const auto specs = tensor_specs(descriptor());
    const std::string name = label();
    auto host = [](const std::shared_ptr<Buffer>& b, const std::vector<int64_t>& shape) -> py::object {
      if (!b) return py::none();
      py::array_t<float> a(std::vector<py::ssize_t>(shape.begin(), shape.end()));
      backend_for(b->device()).copy_to_host(a.mutable_data(), b->data(), b->bytes());
      return std::move(a);
    };
    py::tuple grads(specs.size()), now(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      grads[i] = host(gradient.tensors[i], specs[i].shape);
      now[i] = host(values.tensors[i], specs[i].shape);
    }
    const std::string expected = "a tuple of " + std::to_string(specs.size()) + " arrays or None";
    auto r = call_override<py::object>(self(), "update", expected.c_str(), grads, now);
    if (r.is_none()) return true;
    if (!py::isinstance<py::sequence>(r) || py::isinstance<py::str>(r) || py::len(r) != specs.size())
      fail("[", name, "] update() must return ", expected, ", got ", type_name(r));
    auto items = r.cast<py::sequence>();
    std::vector<std::vector<float>> next(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {  // all checked before any is written
      if (!values.tensors[i] || !gradient.tensors[i]) continue;
      next[i] = to_floats(float_array(items[i], name + " updated " + specs[i].name));
      if (next[i].size() != values.counts[i])
        fail("[", name, "] update returned ", next[i].size(), " ", specs[i].name, ", expected ", values.counts[i]);
    }
    for (size_t i = 0; i < specs.size(); ++i)
      if (!next[i].empty())
        backend_for(values.tensors[i]->device()).copy_from_host(values.tensors[i]->data(), next[i].data(),
                                                                 values.tensors[i]->bytes());
    return true;
  }

 private:
  const DataSource* self() const { return this; }
  std::map<std::string, py::array> held_;
};

py::object tensor_array(DataSource& ds, const std::string& name) {
  const ParameterDescriptor d = ds.descriptor();
  const TensorSpec spec = tensor_specs(d)[tensor_index(d, name, ds.label())];
  const WeightsView v = ds.tensor(name);
  if (!v.count) return py::none();
  if (v.count != spec.count())
    fail("[", ds.label(), "] ", name, " hold ", v.count, " values, expected ", spec.count());
  py::array_t<float> out(std::vector<py::ssize_t>(spec.shape.begin(), spec.shape.end()));
  convert_host(v.data, v.dtype, out.mutable_data(), DType::Float32, v.count);
  return std::move(out);
}

// Values of tensor `spec` given as an array of its shape (or one that fits it, see shape_fits).
std::vector<float> given(const py::handle& obj, const TensorSpec& spec, const std::string& label) {
  py::array a = float_array(obj, label + " " + spec.name);
  const std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
  if (a.ndim() < 2 ? static_cast<size_t>(a.size()) != spec.count() || spec.shape.size() > 1
                   : !shape_fits(shape, spec) || static_cast<size_t>(a.size()) != spec.count())
    fail("[", label, "] ", spec.name, " must have shape ", shape_text(spec.shape),
         spec.shape.size() == 4 ? " (output, input/groups, kernel height, kernel width)" : "");
  return to_floats(a);
}

std::vector<float> initial_or_given(const py::object& weights, const ParameterDescriptor& d, uint64_t seed,
                                    const std::string& label) {
  if (py::isinstance<py::str>(weights)) {
    const auto name = weights.cast<std::string>();
    if (name == "he") return ArrayDataSource::initial_weights(d, Initializer::He, seed);
    if (name == "glorot") return ArrayDataSource::initial_weights(d, Initializer::Glorot, seed);
    if (name == "zeros") return ArrayDataSource::initial_weights(d, Initializer::Zeros, seed);
    fail("[", label, "] unknown initializer '", name, "' (expected he, glorot, zeros or an array)");
  }
  return given(weights, tensor_specs(d)[0], label);
}

std::vector<float> initial_biases(const py::object& biases, const TensorSpec& spec, const std::string& label) {
  if (biases.is_none()) return {};
  if (py::isinstance<py::str>(biases)) {
    if (biases.cast<std::string>() != "zeros") fail("[", label, "] biases must be 'zeros', None or an array");
    return std::vector<float>(spec.count(), 0.f);
  }
  return given(biases, spec, label);
}

// Every tensor's values: weights and biases (kinds that have them), then `tensors` by name.
std::vector<std::vector<float>> initial_tensors(const ParameterDescriptor& d, const py::object& weights,
                                                const py::object& biases, const py::object& tensors, uint64_t seed,
                                                const std::string& label) {
  const auto specs = tensor_specs(d);
  std::vector<std::vector<float>> out(specs.size());
  const bool has_weights = specs[0].name == "weights";
  auto is = [](const py::object& o, const char* s) { return py::isinstance<py::str>(o) && o.cast<std::string>() == s; };
  if (has_weights) {
    out[0] = initial_or_given(weights, d, seed, label);
    out[1] = initial_biases(biases, specs[1], label);
  } else if (!is(weights, "he") || !is(biases, "zeros")) {  // anything but the defaults
    fail("[", label, "] a ", kind_name(d), " source has no weights or biases: give tensors={name: array}");
  }
  if (tensors.is_none()) return out;
  if (!py::isinstance<py::dict>(tensors)) fail("[", label, "] tensors must be a dict {name: array}");
  for (const auto& [key, value] : tensors.cast<py::dict>()) {
    const auto name = py::str(key).cast<std::string>();
    const size_t i = tensor_index(d, name, label);
    out[i] = value.is_none() ? std::vector<float>{} : given(value, specs[i], label);
  }
  return out;
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
      "The only way parameters enter a graph. Subclass and define descriptor(), label(), load(), "
      "purge() and one method per tensor the descriptor names: weights() and biases() (None for no "
      "bias) for a ConvolutionDescriptor or MatrixDescriptor; gamma(), beta(), mean() and variance() "
      "for a NormalizationDescriptor. weights_layout() (convolutions) and update() are optional.")
      .def(py::init<>())
      .def("descriptor", &DataSource::descriptor)
      .def("label", &DataSource::label)
      .def("load", &DataSource::load)
      .def("purge", &DataSource::purge)
      .def("weights_layout", &DataSource::weights_layout)
      .def("trainable", &DataSource::trainable)
      .def("tensor", &tensor_array, py::arg("name"),
           "The tensor of that name in its descriptor's shape (float32), or None where left out.")
      .def("tensors", [](DataSource& ds) {
             py::dict out;
             for (const TensorSpec& t : tensor_specs(ds.descriptor())) out[py::str(t.name)] = tensor_array(ds, t.name);
             return out;
           },
           "Every tensor by name, in the descriptor's order (None where left out).")
      .def("weights", [](DataSource& ds) { return tensor_array(ds, "weights"); },
           "A convolution's or matrix's weights: tensor('weights').")
      .def("biases", [](DataSource& ds) { return tensor_array(ds, "biases"); },
           "A convolution's or matrix's biases, or None: tensor('biases').");

  py::class_<ArrayDataSource, DataSource, std::shared_ptr<ArrayDataSource>>(
      m, "ArrayDataSource",
      "Parameters from arrays or initializers. Convolutions and matrices: weights as an array "
      "(O, I/groups, kh, kw), (rows, columns) or an initializer 'he', 'glorot', 'zeros'; biases "
      "'zeros', an array or None. Any kind: tensors={name: array} (normalizations: gamma, beta, "
      "mean, variance; 1, 0, 0 and 1 where not given). frozen: tensor names the optimizer skips.")
      .def(py::init([](const ParameterDescriptor& d, const py::object& weights, const py::object& biases,
                       const std::string& label, uint64_t seed, const py::object& optimizer, const py::object& tensors,
                       const std::vector<std::string>& frozen) {
             const std::string name = label.empty() ? "data source" : label;
             validate(d, name);
             auto ds = std::make_shared<ArrayDataSource>(d, initial_tensors(d, weights, biases, tensors, seed, name), label);
             if (!optimizer.is_none()) ds->set_optimizer(hold_python<Optimizer>(optimizer, "Optimizer"));
             ds->set_frozen(frozen);
             return ds;
           }),
           py::arg("descriptor"), py::arg("weights") = "he", py::arg("biases") = "zeros",
           py::arg("label") = "", py::arg("seed") = 0, py::arg("optimizer") = py::none(),
           py::arg("tensors") = py::none(), py::arg("frozen") = std::vector<std::string>{})
      .def_property("frozen", &ArrayDataSource::frozen, &ArrayDataSource::set_frozen,
                    "Names of trained tensors the optimizer leaves as they are (a batch norm's gamma); "
                    "a change restarts the optimizer's state vectors.")
      .def_property("optimizer", &ArrayDataSource::optimizer,
                    [](ArrayDataSource& ds, const py::object& o) { ds.set_optimizer(hold_python<Optimizer>(o, "Optimizer")); },
                    "Updates the weights in training graphs; its state (momentum, velocity, step) lives here.")
      .def("set_weights", [](ArrayDataSource& ds, const py::object& weights, const py::object& biases) {
             const auto d = ds.descriptor();
             if (ds.specs()[0].name != "weights")
               fail("[", ds.label(), "] a ", kind_name(d), " source has no weights: use set_tensors()");
             ds.set_values({initial_or_given(weights, d, 0, ds.label()), initial_biases(biases, ds.specs()[1], ds.label())});
           },
           py::arg("weights"), py::arg("biases") = py::none(),
           "Replaces the weights and biases, here and in the graph that trains them.")
      .def("set_tensors", [](ArrayDataSource& ds, const py::dict& tensors) {
             const auto& specs = ds.specs();
             std::vector<std::vector<float>> values;
             for (const TensorSpec& t : specs) {
               const WeightsView v = ds.tensor(t.name);
               values.emplace_back(static_cast<const float*>(v.data), static_cast<const float*>(v.data) + v.count);
             }
             for (const auto& [key, value] : tensors) {
               const auto name = py::str(key).cast<std::string>();
               const size_t i = tensor_index(ds.descriptor(), name, ds.label());
               values[i] = given(value, specs[i], ds.label());
             }
             ds.set_values(std::move(values));
           },
           py::arg("tensors"), "Replaces the named tensors ({name: array}); the others keep their values.")
      .def("optimizer_state", [](ArrayDataSource& ds) {
             py::list slots;
             for (const auto& v : ds.optimizer_slots()) slots.append(py::array_t<float>(v.size(), v.data()));
             py::dict out;
             out["step"] = ds.optimizer_step();
             out["slots"] = slots;
             return out;
           },
           "{'step': updates so far, 'slots': [...]} as numpy arrays: slot_count() vectors per trained "
           "tensor in the descriptor's order (convolutions: weight slots, then bias slots).")
      .def("check_optimizer_state", [](ArrayDataSource& ds, const py::object& state) {
             const auto [slots, step] = optimizer_state_arg(ds, state);
             ds.check_optimizer_state(slots, step);
           },
           py::arg("state"), "Raises where load_optimizer_state(state) would; changes nothing.")
      .def("load_optimizer_state", [](ArrayDataSource& ds, const py::object& state) {
             const auto [slots, step] = optimizer_state_arg(ds, state);
             ds.set_optimizer_state(slots, step);
           },
           py::arg("state"), "Restores what optimizer_state() returned (checked first); used at the next update.")
      .def("reset_optimizer_state", &ArrayDataSource::reset_optimizer_state,
           "Forgets the optimizer's state (momentum, moments, lookahead, average): the next update starts from "
           "zero slots at step 0, as with a new optimizer.")
      .def("swap_average", &ArrayDataSource::swap_average,
           "Exchanges the trained tensors' values with the exponential moving average the optimizer keeps of "
           "them (its ema_decay), so a second call exchanges them back (nngraph.averaged_weights does both "
           "around a block). Statistics and frozen tensors stay; raises without an average.");
}

}  // namespace nngraph::py_bind
