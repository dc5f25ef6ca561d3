// Padding and cropping: a thread per output value forward; the gradient gathers, a thread per
// input value, from the outputs whose source it is (no atomics). The formulas are
// backends/math.h's; registered here as the cuda kernels of ops/padding.h.
#include "backends/cuda/cuda_backend.h"
#include "backends/geometry.h"
#include "common.cuh"
#include "kernels.cuh"
#include "ops/padding.h"

namespace nngraph {
namespace cuda {
namespace {

struct Dims {
  int c, h, w;
};

template <class T, class I>
__global__ void pad_kernel(PadMode mode, PadGeometry g, float value, const T* x, Dims in, T* y, Dims out, I total) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const int j = static_cast<int>(i % out.w), r = static_cast<int>(i / out.w % out.h);
    const I plane = i / (I(out.w) * out.h);
    const int c = static_cast<int>(plane % out.c) - g.front;
    const int sy = math::pad_source(mode, r - g.top, in.h), sx = math::pad_source(mode, j - g.left, in.w);
    const bool outside = c < 0 || c >= in.c || sy < 0 || sx < 0;
    y[i] = outside ? st<T>(value) : x[((plane / out.c * in.c + c) * in.h + sy) * in.w + sx];
  }
}

template <class T, class I>
__global__ void pad_gradient_kernel(PadMode mode, PadGeometry g, const T* dy, Dims out, T* dx, Dims in, I total) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const int j = static_cast<int>(i % in.w), r = static_cast<int>(i / in.w % in.h);
    const I plane = i / (I(in.w) * in.h);
    const int c = static_cast<int>(plane % in.c) + g.front;
    float acc = 0.f;
    if (c >= 0 && c < out.c) {
      const T* gy = dy + (plane / in.c * out.c + c) * I(out.h) * out.w;
      const math::Preimage rows = math::pad_preimage(mode, r, in.h, g.top, out.h);
      const math::Preimage cols = math::pad_preimage(mode, j, in.w, g.left, out.w);
      for (int a = 0; a < rows.count; ++a)
        for (int oy = rows.lo[a]; oy <= rows.hi[a]; ++oy)
          for (int b = 0; b < cols.count; ++b)
            for (int ox = cols.lo[b]; ox <= cols.hi[b]; ++ox) acc += ld(gy[oy * out.w + ox]);
    }
    dx[i] = st<T>(acc);
  }
}

}  // namespace

template <class T>
void padding(cudaStream_t s, PadMode mode, const PadGeometry& g, float value, const T* x, int n,
             const ImageShape& in, T* y, const ImageShape& out) {
  const size_t total = static_cast<size_t>(n) * out.count();
  with_index_type(std::max(total, static_cast<size_t>(n) * in.count()), [&](auto i) {
    pad_kernel<<<blocks_for(total), kThreads, 0, s>>>(mode, g, value, x, Dims{in.c, in.h, in.w}, y,
                                                      Dims{out.c, out.h, out.w}, decltype(i)(total));
  });
  check_launch("padding");
}

#define INSTANTIATE(T)                                                                                            \
  template void padding(cudaStream_t, PadMode, const PadGeometry&, float, const T*, int, const ImageShape&, T*, \
                        const ImageShape&);
NNGRAPH_STORAGE_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace cuda

namespace {

void padding(Backend& backend, PadMode mode, const PadGeometry& g, float value, const Tensor& x, const Tensor& y) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::with_storage(x.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::padding(b.stream(), mode, g, value, x.data_as<const T>(), x.batch(), x.shape(), y.data_as<T>(), y.shape());
  });
}

void padding_gradient(Backend& backend, PadMode mode, const PadGeometry& g, const Tensor& dy, const Tensor& dx) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const ImageShape &os = dy.shape(), &is = dx.shape();
  const size_t total = dx.count();
  cuda::with_storage(dy.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda::with_index_type(std::max(total, dy.count()), [&](auto i) {
      cuda::pad_gradient_kernel<<<cuda::blocks_for(total), cuda::kThreads, 0, b.stream()>>>(
          mode, g, dy.data_as<const T>(), cuda::Dims{os.c, os.h, os.w}, dx.data_as<T>(), cuda::Dims{is.c, is.h, is.w},
          decltype(i)(total));
    });
  });
  cuda::check_launch("padding_gradient");
}

NNGRAPH_KERNEL(PaddingKernel, CUDA, padding);
NNGRAPH_KERNEL(PaddingGradientKernel, CUDA, padding_gradient);

}  // namespace
}  // namespace nngraph
