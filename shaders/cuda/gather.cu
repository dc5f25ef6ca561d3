// DeviceDataset's gather on cuda: blocks of an image's values per grid row of images, each
// thread several values of one image, copied as bits (any dtype). The image's move (from
// ops/gather.h, as on the cpu) is drawn once per thread, and positions within an image are
// 32-bit: a 64-bit division and the move's hashes per value bound the copy otherwise.
#include <algorithm>

#include "backends/cuda/cuda_backend.h"
#include "common.cuh"
#include "ops/gather.h"

namespace nngraph {
namespace cuda {
namespace {

constexpr int kValuesPerThread = 4;

template <class Bits>
__global__ void gather_kernel(const Bits* source, const int32_t* indices, Moves moves, ImageShape s, Bits* out,
                              unsigned batch) {
  const unsigned plane = static_cast<unsigned>(s.h) * s.w, image = plane * s.c;
  for (unsigned b = blockIdx.y; b < batch; b += gridDim.y) {
    const size_t index = static_cast<size_t>(indices[b]);
    const ImageMove m = moves.of(index);
    const Bits* from = source + index * image;
    Bits* to = out + static_cast<size_t>(b) * image;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < image; i += gridDim.x * blockDim.x) {
      const unsigned c = i / plane, at = i - c * plane, y = at / s.w, x = at - y * s.w;
      const MovedPixel q = moved_source(m, moves.augmentation.pad, y, x, s.h, s.w);
      to[i] = q.sy < 0 ? Bits{0} : from[c * plane + q.sy * s.w + q.sx];
    }
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
  const size_t image = source.shape().count();
  if (!cuda::fits_32(image)) fail("[gather] images of ", image, " values are more than a gather takes");
  const unsigned per = cuda::kThreads * cuda::kValuesPerThread;
  const dim3 grid(static_cast<unsigned>((image + per - 1) / per), static_cast<unsigned>(std::min(out.batch(), 65535)));
  auto launch = [&](auto bits) {
    using Bits = decltype(bits);
    cuda::gather_kernel<<<grid, cuda::kThreads, 0, b.stream()>>>(static_cast<const Bits*>(source.data()), indices,
                                                                 moves, source.shape(), static_cast<Bits*>(out.data()),
                                                                 static_cast<unsigned>(out.batch()));
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
