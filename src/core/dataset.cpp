// DeviceDataset: the epoch's order drawn on the host, batches gathered on the device.
#include "nngraph/dataset.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "backends/backend.h"
#include "nngraph/error.h"
#include "ops/gather.h"

namespace nngraph {
namespace {

std::shared_ptr<Buffer> upload_indices(const Device& device, const std::vector<int32_t>& v) {
  return backend_for(device).upload(v.size() * sizeof(int32_t),
                                    [&](void* p) { std::copy(v.begin(), v.end(), static_cast<int32_t*>(p)); });
}

}  // namespace

DeviceDataset::DeviceDataset(Image images, Image labels, Augmentation augmentation)
    : images_(std::move(images)), labels_(std::move(labels)), augmentation_(augmentation) {
  if (images_.empty() || images_.batch() < 1) fail("[dataset] holds no images");
  if (labels_.empty() || labels_.batch() != images_.batch())
    fail("[dataset] ", images_.batch(), " images but ", labels_.empty() ? 0 : labels_.batch(), " labels");
  if (labels_.device() != images_.device())
    fail("[dataset] images on ", images_.device().str(), " but labels on ", labels_.device().str());
  const Augmentation& a = augmentation_;
  const ImageShape& s = images_.shape();
  if (a.translate < 0) fail("[dataset] translate must be >= 0, got ", a.translate);
  if (a.translate > 0 && a.pad != PadMode::Constant && a.translate >= std::min(s.h, s.w))
    fail("[dataset] a reflected translation must be smaller than the images (", s.h, "x", s.w, "), got ",
         a.translate);
  const ImageShape& l = labels_.shape();
  if (a.any() && l.h * l.w > 1)
    fail("[dataset] labels of ", l.str(), " per image would have to move with the images: augment only with "
         "labels of one value per class");
}

const std::vector<int32_t>& DeviceDataset::order(uint64_t epoch, bool shuffle) {
  if (order_.made && order_.epoch == epoch && order_.shuffle == shuffle) return order_.host;
  std::vector<int32_t> v(size());
  std::iota(v.begin(), v.end(), 0);
  if (shuffle) {  // Fisher-Yates from a stream keyed by (seed, epoch): the same order on any machine
    const uint64_t key = math::dropout_key(augmentation_.seed ^ 0x5851f42d4c957f2dull, epoch);
    for (size_t i = v.size(); i-- > 1;) {
      const uint64_t r = math::mix64(key + i * 0x9e3779b97f4a7c15ull);
      std::swap(v[i], v[r % (i + 1)]);
    }
  }
  auto device = upload_indices(images_.device(), v);  // before anything changes
  order_ = {epoch, shuffle, true, std::move(v), std::move(device)};
  return order_.host;
}

void DeviceDataset::check_range(int start, int count) const {
  if (count < 1 || start < 0 || start > size() - count)
    fail("[dataset] images [", start, ", ", start + static_cast<int64_t>(count), ") are not within its ", size());
}

std::pair<Image, Image> DeviceDataset::batch(uint64_t epoch, bool shuffle, int start, int count) {
  check_range(start, count);
  order(epoch, shuffle);
  Backend& b = backend_for(images_.device());
  const int32_t* at = static_cast<const int32_t*>(order_.device->data()) + start;
  Image x = Image::allocate({count, images_.shape(), images_.dtype()}, images_.device());
  Image y = Image::allocate({count, labels_.shape(), labels_.dtype()}, labels_.device());
  dispatch<GatherKernel>(b, images_, at, Moves{augmentation_, epoch, false, {}}, x);
  dispatch<GatherKernel>(b, labels_, at, Moves{{}, epoch, false, {}}, y);
  return {x, y};
}

Image DeviceDataset::view(int start, int count, ImageMove move) {
  check_range(start, count);
  const ImageShape& s = images_.shape();
  const int reach = std::max(std::abs(move.dy), std::abs(move.dx));
  if (augmentation_.pad != PadMode::Constant && reach >= std::min(s.h, s.w))
    fail("[dataset] a reflected shift must be smaller than the images (", s.h, "x", s.w, "), got ", reach);
  if (!identity_) {
    std::vector<int32_t> v(size());
    std::iota(v.begin(), v.end(), 0);
    identity_ = upload_indices(images_.device(), v);
  }
  Image x = Image::allocate({count, s, images_.dtype()}, images_.device());
  Moves moves{augmentation_, 0, true, move};
  dispatch<GatherKernel>(backend_for(images_.device()), images_,
                         static_cast<const int32_t*>(identity_->data()) + start, moves, x);
  return x;
}

}  // namespace nngraph
