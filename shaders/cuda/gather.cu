// DeviceDataset's gather on cuda: a thread per output value, copied as bits (any dtype); each
// image's move comes from ops/gather.h, as on the cpu.
#include "backends/cuda/cuda_backend.h"
#include "common.cuh"
#include "ops/gather.h"

namespace nngraph {
namespace cuda {
namespace {

template <class Bits>
__global__ void gather_kernel(const Bits* source, const int32_t* indices, Moves moves, ImageShape s, Bits* out,
                              size_t total) {
  NNGRAPH_GRID_LOOP(i, total) {
    const int x = static_cast<int>(i % s.w), y = static_cast<int>(i / s.w % s.h);
    const size_t plane = i / (static_cast<size_t>(s.w) * s.h);
    const size_t index = static_cast<size_t>(indices[plane / s.c]);
    const MovedPixel q = moved_source(moves.of(index), moves.augmentation.pad, y, x, s.h, s.w);
    const size_t from = ((index * s.c + plane % s.c) * s.h + q.sy) * s.w + q.sx;
    out[i] = q.sy < 0 ? Bits{0} : source[from];
  }
}

}  // namespace
}  // namespace cuda

namespace {

void gather(Backend& backend, const Tensor& source, const int32_t* indices, const Moves& moves, const Tensor& out) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const size_t total = out.count();
  if (!total) return;
  auto launch = [&](auto bits) {
    using Bits = decltype(bits);
    cuda::gather_kernel<<<cuda::blocks_for(total), cuda::kThreads, 0, b.stream()>>>(
        static_cast<const Bits*>(source.data()), indices, moves, source.shape(), static_cast<Bits*>(out.data()), total);
  };
  if (dtype_size(source.dtype()) == 2)
    launch(uint16_t{});
  else
    launch(uint32_t{});
  cuda::check_launch("gather");
}

NNGRAPH_KERNEL(GatherKernel, CUDA, gather);

}  // namespace
}  // namespace nngraph
