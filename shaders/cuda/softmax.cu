// Softmax across channels: one thread per pixel of each image, channels hw apart.
#include "common.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

__global__ void softmax_kernel(bool log, const float* in, float* out, size_t pixels, int c, int hw) {
  NNGRAPH_GRID_LOOP(i, pixels) {
    const size_t base = (i / hw) * c * hw + i % hw;
    const float* x = in + base;
    float* y = out + base;
    float mx = -INFINITY, sum = 0.f;
    for (int ch = 0; ch < c; ++ch) mx = fmaxf(mx, x[ch * hw]);
    for (int ch = 0; ch < c; ++ch) sum += expf(x[ch * hw] - mx);
    const float lse = mx + logf(sum), inv = 1.f / sum;
    for (int ch = 0; ch < c; ++ch) y[ch * hw] = log ? x[ch * hw] - lse : expf(x[ch * hw] - mx) * inv;
  }
}

// softmax: dx = y·(dy − Σ dy·y);  log-softmax: dx = dy − exp(y)·Σ dy
__global__ void softmax_gradient_kernel(bool log, const float* yv, const float* dy, float* dx, size_t pixels, int c,
                                        int hw) {
  NNGRAPH_GRID_LOOP(i, pixels) {
    const size_t base = (i / hw) * c * hw + i % hw;
    float sum = 0.f;
    for (int ch = 0; ch < c; ++ch) sum += log ? dy[base + ch * hw] : dy[base + ch * hw] * yv[base + ch * hw];
    for (int ch = 0; ch < c; ++ch) {
      const size_t j = base + ch * hw;
      dx[j] = log ? dy[j] - expf(yv[j]) * sum : yv[j] * (dy[j] - sum);
    }
  }
}

}  // namespace

void softmax(cudaStream_t s, bool log, const float* in, float* out, int n, int c, int hw) {
  const size_t pixels = static_cast<size_t>(n) * hw;
  softmax_kernel<<<blocks_for(pixels), kThreads, 0, s>>>(log, in, out, pixels, c, hw);
  check_launch("softmax");
}

void softmax_gradient(cudaStream_t s, bool log, const float* y, const float* dy, float* dx, int n, int c, int hw) {
  const size_t pixels = static_cast<size_t>(n) * hw;
  softmax_gradient_kernel<<<blocks_for(pixels), kThreads, 0, s>>>(log, y, dy, dx, pixels, c, hw);
  check_launch("softmax_gradient");
}

}  // namespace nngraph::cuda
