// Loss descriptors and loss nodes.
#include "bindings.h"
#include "ops/loss.h"

namespace nngraph::py_bind {

void init_losses(py::module_& m) {
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
             return LossNode::create(to_image_node(src, LossNode::kKind), d, std::move(label));
           }),
           py::arg("source"), py::arg("descriptor") = "softmax_cross_entropy", py::arg("label") = "")
      .def_property_readonly("descriptor", &LossNode::descriptor);

}

}  // namespace nngraph::py_bind
