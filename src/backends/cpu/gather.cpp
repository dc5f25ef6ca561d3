// DeviceDataset's gather on the cpu: a thread per run of (image, channel) planes; values are
// copied as bits, so every dtype takes the same loop.
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "ops/gather.h"

namespace nngraph {
namespace {

template <class Bits>
void gather_planes(ThreadPool& pool, const Tensor& source, const int32_t* indices, const Moves& moves,
                   const Tensor& out) {
  const ImageShape& s = source.shape();
  const size_t plane = static_cast<size_t>(s.h) * s.w;
  const auto* src = static_cast<const Bits*>(source.data());
  auto* dst = static_cast<Bits*>(out.data());
  const PadMode pad = moves.augmentation.pad;
  pool.parallel_for(static_cast<size_t>(out.batch()) * s.c, [&](size_t b, size_t e) {
    for (size_t p = b; p < e; ++p) {
      const size_t n = p / s.c, c = p % s.c, index = static_cast<size_t>(indices[n]);
      const Bits* in = src + (index * s.c + c) * plane;
      Bits* o = dst + p * plane;
      const ImageMove m = moves.of(index);
      if (!m.flip && m.dy == 0 && m.dx == 0) {
        std::memcpy(o, in, plane * sizeof(Bits));
        continue;
      }
      for (int y = 0; y < s.h; ++y)
        for (int x = 0; x < s.w; ++x) {
          const MovedPixel q = moved_source(m, pad, y, x, s.h, s.w);
          o[y * s.w + x] = q.sy < 0 ? Bits{0} : in[q.sy * s.w + q.sx];
        }
    }
  });
}

void gather(Backend& backend, const Tensor& source, const int32_t* indices, const Moves& moves, const Tensor& out) {
  if (dtype_size(source.dtype()) == 2)
    gather_planes<uint16_t>(pool_of(backend), source, indices, moves, out);
  else
    gather_planes<uint32_t>(pool_of(backend), source, indices, moves, out);
}

NNGRAPH_KERNEL(GatherKernel, CPU, gather);

}  // namespace
}  // namespace nngraph
