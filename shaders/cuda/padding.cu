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

template <class I>
__global__ void pad_kernel(PadMode mode, PadGeometry g, float value, const float* x, Dims in, float* y, Dims out,
                           I total) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const int j = static_cast<int>(i % out.w), r = static_cast<int>(i / out.w % out.h);
    const I plane = i / (I(out.w) * out.h);
    const int c = static_cast<int>(plane % out.c) - g.front;
    const int sy = math::pad_source(mode, r - g.top, in.h), sx = math::pad_source(mode, j - g.left, in.w);
    y[i] = c < 0 || c >= in.c || sy < 0 || sx < 0 ? value : x[((plane / out.c * in.c + c) * in.h + sy) * in.w + sx];
  }
}

template <class I>
__global__ void pad_gradient_kernel(PadMode mode, PadGeometry g, const float* dy, Dims out, float* dx, Dims in,
                                    I total) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const int j = static_cast<int>(i % in.w), r = static_cast<int>(i / in.w % in.h);
    const I plane = i / (I(in.w) * in.h);
    const int c = static_cast<int>(plane % in.c) + g.front;
    float acc = 0.f;
    if (c >= 0 && c < out.c) {
      const float* gy = dy + (plane / in.c * out.c + c) * I(out.h) * out.w;
      const math::Preimage rows = math::pad_preimage(mode, r, in.h, g.top, out.h);
      const math::Preimage cols = math::pad_preimage(mode, j, in.w, g.left, out.w);
      for (int a = 0; a < rows.count; ++a)
        for (int oy = rows.lo[a]; oy <= rows.hi[a]; ++oy)
          for (int b = 0; b < cols.count; ++b)
            for (int ox = cols.lo[b]; ox <= cols.hi[b]; ++ox) acc += gy[oy * out.w + ox];
    }
    dx[i] = acc;
  }
}

}  // namespace

void padding(cudaStream_t s, PadMode mode, const PadGeometry& g, float value, const float* x, int n,
             const ImageShape& in, float* y, const ImageShape& out) {
  const size_t total = static_cast<size_t>(n) * out.count();
  with_index_type(std::max(total, static_cast<size_t>(n) * in.count()), [&](auto i) {
    pad_kernel<<<blocks_for(total), kThreads, 0, s>>>(mode, g, value, x, Dims{in.c, in.h, in.w}, y,
                                                      Dims{out.c, out.h, out.w}, decltype(i)(total));
  });
  check_launch("padding");
}

}  // namespace cuda

namespace {

void padding(Backend& backend, PadMode mode, const PadGeometry& g, float value, const Tensor& x, const Tensor& y) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::padding(b.stream(), mode, g, value, x.data_as<const float>(), x.batch(), x.shape(), y.data_as<float>(),
                y.shape());
}

void padding_gradient(Backend& backend, PadMode mode, const PadGeometry& g, const Tensor& dy, const Tensor& dx) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  const ImageShape &os = dy.shape(), &is = dx.shape();
  const size_t total = dx.count();
  cuda::with_index_type(std::max(total, dy.count()), [&](auto i) {
    cuda::pad_gradient_kernel<<<cuda::blocks_for(total), cuda::kThreads, 0, b.stream()>>>(
        mode, g, dy.data_as<const float>(), cuda::Dims{os.c, os.h, os.w}, dx.data_as<float>(),
        cuda::Dims{is.c, is.h, is.w}, decltype(i)(total));
  });
  cuda::check_launch("padding_gradient");
}

NNGRAPH_KERNEL(PaddingKernel, CUDA, padding);
NNGRAPH_KERNEL(PaddingGradientKernel, CUDA, padding_gradient);

}  // namespace
}  // namespace nngraph
