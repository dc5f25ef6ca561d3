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

// The built-in optimizers' own options, after the descriptor's.
struct BuiltinOptions {
  float weight_decay;
  int lookahead_steps;
  float lookahead_alpha, ema_decay;
};
#define BUILTIN_ARGS                                                                                   \
  py::arg("weight_decay") = 0.f, py::arg("lookahead_steps") = 0, py::arg("lookahead_alpha") = 0.5f, \
      py::arg("ema_decay") = 0.f

OptimizerDescriptor with_builtin(OptimizerDescriptor d, BuiltinOptions o) {
  d.weight_decay = o.weight_decay;
  d.lookahead_steps = o.lookahead_steps;
  d.lookahead_alpha = o.lookahead_alpha;
  d.ema_decay = o.ema_decay;
  d.validate();
  return d;
}

// A descriptor field that may change between steps, checked before it does.
template <class T>
void set_checked(Optimizer& o, T OptimizerDescriptor::*field, T value) {
  OptimizerDescriptor d = o.descriptor;
  d.*field = value;
  d.validate();
  o.descriptor.*field = value;
}

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
                    [](Optimizer& o, float lr) { set_checked(o, &OptimizerDescriptor::learning_rate, lr); })
      .def_property_readonly("gradient_rescale", [](const Optimizer& o) { return o.descriptor.gradient_rescale; })
      .def_property_readonly("regularization_scale", [](const Optimizer& o) { return o.descriptor.regularization_scale; })
      .def("slot_count", &Optimizer::slot_count);

  py::class_<BuiltinOptimizer, Optimizer, std::shared_ptr<BuiltinOptimizer>>(
      m, "BuiltinOptimizer",
      "An optimizer whose update runs on the device inside the step: SGD, Adam, RMSProp. Each also takes "
      "weight_decay (decoupled, as AdamW and SGDW: w ← w·(1 − lr·weight_decay) before the rule) and lookahead "
      "(Zhang et al. 2019): every lookahead_steps-th update moves the slow weights lookahead_alpha of the way "
      "to the fast ones and restarts the fast ones from there (one more state vector per tensor); and with "
      "ema_decay > 0 an exponential moving average of the weights, a ← ema_decay·a + (1 − ema_decay)·w after "
      "each update, starting from the weights (one more state vector per tensor; evaluate with it inside "
      "nngraph.averaged_weights).")
      .def_property("weight_decay", [](const Optimizer& o) { return o.descriptor.weight_decay; },
                    [](Optimizer& o, float v) { set_checked(o, &OptimizerDescriptor::weight_decay, v); },
                    "Decoupled weight decay; may change between steps, as learning_rate.")
      .def_property("lookahead_alpha", [](const Optimizer& o) { return o.descriptor.lookahead_alpha; },
                    [](Optimizer& o, float v) { set_checked(o, &OptimizerDescriptor::lookahead_alpha, v); },
                    "How far each lookahead sync moves the slow weights toward the fast ones, in [0, 1]; may "
                    "change between steps.")
      .def_property_readonly("lookahead_steps", [](const Optimizer& o) { return o.descriptor.lookahead_steps; },
                             "Updates between lookahead syncs (0: none); fixed, as it adds a state vector.")
      .def_property("ema_decay", [](const Optimizer& o) { return o.descriptor.ema_decay; },
                    [](Optimizer& o, float v) {
                      if ((v > 0.f) != (o.descriptor.ema_decay > 0.f))
                        fail("[optimizer] ema_decay cannot turn the average on or off (it adds a state vector); "
                             "make a new optimizer");
                      set_checked(o, &OptimizerDescriptor::ema_decay, v);
                    },
                    "Decay of the weights' exponential moving average, in [0, 1) (0: none); may change between "
                    "steps (a warm-up) but not to or from 0.");
  m.def("SGD", [](float lr, float momentum, bool nesterov, float rescale, std::optional<float> cmin,
                  std::optional<float> cmax, const std::string& reg, float reg_scale, float wd, int la_steps,
                  float la_alpha, float ema) {
          return make_sgd(with_builtin(make_descriptor(lr, rescale, cmin, cmax, reg, reg_scale), {wd, la_steps, la_alpha, ema}),
                          momentum, nesterov);
        },
        py::arg("learning_rate") = 0.01f, py::arg("momentum") = 0.f, py::arg("nesterov") = false, DESCRIPTOR_ARGS,
        BUILTIN_ARGS, "SGD: v ← μ·v + g; w ← w − lr·(nesterov ? g + μ·v : v).");
  m.def("Adam", [](float lr, float beta1, float beta2, float epsilon, bool amsgrad, float rescale,
                   std::optional<float> cmin, std::optional<float> cmax, const std::string& reg, float reg_scale,
                   float wd, int la_steps, float la_alpha, float ema) {
          return make_adam(with_builtin(make_descriptor(lr, rescale, cmin, cmax, reg, reg_scale), {wd, la_steps, la_alpha, ema}),
                           beta1, beta2, epsilon, amsgrad);
        },
        py::arg("learning_rate") = 1e-3f, py::arg("beta1") = 0.9f, py::arg("beta2") = 0.999f,
        py::arg("epsilon") = 1e-8f, py::arg("amsgrad") = false, DESCRIPTOR_ARGS, BUILTIN_ARGS,
        "Adam with bias correction (with weight_decay, AdamW).");
  m.def("RMSProp", [](float lr, float decay, float epsilon, float rescale, std::optional<float> cmin,
                      std::optional<float> cmax, const std::string& reg, float reg_scale, float wd, int la_steps,
                      float la_alpha, float ema) {
          return make_rmsprop(with_builtin(make_descriptor(lr, rescale, cmin, cmax, reg, reg_scale), {wd, la_steps, la_alpha, ema}),
                              decay, epsilon);
        },
        py::arg("learning_rate") = 0.01f, py::arg("decay") = 0.9f, py::arg("epsilon") = 1e-8f, DESCRIPTOR_ARGS,
        BUILTIN_ARGS, "RMSProp: s ← ρ·s + (1−ρ)·g²; w ← w − lr·g/(√s + ε).");
}

}  // namespace nngraph::py_bind
