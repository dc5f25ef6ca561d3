#pragma once
// The kernel behind DeviceDataset: images gathered by index and moved on the way. Each image's
// move is a pure function of (seed, epoch, index), written once here for every backend.
#include "backends/geometry.h"
#include "backends/kernel.h"
#include "nngraph/dataset.h"

namespace nngraph {

// A batch's moves: drawn per image from the augmentation and epoch, or one fixed view.
struct Moves {
  Augmentation augmentation;
  uint64_t epoch = 0;
  bool fixed = false;
  ImageMove view;

  NNGRAPH_HD ImageMove of(uint64_t index) const {
    if (fixed) return view;
    const Augmentation& a = augmentation;
    const uint64_t r = math::mix64(math::dropout_key(a.seed, epoch) + index * 0x9e3779b97f4a7c15ull);
    ImageMove m;
    const uint32_t span = 2 * a.translate + 1;
    m.dy = static_cast<int>(static_cast<uint32_t>(r & 0xffffffu) % span) - a.translate;
    m.dx = static_cast<int>(static_cast<uint32_t>((r >> 24) & 0xffffffu) % span) - a.translate;
    if (a.flip == FlipMode::Random) m.flip = (r >> 63) != 0;
    // The image's own coin, the same every epoch, turned over in odd ones.
    if (a.flip == FlipMode::Alternating)
      m.flip = ((math::mix64(a.seed ^ (index * 0xd1b54a32d192ed03ull)) & 1u) ^ (epoch & 1u)) != 0;
    return m;
  }
};

// Where out(y, x) of an h×w image moved by m reads: (sy, sx), or sy < 0 where the padding is zeros.
struct MovedPixel {
  int sy, sx;
};
NNGRAPH_HD inline MovedPixel moved_source(const ImageMove& m, PadMode pad, int y, int x, int h, int w) {
  const int sy = math::pad_source(pad, y + m.dy, h), fx = math::pad_source(pad, x + m.dx, w);
  if (sy < 0 || fx < 0) return {-1, -1};
  return {sy, m.flip ? w - 1 - fx : fx};
}

// out[b] = source[indices[b]] moved by moves.of(indices[b]); any dtype (values are copied).
// `indices` (out.batch() of them) lie in the backend's memory.
struct GatherKernel
    : KernelOf<void(Backend&, const Tensor& source, const int32_t* indices, const Moves& moves, const Tensor& out)> {
  static constexpr const char* name = "gather";
};

}  // namespace nngraph
