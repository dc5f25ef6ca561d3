#pragma once
// Shared pieces of the pybind11 layer: one init_<area>() per public header, and numpy
// marshalling (the only work Python-facing code does besides the training loop).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <functional>
#include <optional>
#include <string>

#include "nngraph/data_source.h"
#include "nngraph/device.h"
#include "nngraph/error.h"
#include "nngraph/image.h"
#include "nngraph/nodes.h"
#include "nngraph/optimizer.h"

namespace nngraph {
class Graph;
class Handle;
class LossNode;
}  // namespace nngraph

namespace nngraph::py_bind {
namespace py = pybind11;

void init_errors(py::module_& m);
void init_core(py::module_& m);
void init_image(py::module_& m);
void init_data_source(py::module_& m);
void init_nodes(py::module_& m);
void init_layers(py::module_& m);
void init_optimizers(py::module_& m);
void init_losses(py::module_& m);
void init_graph(py::module_& m);
void init_rnn(py::module_& m);
void init_dataset(py::module_& m);

Layout parse_layout(const std::string& layout);

// Images marshalled from numpy (or given as nngraph.Image) and sent to a device together: a
// run's sources and labels cost one transfer. add() checks an array (as image_from_array says)
// and notes how to write it, returning its index in upload()'s result.
class Uploads {
 public:
  size_t add(const py::handle& array, Layout layout, const std::string& what,
             const std::optional<ImageShape>& expected = {});
  // An image `fill` writes into host memory of desc.bytes().
  size_t add(const ImageDescriptor& desc, std::function<void(void*)> fill);
  const ImageDescriptor& descriptor(size_t i) const { return entries_.at(i).desc; }
  std::vector<Image> upload(const Device& device) const;

 private:
  struct Entry {
    ImageDescriptor desc;
    std::function<void(void*)> fill;
    Image given;  // an nngraph.Image, passed as it is
  };
  std::vector<Entry> entries_;
};

// Class indices (n·h·w of them, each below sh.c) as one-hot float32 labels of shape `sh`,
// written straight into the upload; errors start with `name`.
size_t one_hot(const py::array& indices, int n, const ImageShape& sh, const std::string& name, Uploads& uploads);

// A float16/float32 array of rank 4 (NCHW or NHWC) or 2 (N, C) copied into an Image on
// `device`, strided or not. Errors start with `what` and name `expected` when given.
Image image_from_array(const py::handle& array, Layout layout, const Device& device,
                       const std::string& what, const std::optional<ImageShape>& expected = {});
// An image as a new numpy array (a CPU image's array shares its buffer). `from`: the encode
// that made the image, whose finish alone the copy waits for.
py::array image_to_array(const Image& image, Layout layout, Handle* from = nullptr);

// Weights-like arrays: any float dtype; float64 is cast to float32, float16 kept.
py::array float_array(const py::handle& obj, const std::string& what);

Device to_device(const py::handle& device);
// An int n (→ (n, n)) or a pair (y, x); errors start with `what`.
std::pair<int, int> to_pair(const py::handle& v, const char* what);
// Float values of any float dtype as float32, contiguous (float16 converted exactly).
std::vector<float> to_floats(const py::array& a);
// A normalization's parameters: a data source, or a channel count for a new ArrayDataSource
// of a NormalizationDescriptor (with or without statistics) holding its defaults.
std::shared_ptr<DataSource> normalization_source(const py::object& parameters, bool statistics);
// A window node's padding: 'valid', 'same', 'full' or (top, bottom, left, right).
Padding to_padding(const py::handle& p);
// A source argument: an ImageNode, or a filter node standing for its result image.
ImageNodePtr to_image_node(const py::handle& obj, const std::string& what);
// Graphs handed to Python release the GIL while they finish and join their worker.
std::shared_ptr<Graph> python_owned(std::shared_ptr<Graph> graph);

// The name of a Python object's type, for messages.
std::string type_name(const py::handle& obj);

// Calls a Python subclass's override of `method` (which must exist) with the GIL held and
// casts its result to T; a wrong type raises naming the class, the method and `expected`.
template <class T, class Base, class... Args>
T call_override(const Base* self, const char* method, const char* expected, Args&&... args) {
  py::gil_scoped_acquire gil;
  py::function f = py::get_override(self, method);
  if (!f) {
    const py::object obj = py::cast(self, py::return_value_policy::reference);
    fail("[", type_name(obj), "] must define ", method, "()");
  }
  py::object r = f(std::forward<Args>(args)...);
  try {
    return r.template cast<T>();
  } catch (const py::cast_error&) {
  } catch (const py::reference_cast_error&) {  // None where a class value was wanted
  }
  fail("[", type_name(f.attr("__self__")), ".", method, "()] must return ", expected, ", got ", type_name(r));
}

// A C++ pointer to a Python object that keeps the object (and so a Python subclass's
// overrides) alive for as long as C++ holds it.
template <class T>
std::shared_ptr<T> hold_python(const py::object& obj, const char* what) {
  if (obj.is_none()) return nullptr;
  if (!py::isinstance<T>(obj))
    throw py::type_error(std::string("expected an nngraph.") + what + ", got " +
                         py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
  auto keeper = std::make_shared<py::object>(obj);
  return std::shared_ptr<T>(obj.cast<T*>(), [keeper](T*) mutable {
    py::gil_scoped_acquire gil;
    keeper.reset();
  });
}
inline std::shared_ptr<DataSource> hold_data_source(const py::object& obj) {
  if (obj.is_none()) throw py::value_error("[data source] is None");
  return hold_python<DataSource>(obj, "DataSource");
}

}  // namespace nngraph::py_bind
