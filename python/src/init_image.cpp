// numpy ⇄ Image and Matrix marshalling.
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "bindings.h"
#include "nngraph/error.h"
#include "nngraph/graph.h"
#include "nngraph/statistics.h"

namespace nngraph::py_bind {
namespace {

// Float values as the engine reads them: float32 or float16 in this machine's byte order.
// Other floats (float64, big-endian) are converted, once; anything else raises.
py::array native_floats(const py::array& a, const std::string& what) {
  const auto dt = a.dtype();
  if (dt.kind() != 'f')
    fail("[", what, "] expected a float array (float32, float16 or float64), got ", py::str(dt).cast<std::string>(),
         " (convert with .astype(numpy.float32))");
  const bool half = dt.itemsize() == 2;
  if ((half || dt.itemsize() == 4) && dt.attr("isnative").cast<bool>()) return a;
  return a.attr("astype")(half ? py::dtype("float16") : py::dtype::of<float>());
}

DType array_dtype(const py::array& a) { return a.dtype().itemsize() == 2 ? DType::Float16 : DType::Float32; }

std::string shape_str(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

std::string expected_str(Layout layout, const std::optional<ImageShape>& e) {
  const std::string c = e ? std::to_string(e->c) : "C", h = e ? std::to_string(e->h) : "H",
                    w = e ? std::to_string(e->w) : "W";
  return layout == Layout::NCHW ? "(N, " + c + ", " + h + ", " + w + ")"
                                : "(N, " + h + ", " + w + ", " + c + ")";
}

py::dtype numpy_dtype(DType t) {
  return t == DType::Float32 ? py::dtype::of<float>() : py::dtype("float16");
}

}  // namespace

Layout parse_layout(const std::string& layout) {
  if (layout == "NCHW") return Layout::NCHW;
  if (layout == "NHWC") return Layout::NHWC;
  fail("[layout] expected 'NCHW' or 'NHWC', got '", layout, "'");
}

size_t Uploads::add(const py::handle& obj, Layout layout, const std::string& what,
                    const std::optional<ImageShape>& expected) {
  if (py::isinstance<Image>(obj)) {
    const Image given = obj.cast<Image>();
    entries_.push_back({given.descriptor(), nullptr, given});
    return entries_.size() - 1;
  }
  if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj))  // a batch as nested lists
    return add(py::module_::import("numpy").attr("asarray")(obj, "float32"), layout, what, expected);
  if (!py::isinstance<py::array>(obj))
    fail("[", what, "] expected a numpy array or nngraph.Image, got ", type_name(obj));
  const py::array a = native_floats(py::reinterpret_borrow<py::array>(obj), what);
  const DType dtype = array_dtype(a);
  if (a.ndim() != 4 && a.ndim() != 2)
    fail("[", what, "] expected a 4-D array ", expected_str(layout, expected), " or 2-D (N, C), got shape ",
         shape_str(a));
  // (n, c, h, w) and their byte strides in the array
  std::array<py::ssize_t, 4> dims, strides;
  if (a.ndim() == 2) {
    dims = {a.shape(0), a.shape(1), 1, 1};
    strides = {a.strides(0), a.strides(1), 0, 0};
  } else {
    const int order[4] = {0, layout == Layout::NCHW ? 1 : 3, layout == Layout::NCHW ? 2 : 1,
                          layout == Layout::NCHW ? 3 : 2};
    for (int i = 0; i < 4; ++i) dims[i] = a.shape(order[i]), strides[i] = a.strides(order[i]);
  }
  if (dims[0] == 0) fail("[", what, "] empty batch: got shape ", shape_str(a));
  if (dims[1] == 0 || dims[2] == 0 || dims[3] == 0)
    fail("[", what, "] images must not be empty, got shape ", shape_str(a));
  const ImageShape shape{static_cast<int>(dims[1]), static_cast<int>(dims[2]), static_cast<int>(dims[3])};
  if (expected && *expected != shape)
    fail("[", what, "] expected images of shape ", expected_str(layout, expected), ", got ", shape_str(a));
  const ImageDescriptor desc{static_cast<int>(dims[0]), shape, dtype};
  const bool contiguous = (a.flags() & py::array::c_style) && layout == Layout::NCHW;
  // Packs NCHW straight into the device's staging memory (or the image on cpu).
  auto fill = [a, dims, strides, desc, contiguous](void* out) {
    const char* base = static_cast<const char*>(a.data());
    const size_t item = dtype_size(desc.dtype), row = static_cast<size_t>(dims[3]) * item;
    const size_t per_image = desc.bytes() / dims[0];
    auto pack = [&](char* dst, size_t first, size_t last) {
      if (contiguous) return static_cast<void>(std::memcpy(dst, base + first * per_image, (last - first) * per_image));
      for (auto n = static_cast<py::ssize_t>(first); n < static_cast<py::ssize_t>(last); ++n)
        for (py::ssize_t c = 0; c < dims[1]; ++c)
          for (py::ssize_t y = 0; y < dims[2]; ++y, dst += row) {
            const char* src = base + n * strides[0] + c * strides[1] + y * strides[2];
            if (strides[3] == static_cast<py::ssize_t>(item) || dims[3] == 1) {
              std::memcpy(dst, src, row);
            } else {
              for (py::ssize_t x = 0; x < dims[3]; ++x) std::memcpy(dst + x * item, src + x * strides[3], item);
            }
          }
    };
    // One core copies about 10 GB/s: a large batch packs on several, a range of images each.
    constexpr size_t kPerThread = size_t{192} << 10;
    char* dst = static_cast<char*>(out);
    const size_t ranges = std::max<size_t>(1, desc.bytes() / kPerThread);
    cpu_backend().pool().parallel_for(dims[0], [&](size_t b, size_t e) { pack(dst + b * per_image, b, e); }, ranges);
  };
  entries_.push_back({desc, std::move(fill), Image()});
  return entries_.size() - 1;
}

