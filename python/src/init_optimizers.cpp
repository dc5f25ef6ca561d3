// Optimizers, subclassable from Python.
#include "backends/backend.h"
#include "bindings.h"
#include "nngraph/error.h"
#include "nngraph/optimizer.h"

namespace nngraph::py_bind {
namespace {

// Python optimizers update host arrays in place: zero-copy views on cpu, copies elsewhere.
class PyOptimizer : public Optimizer {
 public:
  using Optimizer::Optimizer;
  int slot_count() const override {
    return call_override<int>(static_cast<const Optimizer*>(this), "slot_count", "an int");
  }
  void apply(const Device& device, float* values, const float* gradient, const std::vector<float*>& slots,
             size_t count, int64_t step) override {
    py::gil_scoped_acquire gil;
    const bool host = device.type() == DeviceType::CPU;
    Backend& backend = backend_for(device);
    const size_t bytes = count * sizeof(float);
    auto view = [&](const float* p) {
      if (host) return py::array_t<float>({static_cast<py::ssize_t>(count)}, {sizeof(float)}, p, py::none());
      py::array_t<float> a(static_cast<py::ssize_t>(count));
      backend.copy_to_host(a.mutable_data(), p, bytes);
      return a;
    };
    py::array_t<float> v = view(values), g = view(gradient);
    py::list s;
    for (float* p : slots) s.append(view(p));
    call_override<py::object>(static_cast<const Optimizer*>(this), "update", "None", v, g, s, step);
    if (host) return;
    backend.copy_from_host(values, v.data(), bytes);
    for (size_t i = 0; i < slots.size(); ++i) backend.copy_from_host(slots[i], s[i].cast<py::array_t<float>>().data(), bytes);
  }
};

OptimizerDescriptor make_descriptor(float lr, float rescale, std::optional<float> clip_min, std::optional<float> clip_max,
                                    const std::string& reg, float reg_scale) {
  OptimizerDescriptor d;
  d.learning_rate = lr;
  d.gradient_rescale = rescale;
  d.apply_gradient_clipping = clip_min.has_value() || clip_max.has_value();
  d.gradient_clip_min = clip_min.value_or(-INFINITY);
  d.gradient_clip_max = clip_max.value_or(INFINITY);
  if (reg == "none") d.regularization = Regularization::None;
  else if (reg == "l1") d.regularization = Regularization::L1;
  else if (reg == "l2") d.regularization = Regularization::L2;
  else fail("[optimizer] regularization must be 'none', 'l1' or 'l2', got '", reg, "'");
  d.regularization_scale = reg_scale;
  d.validate();
  return d;
}

#define DESCRIPTOR_ARGS                                                                          \
  py::arg("gradient_rescale") = 1.f, py::arg("clip_min") = py::none(), py::arg("clip_max") = py::none(), \
      py::arg("regularization") = "none", py::arg("regularization_scale") = 0.f

}  // namespace

void init_optimizers(py::module_& m) {
  py::class_<Optimizer, PyOptimizer, std::shared_ptr<Optimizer>>(
      m, "Optimizer",
      "Base of optimizers. Subclass it and define slot_count() and update(values, gradient, slots, step), "
      "which changes values and slots in place (numpy arrays).")
      .def(py::init([](float lr, float rescale, std::optional<float> cmin, std::optional<float> cmax,
                       const std::string& reg, float reg_scale) {
             return std::make_shared<PyOptimizer>(make_descriptor(lr, rescale, cmin, cmax, reg, reg_scale));
           }),
           py::arg("learning_rate") = 1e-3f, DESCRIPTOR_ARGS)
      .def_property("learning_rate", [](const Optimizer& o) { return o.descriptor.learning_rate; },
                    [](Optimizer& o, float lr) {
                      OptimizerDescriptor d = o.descriptor;
                      d.learning_rate = lr;
                      d.validate();
                      o.descriptor.learning_rate = lr;
                    })
      .def_property_readonly("gradient_rescale", [](const Optimizer& o) { return o.descriptor.gradient_rescale; })
      .def_property_readonly("regularization_scale", [](const Optimizer& o) { return o.descriptor.regularization_scale; })
      .def("slot_count", &Optimizer::slot_count);

  py::class_<BuiltinOptimizer, Optimizer, std::shared_ptr<BuiltinOptimizer>>(
      m, "BuiltinOptimizer", "An optimizer whose update runs on the device inside the step: SGD, Adam, RMSProp.");
  m.def("SGD", [](float lr, float momentum, bool nesterov, float rescale, std::optional<float> cmin,
                  std::optional<float> cmax, const std::string& reg, float reg_scale) {
          return make_sgd(make_descriptor(lr, rescale, cmin, cmax, reg, reg_scale), momentum, nesterov);
        },
        py::arg("learning_rate") = 0.01f, py::arg("momentum") = 0.f, py::arg("nesterov") = false, DESCRIPTOR_ARGS,
        "SGD: v ← μ·v + g; w ← w − lr·(nesterov ? g + μ·v : v).");
  m.def("Adam", [](float lr, float beta1, float beta2, float epsilon, bool amsgrad, float rescale,
                   std::optional<float> cmin, std::optional<float> cmax, const std::string& reg, float reg_scale) {
          return make_adam(make_descriptor(lr, rescale, cmin, cmax, reg, reg_scale), beta1, beta2, epsilon, amsgrad);
        },
        py::arg("learning_rate") = 1e-3f, py::arg("beta1") = 0.9f, py::arg("beta2") = 0.999f,
        py::arg("epsilon") = 1e-8f, py::arg("amsgrad") = false, DESCRIPTOR_ARGS, "Adam with bias correction.");
  m.def("RMSProp", [](float lr, float decay, float epsilon, float rescale, std::optional<float> cmin,
                      std::optional<float> cmax, const std::string& reg, float reg_scale) {
          return make_rmsprop(make_descriptor(lr, rescale, cmin, cmax, reg, reg_scale), decay, epsilon);
        },
        py::arg("learning_rate") = 0.01f, py::arg("decay") = 0.9f, py::arg("epsilon") = 1e-8f, DESCRIPTOR_ARGS,
        "RMSProp: s ← ρ·s + (1−ρ)·g²; w ← w − lr·g/(√s + ε).");
}

}  // namespace nngraph::py_bind
