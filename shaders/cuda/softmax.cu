// Softmax across channels: one thread per pixel of each image, channels hw apart.
#include "common.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

template <class T>
__global__ void softmax_kernel(bool log, const T* in, T* out, size_t pixels, int c, int hw) {
  NNGRAPH_GRID_LOOP(i, pixels) {
    const size_t base = (i / hw) * c * hw + i % hw;
    const T* x = in + base;
    T* y = out + base;
    float mx = -INFINITY, sum = 0.f;
    for (int ch = 0; ch < c; ++ch) mx = fmaxf(mx, ld(x[ch * hw]));
    for (int ch = 0; ch < c; ++ch) sum += expf(ld(x[ch * hw]) - mx);
    const float lse = mx + logf(sum), inv = 1.f / sum;
    for (int ch = 0; ch < c; ++ch) y[ch * hw] = st<T>(log ? ld(x[ch * hw]) - lse : expf(ld(x[ch * hw]) - mx) * inv);
  }
}

// softmax: dx = y·(dy − Σ dy·y);  log-softmax: dx = dy − exp(y)·Σ dy
template <class T>
__global__ void softmax_gradient_kernel(bool log, const T* yv, const T* dy, T* dx, size_t pixels, int c, int hw) {
  NNGRAPH_GRID_LOOP(i, pixels) {
    const size_t base = (i / hw) * c * hw + i % hw;
    float sum = 0.f;
    for (int ch = 0; ch < c; ++ch) sum += log ? ld(dy[base + ch * hw]) : ld(dy[base + ch * hw]) * ld(yv[base + ch * hw]);
    for (int ch = 0; ch < c; ++ch) {
      const size_t j = base + ch * hw;
      dx[j] = st<T>(log ? ld(dy[j]) - expf(ld(yv[j])) * sum : ld(yv[j]) * (ld(dy[j]) - sum));
    }
  }
}

}  // namespace

template <class T>
void softmax(cudaStream_t s, bool log, const T* in, T* out, int n, int c, int hw) {
  const size_t pixels = static_cast<size_t>(n) * hw;
  softmax_kernel<<<blocks_for(pixels), kThreads, 0, s>>>(log, in, out, pixels, c, hw);
  check_launch("softmax");
}

template <class T>
void softmax_gradient(cudaStream_t s, bool log, const T* y, const T* dy, T* dx, int n, int c, int hw) {
  const size_t pixels = static_cast<size_t>(n) * hw;
  softmax_gradient_kernel<<<blocks_for(pixels), kThreads, 0, s>>>(log, y, dy, dx, pixels, c, hw);
  check_launch("softmax_gradient");
}

#define INSTANTIATE(T)                                                     \
  template void softmax(cudaStream_t, bool, const T*, T*, int, int, int); \
  template void softmax_gradient(cudaStream_t, bool, const T*, const T*, T*, int, int, int);
NNGRAPH_STORAGE_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace nngraph::cuda
