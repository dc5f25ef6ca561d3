// DeviceDataset: a labelled dataset uploaded once, batches gathered and augmented on the device.
#include <algorithm>

#include "bindings.h"
#include "nngraph/dataset.h"

namespace nngraph::py_bind {
namespace {

// Class indices (N,) as one-hot rows of `classes` (None: the largest index + 1), or float
// targets as they are, on `device`.
Image labels_on(const py::object& labels, int n, const py::object& classes, const Device& device) {
  const py::array a = py::module_::import("numpy").attr("asarray")(labels);
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u') return image_from_array(a, Layout::NCHW, device, "dataset labels");
  if (a.ndim() != 1 || a.shape(0) != n)
    fail("[dataset] ", n, " images but ", a.ndim() == 1 ? a.shape(0) : a.size(), " class indices");
  const int count = classes.is_none() ? py::int_(a.attr("max")()).cast<int>() + 1 : classes.cast<int>();
  if (count < 1) fail("[dataset] classes must be >= 1, got ", count);
  Uploads rows;
  const size_t i = one_hot(a, n, {count, 1, 1}, "dataset labels", rows);
  return rows.upload(device)[i];
}

FlipMode flip_mode(const py::object& flip) {
  if (flip.is_none()) return FlipMode::None;
  const std::string f = flip.cast<std::string>();
  if (f == "random") return FlipMode::Random;
  if (f == "alternating") return FlipMode::Alternating;
  fail("[dataset] flip must be None, 'random' or 'alternating', got '", f, "'");
}

PadMode pad_named(const std::string& pad) {
  if (pad == "reflect") return PadMode::Reflect;
  if (pad == "zero") return PadMode::Constant;
  if (pad == "edge") return PadMode::Edge;
  fail("[dataset] pad must be 'reflect', 'zero' or 'edge', got '", pad, "'");
}

py::array ints(const std::vector<int32_t>& v) {
  py::array_t<int32_t> out(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

}  // namespace

void init_dataset(py::module_& m) {
  py::class_<DeviceDataset, std::shared_ptr<DeviceDataset>>(
      m, "DeviceDataset",
      "A labelled dataset uploaded once to a device; fit() and evaluate() take it in place of (images, labels). "
      "Each batch is gathered there in the epoch's shuffled order and augmented on the way: translate=t shifts "
      "each image by up to t pixels each way (a random crop of the image padded by t: pad='reflect', 'zero' or "
      "'edge'); flip='random' mirrors each image with probability 1/2, 'alternating' mirrors a random half in "
      "even epochs and the other half in odd ones. Every draw follows from (seed, epoch, image), the same on "
      "every backend. images: (N, C, H, W) (or (N, H, W, C) with layout='NHWC') or (N, C); labels: class "
      "indices (N,) (one-hot over `classes`, default the largest + 1) or float targets. dtype converts the "
      "images on the device ('float32', 'float16', 'bfloat16'; None keeps float16 or float32 as given).")
      .def(py::init([](const py::object& images, const py::object& labels, const py::object& device,
                       const py::object& classes, const std::string& layout, const py::object& dtype, int translate,
                       const std::string& pad, const py::object& flip, uint64_t seed) {
             const Device d = to_device(device);
             Image x = image_from_array(images, parse_layout(layout), d, "dataset");
             if (!dtype.is_none()) {
               const DType t = dtype_named(dtype.cast<std::string>().c_str(), "dataset");
               if (t != x.dtype()) x = x.converted(t);
             }
             Image y = labels_on(labels, x.batch(), classes, d);
             return std::make_shared<DeviceDataset>(x, y, Augmentation{translate, pad_named(pad), flip_mode(flip), seed});
           }),
           py::arg("images"), py::arg("labels"), py::arg("device") = "cpu", py::kw_only(),
           py::arg("classes") = py::none(), py::arg("layout") = "NCHW", py::arg("dtype") = py::none(),
           py::arg("translate") = 0, py::arg("pad") = "reflect", py::arg("flip") = py::none(), py::arg("seed") = 0)
      .def("__len__", &DeviceDataset::size, "The number of images.")
      .def_property_readonly("shape", [](const DeviceDataset& ds) {
        const ImageShape& s = ds.images().shape();
        return py::make_tuple(s.c, s.h, s.w);
      }, "(C, H, W) of each image.")
      .def_property_readonly("device", [](const DeviceDataset& ds) { return ds.images().device(); },
                             "Where the images and labels lie.")
      .def_property_readonly("dtype", [](const DeviceDataset& ds) { return std::string(dtype_name(ds.images().dtype())); },
                             "The images' dtype on the device: float32, float16 or bfloat16.")
      .def_property_readonly("images", &DeviceDataset::images, "Every image, as uploaded (an Image).")
      .def_property_readonly("labels", [](const DeviceDataset& ds) {
        const py::array a = image_to_array(ds.labels(), Layout::NCHW);
        const ImageShape& s = ds.labels().shape();
        return s.h * s.w == 1 ? py::array(a.attr("reshape")(ds.size(), s.c)) : a;
      }, "The labels as a numpy array: one-hot or target rows (N, K), or (N, K, H, W).")
      .def("order", [](DeviceDataset& ds, uint64_t epoch, bool shuffle) { return ints(ds.order(epoch, shuffle)); },
           py::arg("epoch"), py::arg("shuffle") = true,
           "The images' order in that epoch (a permutation drawn from (seed, epoch), or 0..N-1 unshuffled).")
      .def("batch", [](DeviceDataset& ds, uint64_t epoch, int start, int count, bool shuffle) {
             py::gil_scoped_release release;
             return ds.batch(epoch, shuffle, start, count);
           },
           py::arg("epoch"), py::arg("start"), py::arg("count"), py::arg("shuffle") = true,
           "(images, labels) at positions [start, start + count) of the epoch's order, the images augmented as "
           "drawn for that epoch; both Images on the dataset's device.")
      .def("view", [](DeviceDataset& ds, int start, int count, bool flip, const py::object& shift) {
             const auto [dy, dx] = to_pair(shift, "dataset view shift");
             py::gil_scoped_release release;
             return ds.view(start, count, {flip, dy, dx});
           },
           py::arg("start"), py::arg("count"), py::kw_only(), py::arg("flip") = false, py::arg("shift") = 0,
           "Images [start, start + count) in the dataset's order, every one mirrored (flip) and then shifted: "
           "out(y, x) = in(y + dy, x + dx) for shift=(dy, dx), with the dataset's padding (test-time "
           "augmentation).")
      .def("__repr__", [](const DeviceDataset& ds) {
        return "DeviceDataset(" + ds.images().descriptor().str() + ", " + ds.images().device().str() + ")";
      });
}

}  // namespace nngraph::py_bind
