// Errors, devices and descriptors.
#include <map>

#include "backends/backend.h"
#include "backends/kernel.h"
#include "bindings.h"
#include "nngraph/descriptors.h"
#include "nngraph/parameters.h"
#include "nngraph/error.h"

namespace nngraph::py_bind {
namespace {

PyObject* new_error(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  PyObject* type = PyErr_NewExceptionWithDoc((std::string("nngraph.") + name).c_str(), doc, bases, nullptr);
  if (!type) throw py::error_already_set();
  m.add_object(name, py::handle(type));
  return type;
}


// Python exception types, created once at import (the translator takes no captures).
struct ErrorTypes {
  PyObject *error, *invalid, *device, *oom, *unsupported;
};
ErrorTypes& error_types() {
  static ErrorTypes types{};
  return types;
}

}  // namespace

void init_errors(py::module_& m) {
  PyObject* error = new_error(m, "Error", PyExc_Exception, "Base of every nngraph error.");
  auto bases = [&](PyObject* other) { return py::make_tuple(py::handle(error), py::handle(other)).release().ptr(); };
  PyObject* invalid = new_error(m, "InvalidInputError", bases(PyExc_ValueError),
                                "Bad argument, shape, dtype or label.");
  PyObject* device = new_error(m, "DeviceError", bases(PyExc_RuntimeError),
                               "Execution or device failure.");
  PyObject* oom = new_error(m, "OutOfMemoryError",
                            py::make_tuple(py::handle(device), py::handle(PyExc_MemoryError)).release().ptr(),
                            "Device memory exhausted; the graph stays usable.");
  PyObject* unsupported = new_error(m, "UnsupportedError", bases(PyExc_NotImplementedError),
                                    "A feature or kernel this build or backend lacks.");
  error_types() = ErrorTypes{error, invalid, device, oom, unsupported};
  py::register_exception_translator([](std::exception_ptr p) {
    const ErrorTypes& t = error_types();
    try {
      if (p) std::rethrow_exception(p);
    } catch (const OutOfMemory& e) {
      PyErr_SetString(t.oom, e.what());
    } catch (const DeviceError& e) {
      PyErr_SetString(t.device, e.what());
    } catch (const InvalidInput& e) {
      PyErr_SetString(t.invalid, e.what());
    } catch (const Unsupported& e) {
      PyErr_SetString(t.unsupported, e.what());
    } catch (const Error& e) {
      PyErr_SetString(t.error, e.what());
    }
  });
}

void init_core(py::module_& m) {
  m.def("built_backends", &built_backends, "Backends compiled into this build.");
  m.def("memory_stats", [](const py::object& device) {
          auto s = backend_for(to_device(device)).memory_stats();
          py::dict d;
          d["current_bytes"] = s.current;
          d["peak_bytes"] = s.peak;
          return d;
        }, py::arg("device") = "cpu",
        "Bytes nngraph holds on a device now and at most since reset_peak_memory (images, weights, arenas).");
  m.def("reset_peak_memory", [](const py::object& device) { backend_for(to_device(device)).reset_peak_memory(); },
        py::arg("device") = "cpu");
  m.def("kernels", [] {
        std::map<std::string, std::vector<std::string>> by_kernel;
        for (const auto& [name, type] : registered_kernels()) by_kernel[name].push_back(device_type_name(type));
        return by_kernel;
      },
      "The kernels of this build, each with the device types it runs on: {'pooling': ['cpu', 'cuda'], ...}.");
  m.def("device_count", [](const std::string& type) { return device_count(Device::parse(type).type()); },
        py::arg("type"), "Devices of a type usable now: 'cpu' 1, 'cuda' the GPUs present (0 if not built).");

  py::class_<Device>(m, "Device", "Where a graph runs: 'cpu', 'cuda', 'cuda:N' ('mps' reserved).")
      .def(py::init(&Device::parse), py::arg("spec") = "cpu")
      .def_property_readonly("type", [](const Device& d) { return device_type_name(d.type()); })
      .def_property_readonly("index", &Device::index)
      .def("__str__", &Device::str)
      .def("__repr__", [](const Device& d) { return "Device('" + d.str() + "')"; })
      .def("__eq__", [](const Device& a, const py::handle& b) {
        return py::isinstance<Device>(b) ? a == b.cast<Device>() : false;
      });

  py::class_<NeuronDescriptor>(m, "NeuronDescriptor",
                               "An activation and its parameters a, b, c (None: the type's default).")
      .def(py::init([](const std::string& type, std::optional<float> a, std::optional<float> b,
                       std::optional<float> c) { return NeuronDescriptor::make(NeuronDescriptor::parse(type), a, b, c); }),
           py::arg("type") = "none", py::arg("a") = py::none(), py::arg("b") = py::none(), py::arg("c") = py::none())
      .def_property_readonly("type", [](const NeuronDescriptor& n) { return std::string(n.name()); })
      .def_readonly("a", &NeuronDescriptor::a)
      .def_readonly("b", &NeuronDescriptor::b)
      .def_readonly("c", &NeuronDescriptor::c, "The third parameter: power's exponent, exponential's and logarithm's base.")
      .def("__repr__", [](const NeuronDescriptor& n) {
        return cat("NeuronDescriptor('", n.name(), "', a=", n.a, ", b=", n.b, ", c=", n.c, ")");
      });

  py::class_<TensorSpec>(m, "TensorSpec", "One tensor a layer kind reads from its data source.")
      .def_readonly("name", &TensorSpec::name, "The data source method that returns it.")
      .def_property_readonly("shape", [](const TensorSpec& t) { return py::tuple(py::cast(t.shape)); },
                             "As graphs hold it (convolution weights OIHW).")
      .def_readonly("optional", &TensorSpec::optional, "A source may return None for it.")
      .def_readonly("trained", &TensorSpec::trained, "Whether optimizers update it (running statistics are not).")
      .def_readonly("fill", &TensorSpec::fill, "Its value where an ArrayDataSource is not given one.")
      .def_readonly("non_negative", &TensorSpec::non_negative, "No value may be below zero (a variance).")
      .def("__repr__", [](const TensorSpec& t) {
        return cat("TensorSpec('", t.name, "', ", shape_text(t.shape), t.optional ? ", optional" : "",
                   t.trained ? "" : ", not trained", ")");
      });

  py::class_<ConvolutionDescriptor>(m, "ConvolutionDescriptor",
                                    "Kernel size, feature channels, stride, dilation, groups and a fused neuron; "
                                    "transposed for a ConvolutionTranspose's weights (input × output/groups × "
                                    "kh × kw, PyTorch's layout).")
      .def(py::init([](const py::object& kernel, int in, int out, const py::object& stride,
                       const py::object& dilation, int groups, const py::object& neuron, bool transposed) {
             ConvolutionDescriptor d;
             std::tie(d.kernel_height, d.kernel_width) = to_pair(kernel, "convolution descriptor");
             std::tie(d.stride_y, d.stride_x) = to_pair(stride, "convolution descriptor");
             std::tie(d.dilation_y, d.dilation_x) = to_pair(dilation, "convolution descriptor");
             d.input_feature_channels = in;
             d.output_feature_channels = out;
             d.groups = groups;
             d.transposed = transposed;
             if (py::isinstance<py::str>(neuron))
               d.neuron = NeuronDescriptor::make(NeuronDescriptor::parse(neuron.cast<std::string>()));
             else if (!neuron.is_none())
               d.neuron = neuron.cast<NeuronDescriptor>();
             d.validate("convolution descriptor");
             return d;
           }),
           py::arg("kernel"), py::arg("input_channels"), py::arg("output_channels"),
           py::arg("stride") = 1, py::arg("dilation") = 1, py::arg("groups") = 1,
           py::arg("neuron") = py::none(), py::arg("transposed") = false)
      .def_readonly("kernel_height", &ConvolutionDescriptor::kernel_height)
      .def_readonly("kernel_width", &ConvolutionDescriptor::kernel_width)
      .def_readonly("input_feature_channels", &ConvolutionDescriptor::input_feature_channels)
      .def_readonly("output_feature_channels", &ConvolutionDescriptor::output_feature_channels)
      .def_readonly("stride_y", &ConvolutionDescriptor::stride_y)
      .def_readonly("stride_x", &ConvolutionDescriptor::stride_x)
      .def_readonly("dilation_y", &ConvolutionDescriptor::dilation_y)
      .def_readonly("dilation_x", &ConvolutionDescriptor::dilation_x)
      .def_readonly("groups", &ConvolutionDescriptor::groups)
      .def_readonly("neuron", &ConvolutionDescriptor::neuron)
      .def_readonly("transposed", &ConvolutionDescriptor::transposed,
                    "Weights of a ConvolutionTranspose: input × output/groups × kh × kw.")
      .def_property_readonly("weights_shape",
                             [](const ConvolutionDescriptor& d) { return py::tuple(py::cast(tensor_specs(d)[0].shape)); })
      .def("__repr__", [](const ConvolutionDescriptor& d) {
        return cat("ConvolutionDescriptor(kernel=(", d.kernel_height, ", ", d.kernel_width,
                   "), input_channels=", d.input_feature_channels, ", output_channels=",
                   d.output_feature_channels, ", stride=(", d.stride_y, ", ", d.stride_x,
                   "), dilation=(", d.dilation_y, ", ", d.dilation_x, "), groups=", d.groups,
                   ", neuron='", d.neuron.name(), "'", d.transposed ? ", transposed=True" : "", ")");
      })
      .def_property_readonly("tensors", [](const ConvolutionDescriptor& d) { return tensor_specs(d); },
                             "What its data source supplies: weights, then biases (optional).");

  py::class_<MatrixDescriptor>(m, "MatrixDescriptor",
                               "A rows × columns weight matrix with optional biases (rows), as recurrent "
                               "layers' gates read; diagonal=True holds only the diagonal (LSTM peepholes).")
      .def(py::init([](int rows, int columns, bool diagonal) {
             MatrixDescriptor d{rows, columns, diagonal};
             d.validate("matrix descriptor");
             return d;
           }),
           py::arg("rows"), py::arg("columns"), py::arg("diagonal") = false)
      .def_readonly("rows", &MatrixDescriptor::rows, "Outputs: one row per output channel.")
      .def_readonly("columns", &MatrixDescriptor::columns, "Inputs: one column per input channel.")
      .def_readonly("diagonal", &MatrixDescriptor::diagonal, "Holds only the diagonal (rows values).")
      .def_property_readonly("tensors", [](const MatrixDescriptor& d) { return tensor_specs(d); },
                             "What its data source supplies: weights, then biases (optional).")
      .def("__eq__", [](const MatrixDescriptor& a, const MatrixDescriptor& b) { return a == b; })
      .def("__repr__", [](const MatrixDescriptor& d) {
        return cat("MatrixDescriptor(rows=", d.rows, ", columns=", d.columns, d.diagonal ? ", diagonal=True" : "", ")");
      });

  py::class_<NormalizationDescriptor>(m, "NormalizationDescriptor",
                                      "Per-channel gamma and beta (trained) and, with statistics, mean and "
                                      "variance (running statistics, batch normalization's); statistics=False "
                                      "for group, instance and layer normalization.")
      .def(py::init([](int channels, bool statistics) {
             NormalizationDescriptor d{channels, statistics};
             d.validate("normalization descriptor");
             return d;
           }),
           py::arg("feature_channels"), py::arg("statistics") = true)
      .def_readonly("feature_channels", &NormalizationDescriptor::feature_channels,
                    "Channels normalized: each tensor holds one value per channel.")
      .def_readonly("statistics", &NormalizationDescriptor::statistics,
                    "Whether it holds running mean and variance.")
      .def_property_readonly("tensors", [](const NormalizationDescriptor& d) { return tensor_specs(d); },
                             "What its data source supplies: gamma, beta[, mean, variance].")
      .def("__repr__", [](const NormalizationDescriptor& d) {
        return cat("NormalizationDescriptor(feature_channels=", d.feature_channels,
                   d.statistics ? "" : ", statistics=False", ")");
      });
  m.attr("BatchNormalizationDescriptor") = m.attr("NormalizationDescriptor");  // MPS's name for the same kind
}

std::pair<int, int> to_pair(const py::handle& v, const char* what) {
  if (py::isinstance<py::int_>(v)) return {v.cast<int>(), v.cast<int>()};
  auto t = v.cast<std::vector<int>>();
  if (t.size() != 2) fail("[", what, "] expected an int or a pair (y, x)");
  return {t[0], t[1]};
}

Device to_device(const py::handle& device) {
  if (py::isinstance<Device>(device)) return device.cast<Device>();
  if (py::isinstance<py::str>(device)) return Device::parse(device.cast<std::string>());
  fail("[device] expected a Device or a string such as 'cpu' or 'cuda:0'");
}

}  // namespace nngraph::py_bind
