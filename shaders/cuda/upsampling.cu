// Upsampling: a thread per output value forward; the gradient gathers, a thread per source
// value, from the outputs that read it (no atomics). The formulas are backends/math.h's;
// registered here as the cuda kernels of ops/upsampling.h.
#include "backends/cuda/cuda_backend.h"
#include "backends/geometry.h"
#include "common.cuh"
#include "kernels.cuh"
#include "ops/upsampling.h"

namespace nngraph {
namespace {

using cuda::blocks_for;
using cuda::kThreads;

using cuda::ld;
using cuda::st;

template <class T, class I>
__global__ void upsample_kernel(UpsamplingMode mode, bool align, const T* x, T* y, int h, int w, int oh, int ow,
                                I total) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const int j = static_cast<int>(i % ow), r = static_cast<int>(i / ow % oh);
    const T* in = x + i / (I(ow) * oh) * h * w;
    const math::Lerp ly = math::upsample_source(mode, align, r, h, oh);
    const math::Lerp lx = math::upsample_source(mode, align, j, w, ow);
    const T* r0 = in + ly.i0 * w;
    const T* r1 = in + ly.i1 * w;
    const float top = ld(r0[lx.i0]) + lx.w1 * (ld(r0[lx.i1]) - ld(r0[lx.i0]));
    const float bottom = ld(r1[lx.i0]) + lx.w1 * (ld(r1[lx.i1]) - ld(r1[lx.i0]));
    y[i] = st<T>(top + ly.w1 * (bottom - top));
  }
}

template <class T, class I>
__global__ void upsample_gradient_kernel(UpsamplingMode mode, bool align, const T* dy, T* dx, int h, int w, int oh,
                                         int ow, I total) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const int j = static_cast<int>(i % w), r = static_cast<int>(i / w % h);
    const T* g = dy + i / (I(w) * h) * oh * ow;
    int y0, y1, x0, x1;
    math::upsample_readers(mode, align, r, h, oh, &y0, &y1);
    math::upsample_readers(mode, align, j, w, ow, &x0, &x1);
    float acc = 0.f;
    for (int oy = y0; oy <= y1; ++oy) {
      const float wy = math::upsample_weight(math::upsample_source(mode, align, oy, h, oh), r);
      if (wy == 0.f) continue;
      float row = 0.f;
      for (int ox = x0; ox <= x1; ++ox)
        row += math::upsample_weight(math::upsample_source(mode, align, ox, w, ow), j) * ld(g[oy * ow + ox]);
      acc += wy * row;
    }
    dx[i] = st<T>(acc);
  }
}

void upsampling(Backend& backend, UpsamplingMode mode, bool align, const Tensor& x, const Tensor& y) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const ImageShape &is = x.shape(), &os = y.shape();
  const size_t total = y.count();
  cuda::with_storage(x.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::with_index_type(total, [&](auto i) {
      upsample_kernel<<<blocks_for(total), kThreads, 0, b.stream()>>>(mode, align, x.data_as<const T>(),
                                                                      y.data_as<T>(), is.h, is.w, os.h, os.w,
                                                                      decltype(i)(total));
    });
  });
  cuda::check_launch("upsampling");
}

void upsampling_gradient(Backend& backend, UpsamplingMode mode, bool align, const Tensor& dy, const Tensor& dx) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const ImageShape &os = dy.shape(), &is = dx.shape();
  const size_t total = dx.count();
  cuda::with_storage(dy.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::with_index_type(dy.count(), [&](auto i) {
      upsample_gradient_kernel<<<blocks_for(total), kThreads, 0, b.stream()>>>(mode, align, dy.data_as<const T>(),
                                                                               dx.data_as<T>(), is.h, is.w, os.h,
                                                                               os.w, decltype(i)(total));
    });
  });
  cuda::check_launch("upsampling_gradient");
}

NNGRAPH_KERNEL(UpsamplingKernel, CUDA, upsampling);
NNGRAPH_KERNEL(UpsamplingGradientKernel, CUDA, upsampling_gradient);

}  // namespace
}  // namespace nngraph
