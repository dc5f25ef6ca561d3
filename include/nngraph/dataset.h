#pragma once
// A labelled dataset uploaded once to a device, whose batches are gathered and augmented there
// (shuffled order, random translation, horizontal flips), so no batch crosses the host.
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "nngraph/descriptors.h"
#include "nngraph/image.h"

namespace nngraph {

enum class FlipMode : uint8_t {
  None,
  Random,       // each image flipped with probability 1/2, drawn anew each epoch
  Alternating,  // a random half flipped in even epochs, the other half in odd ones
};

// How each training image is moved, drawn from (seed, epoch, the image's index): a shift of up
// to `translate` pixels each way (a random crop of the image padded by that much, `pad`
// saying what the shift brings in: reflection or zeros) and a horizontal flip.
struct Augmentation {
  int translate = 0;
  PadMode pad = PadMode::Reflect;
  FlipMode flip = FlipMode::None;
  uint64_t seed = 0;
  bool any() const { return translate > 0 || flip != FlipMode::None; }
};

// One image's move: out(c, y, x) = in(c, y + dy, x + dx) of the image flipped first (where
// `flip`), with what the augmentation's padding brings in beyond its edges.
struct ImageMove {
  bool flip = false;
  int dy = 0, dx = 0;
};

class DeviceDataset {
 public:
  // `images` N×C×H×W and `labels` N×K×h×w (one-hot rows or targets) on one device; throws
  // InvalidInput naming the dataset on mismatched counts or an augmentation the images
  // cannot take (a translation of at least the image's size; spatial labels moved).
  DeviceDataset(Image images, Image labels, Augmentation augmentation);
  int size() const { return images_.batch(); }
  const Image& images() const { return images_; }
  const Image& labels() const { return labels_; }
  const Augmentation& augmentation() const { return augmentation_; }
  // The positions of an epoch: a permutation drawn from (seed, epoch), or 0..N−1 unshuffled.
  // Drawn on the host, uploaded once per epoch (N int32).
  const std::vector<int32_t>& order(uint64_t epoch, bool shuffle);
  // Images and labels at positions [start, start + count) of that order, the images moved as
  // the augmentation draws for the epoch.
  std::pair<Image, Image> batch(uint64_t epoch, bool shuffle, int start, int count);
  // Images [start, start + count) in the dataset's order, all moved by `move` (test-time
  // augmentation), with the augmentation's padding.
  Image view(int start, int count, ImageMove move);

 private:
  void check_range(int start, int count) const;
  Image images_, labels_;
  Augmentation augmentation_;
  struct Order {
    uint64_t epoch = 0;
    bool shuffle = false, made = false;
    std::vector<int32_t> host;
    std::shared_ptr<Buffer> device;
  } order_;
  std::shared_ptr<Buffer> identity_;  // 0..N−1 on the device, for views
};

}  // namespace nngraph
