// Pooling on cuda: our kernels (shaders/cuda/pool.cu).
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/pool.h"

namespace nngraph {
namespace {

// Values between an NHWC image's neighbouring pixels: c, or more for a view of some channels
// of a wider image (a concatenation's part).
int pixel_spacing(const Tensor& t) {
  return t && t.layout() == Layout::NHWC ? static_cast<int>(t.strides()[3]) : t.shape().c;
}

// The source's layout is the pass's: a result of one pixel per image is the same memory in either.
void pooling(Backend& backend, PoolingMode mode, const PoolGeometry& g, const Tensor& in, const Tensor& out,
             const Tensor& winners) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const auto& is = in.shape();
  cuda::with_storage(in.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::pooling(b.stream(), mode, g, in.dense_as<const T>(), out.view_as<T>(), in.batch(), is.c, is.h, is.w,
                  out.shape().h, out.shape().w, in.layout() == Layout::NHWC, pixel_spacing(out),
                  static_cast<uint8_t*>(winners.data()), winner_image(winners));
  });
}

void pooling_gradient(Backend& backend, PoolingMode mode, const PoolGeometry& g, const Tensor& x, const Tensor& dy,
                      const Tensor& winners, const Tensor& y, const Tensor& dx, const NeuronDescriptor& neuron) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const auto& is = x.shape();
  // Only the gradient from winners reads views of dy and y (PoolingGradientNode::reads_channel_view).
  const bool dense = dy.contiguous(dy.layout()) && (!y || y.contiguous(y.layout()));
  if (!winners && !dense) throw KernelRefusal("pooling's gradient reads views of dy only from max pooling's winners");
  cuda::with_storage(x.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::pooling_gradient(b.stream(), mode, g, winners ? nullptr : x.dense_as<const T>(), dy.view_as<const T>(),
                           static_cast<const uint8_t*>(winners.data()), winner_image(winners), y.view_as<const T>(),
                           dx.dense_as<T>(), x.batch(), is.c, is.h, is.w, dy.shape().h, dy.shape().w,
                           x.layout() == Layout::NHWC, pixel_spacing(dy), pixel_spacing(y), neuron);
  });
}

NNGRAPH_KERNEL(PoolingKernel, CUDA, pooling);
NNGRAPH_KERNEL(PoolingGradientKernel, CUDA, pooling_gradient);
NNGRAPH_CHANNELS_LAST(PoolingKernel, CUDA);
NNGRAPH_CHANNELS_LAST(PoolingGradientKernel, CUDA);

}  // namespace
}  // namespace nngraph