size_t Uploads::add(const ImageDescriptor& desc, std::function<void(void*)> fill) {
  entries_.push_back({desc, std::move(fill), Image()});
  return entries_.size() - 1;
}

std::vector<Image> Uploads::upload(const Device& device) const {
  std::vector<ImageDescriptor> descs;
  std::vector<size_t> made;  // the entries uploaded, in descs' order
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].given.empty()) descs.push_back(entries_[i].desc), made.push_back(i);
  std::vector<Image> uploaded;
  if (!descs.empty())
    uploaded = Image::from_host(descs, device, [&](size_t k, void* host) { entries_[made[k]].fill(host); });
  std::vector<Image> out;
  for (size_t i = 0, k = 0; i < entries_.size(); ++i)
    out.push_back(entries_[i].given.empty() ? uploaded[k++] : entries_[i].given);
  return out;
}

// Written straight into the device's staging memory (or the labels image on cpu).
size_t one_hot(const py::array& indices, int n, const ImageShape& sh, const std::string& name, Uploads& uploads) {
  const auto a = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(indices);
  const int64_t* v = a.data();
  const size_t plane = static_cast<size_t>(sh.h) * sh.w, count = static_cast<size_t>(n) * plane;
  if (static_cast<size_t>(a.size()) != count)
    fail("[", name, "] ", a.size(), " class indices for ", n, " images of ", sh.h, "x", sh.w, " labels: expected ",
         count);
  for (size_t i = 0; i < count; ++i)
    if (v[i] < 0 || v[i] >= sh.c) fail("[", name, "] label ", v[i], " out of range for ", sh.c, " classes");
  return uploads.add({n, sh, DType::Float32}, [a, plane, count, c = sh.c](void* out) {
    const int64_t* v = a.data();
    float* f = static_cast<float*>(out);
    std::fill_n(f, count * c, 0.f);
    for (size_t i = 0; i < count; ++i) f[(i / plane * c + v[i]) * plane + i % plane] = 1.f;
  });
}

Image image_from_array(const py::handle& obj, Layout layout, const Device& device,
                       const std::string& what, const std::optional<ImageShape>& expected) {
  Uploads u;
  u.add(obj, layout, what, expected);
  return u.upload(device)[0];
}

py::array image_to_array(const Image& image, Layout layout, Handle* from) {
  // numpy has no bfloat16; the conversion is queued after every encode, so waits for them
  if (image.dtype() == DType::BFloat16) return image_to_array(image.converted(DType::Float32), layout);
  const auto& d = image.descriptor();
  std::vector<py::ssize_t> shape{d.n, d.shape.c, d.shape.h, d.shape.w};
  py::array out;
  if (image.device().type() == DeviceType::CPU) {
    // Zero copy: the array keeps the engine buffer alive.
    auto* keep = new std::shared_ptr<Buffer>(image.buffer());
    py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<Buffer>*>(p); });
    out = py::array(numpy_dtype(d.dtype), shape, {}, image.data(), owner);
  } else {
    out = py::array(numpy_dtype(d.dtype), shape);
    void* dst = out.mutable_data();
    py::gil_scoped_release release;
    if (from)
      from->download(image, dst);
    else
      image.copy_to_host(dst);
  }
  if (layout == Layout::NHWC) return out.attr("transpose")(0, 2, 3, 1);
  return out;
}

