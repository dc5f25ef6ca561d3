// Losses, optimizers (subclassable from Python) and the training graph factory.
#include "backends/backend.h"
#include "bindings.h"
#include "nngraph/error.h"
#include "nngraph/graph.h"
#include "nngraph/loss.h"
#include "nngraph/optimizer.h"

namespace nngraph::py_bind {
namespace {

void backend_copy_to_host(const Device& d, void* dst, const void* src, size_t count) {
  backend_for(d).copy_to_host(dst, src, count * sizeof(float));
}
void backend_copy_from_host(const Device& d, void* dst, const void* src, size_t count) {
  backend_for(d).copy_from_host(dst, src, count * sizeof(float));
}

// Python optimizers update host arrays in place: zero-copy views on cpu, copies elsewhere.
class PyOptimizer : public Optimizer {
 public:
  using Optimizer::Optimizer;
  int slot_count() const override { PYBIND11_OVERRIDE_PURE(int, Optimizer, slot_count); }
  void apply(const Device& device, float* values, const float* gradient, const std::vector<float*>& slots,
             size_t count, int64_t step) override {
    py::gil_scoped_acquire gil;
    py::function f = py::get_override(static_cast<const Optimizer*>(this), "update");
    if (!f) fail("[optimizer] subclass must define update(values, gradient, slots, step)");
    const bool host = device.type() == DeviceType::CPU;
    auto view = [&](const float* p) {
      if (host) return py::array_t<float>({static_cast<py::ssize_t>(count)}, {sizeof(float)}, p, py::none());
      py::array_t<float> a(static_cast<py::ssize_t>(count));
      backend_copy_to_host(device, a.mutable_data(), p, count);
      return a;
    };
    py::array_t<float> v = view(values), g = view(gradient);
    py::list s;
    for (float* p : slots) s.append(view(p));
    f(v, g, s, step);
    if (host) return;
    backend_copy_from_host(device, values, v.data(), count);
    for (size_t i = 0; i < slots.size(); ++i)
      backend_copy_from_host(device, slots[i], s[i].cast<py::array_t<float>>().data(), count);
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

void init_training(py::module_& m) {
  py::class_<LossDescriptor>(m, "LossDescriptor",
                             "Loss type, reduction (none, sum, mean), weight, label_smoothing, delta (huber), epsilon.")
      .def(py::init([](const std::string& type, const std::string& reduction, float weight, float smoothing,
                       float delta, float epsilon) {
             LossDescriptor d;
             d.type = LossDescriptor::parse_type(type);
             d.reduction = LossDescriptor::parse_reduction(reduction);
             d.weight = weight;
             d.label_smoothing = smoothing;
             d.delta = delta;
             d.epsilon = epsilon;
             d.validate();
             return d;
           }),
           py::arg("type") = "softmax_cross_entropy", py::arg("reduction") = "mean", py::arg("weight") = 1.f,
           py::arg("label_smoothing") = 0.f, py::arg("delta") = 1.f, py::arg("epsilon") = 1e-7f)
      .def_property_readonly("type", [](const LossDescriptor& d) { return std::string(d.type_name()); })
      .def_property_readonly("reduction", [](const LossDescriptor& d) {
        return std::string(d.reduction == Reduction::None ? "none" : d.reduction == Reduction::Sum ? "sum" : "mean");
      })
      .def_readonly("weight", &LossDescriptor::weight)
      .def_readonly("label_smoothing", &LossDescriptor::label_smoothing)
      .def_readonly("delta", &LossDescriptor::delta)
      .def_readonly("epsilon", &LossDescriptor::epsilon);

  py::class_<LossNode, FilterNode, std::shared_ptr<LossNode>>(
      m, "Loss", "A loss over `source`; its labels enter at encode time. Its result image is d(loss)/d(source).")
      .def(py::init([](const py::object& src, const py::object& descriptor, std::string label) {
             LossDescriptor d = py::isinstance<py::str>(descriptor)
                                    ? py::module_::import("nngraph").attr("LossDescriptor")(descriptor).cast<LossDescriptor>()
                                    : descriptor.cast<LossDescriptor>();
             return LossNode::create(to_image_node(src, "loss"), d, std::move(label));
           }),
           py::arg("source"), py::arg("descriptor") = "softmax_cross_entropy", py::arg("label") = "")
      .def_property_readonly("descriptor", &LossNode::descriptor)
      .def("training_graph", &training_graph,
           py::arg("device") = "cpu", py::arg("optimizer") = py::none(), py::arg("max_in_flight") = 2,
           py::arg("check_numerics") = false,
           "Every gradient node at once, wired to the forward nodes; data sources update after each step.");

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
                      if (!(lr >= 0.f)) fail("[optimizer] learning_rate must be >= 0, got ", lr);
                      o.descriptor.learning_rate = lr;
                    })
      .def_property_readonly("gradient_rescale", [](const Optimizer& o) { return o.descriptor.gradient_rescale; })
      .def_property_readonly("regularization_scale", [](const Optimizer& o) { return o.descriptor.regularization_scale; })
      .def("slot_count", &Optimizer::slot_count);

  py::class_<BuiltinOptimizer, Optimizer, std::shared_ptr<BuiltinOptimizer>>(m, "BuiltinOptimizer");
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