std::string type_name(const py::handle& obj) {
  return py::str(py::type::of(obj).attr("__name__")).cast<std::string>();
}

py::array float_array(const py::handle& obj, const std::string& what) {
  py::array a = py::array::ensure(obj);
  if (!a) fail("[", what, "] expected an array of floats, got ", type_name(obj));
  return py::array::ensure(native_floats(a, what), py::array::c_style);
}

std::vector<float> to_floats(const py::array& a) {
  const py::array dense = py::array::ensure(a, py::array::c_style);
  std::vector<float> out(dense.size());
  convert_host(dense.data(), dense.dtype().itemsize() == 2 ? DType::Float16 : DType::Float32, out.data(),
               DType::Float32, out.size());
  return out;
}

void init_image(py::module_& m) {
  py::class_<Image>(m, "Image",
                    "A batch of N images, C×H×W each, in one device buffer (stored NCHW).")
      .def(py::init([](const py::array& array, const std::string& layout, const py::object& device) {
             return image_from_array(array, parse_layout(layout), to_device(device), "image");
           }),
           py::arg("array"), py::arg("layout") = "NCHW", py::arg("device") = "cpu")
      .def("numpy", [](const Image& i, const std::string& layout) { return image_to_array(i, parse_layout(layout)); },
           py::arg("layout") = "NCHW", "The images as a numpy array (a view on cpu).")
      .def("astype",
           [](const Image& i, const std::string& dtype) { return i.converted(dtype_named(dtype.c_str(), "image")); },
           py::arg("dtype"), "The images converted to float32, float16 or bfloat16 (a new image on the same device).")
      .def_property_readonly("shape", [](const Image& i) {
        return py::make_tuple(i.batch(), i.shape().c, i.shape().h, i.shape().w);
      })
      .def_property_readonly("dtype", [](const Image& i) { return std::string(dtype_name(i.dtype())); })
      .def_property_readonly("device", &Image::device)
      .def("__repr__", [](const Image& i) {
        return "Image(" + i.descriptor().str() + ", " + i.device().str() + ")";
      });

  py::class_<Matrix>(m, "Matrix", "rows × columns with a row stride in elements (MPSMatrix).")
      .def(py::init([](const py::array& array, const py::object& device) {
             const py::array values = native_floats(array, "matrix");
             const DType dt = array_dtype(values);
             if (array.ndim() != 2) fail("[matrix] expected a 2-D array (rows, columns), got ", shape_str(array));
             py::array dense = py::array::ensure(values, py::array::c_style);
             Matrix mat = Matrix::allocate(static_cast<int>(array.shape(0)), static_cast<int>(array.shape(1)), dt,
                                           to_device(device));
             mat.copy_from_host(dense.data());
             return mat;
           }),
           py::arg("array"), py::arg("device") = "cpu")
      .def("numpy", [](const Matrix& mat) {
        py::array out(numpy_dtype(mat.dtype()), std::vector<py::ssize_t>{mat.rows(), mat.columns()});
        mat.copy_to_host(out.mutable_data());
        return out;
      })
      .def_property_readonly("rows", &Matrix::rows)
      .def_property_readonly("columns", &Matrix::columns)
      .def_property_readonly("row_stride", &Matrix::row_stride)
      .def_property_readonly("dtype", [](const Matrix& mat) { return std::string(dtype_name(mat.dtype())); })
      .def_property_readonly("device", &Matrix::device);

  m.def("patch_moments", [](const py::object& images, std::pair<int, int> kernel, std::optional<int> count) {
    const Image image = py::isinstance<Image>(images)
                            ? images.cast<Image>()
                            : image_from_array(images.cast<py::array>(), Layout::NCHW, Device(DeviceType::CPU), "patch_moments");
    std::vector<double> sums;
    {
      py::gil_scoped_release release;
      sums = patch_moments(image, kernel.first, kernel.second, count.value_or(-1));
    }
    const auto d = static_cast<py::ssize_t>(image.shape().c) * kernel.first * kernel.second;
    py::array_t<double> out({d, d});
    std::copy(sums.begin(), sums.end(), out.mutable_data());
    return out;
  }, py::arg("images"), py::arg("kernel") = std::pair<int, int>{2, 2}, py::arg("count") = py::none(),
     "Σ p·pᵀ over every kh×kw patch p (stride 1, no padding) of the first `count` images (all by default), "
     "computed on their device (an Image; a numpy array (N, C, H, W) on the cpu): a (D, D) float64 array, "
     "D = C·kh·kw, p's values in (channel, row, column) order as a convolution's weights read them.");
}

}  // namespace nngraph::py_bind
