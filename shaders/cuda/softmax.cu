// Softmax across channels. Pixels one value apart (channels-last rows, C×1×1 images) take a warp
// per pixel, its lanes reading the channels side by side; channels hw apart take blocks of 32
// pixels by 8 rows of threads (common.cuh's pixel tiles), each row a share of the channels. The
// maximum and the sum of exponentials come in one pass (a running sum rescaled as the maximum
// grows), so the input is read twice, where a thread per pixel read it three times.
#include "common.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

// (m, s): the largest value so far and Σ exp(v − m); −∞ and 0 before any value.
__device__ __forceinline__ void take(float& m, float& s, float v) {
  if (v > m) {
    s = s * expf(m - v) + 1.f;
    m = v;
  } else {
    s += v == -INFINITY ? 0.f : expf(v - m);  // a NaN carries on into the sum
  }
}

__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  const float top = fmaxf(m, m2);
  if (top == -INFINITY) return;
  s = (m == -INFINITY ? 0.f : s * expf(m - top)) + (m2 == -INFINITY ? 0.f : s2 * expf(m2 - top));
  m = top;
}

template <class T>
__device__ __forceinline__ T value(bool log, float x, float m, float lse, float inv) {
  return st<T>(log ? x - lse : expf(x - m) * inv);
}

template <class T>
__global__ void softmax_rows_kernel(bool log, const T* in, T* out, size_t rows, int c) {
  const int lane = threadIdx.x & 31;
  const size_t warps = (static_cast<size_t>(gridDim.x) * blockDim.x) >> 5;
  for (size_t r = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; r < rows; r += warps) {
    const T* x = in + r * c;
    float m = -INFINITY, s = 0.f;
    for (int ch = lane; ch < c; ch += 32) take(m, s, ld(x[ch]));
    for (int o = 16; o > 0; o >>= 1) merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    const float lse = m + logf(s), inv = 1.f / s;
    for (int ch = lane; ch < c; ch += 32) out[r * c + ch] = value<T>(log, ld(x[ch]), m, lse, inv);
  }
}

template <class T>
__global__ void softmax_tiles_kernel(bool log, const T* in, T* out, size_t tiles, int c, int hw) {
  __shared__ float shared_m[kTileRows][32], shared_s[kTileRows][32];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const PixelTile at(t, hw);
    const size_t base = at.image * c * hw + at.p;
    float m = -INFINITY, s = 0.f;
    if (at.in)
      for (int ch = ty; ch < c; ch += kTileRows) take(m, s, ld(in[base + static_cast<size_t>(ch) * hw]));
    shared_m[ty][tx] = m, shared_s[ty][tx] = s;
    __syncthreads();
    m = shared_m[0][tx], s = shared_s[0][tx];
    for (int k = 1; k < kTileRows; ++k) merge(m, s, shared_m[k][tx], shared_s[k][tx]);
    __syncthreads();  // the next tile writes the shares again
    if (!at.in) continue;
    const float lse = m + logf(s), inv = 1.f / s;
    for (int ch = ty; ch < c; ch += kTileRows) {
      const size_t at = base + static_cast<size_t>(ch) * hw;
      out[at] = value<T>(log, ld(in[at]), m, lse, inv);
    }
  }
}

// softmax: dx = y·(dy − Σ dy·y);  log-softmax: dx = dy − exp(y)·Σ dy
template <class T>
__device__ __forceinline__ float term(bool log, T y, T dy) {
  return log ? ld(dy) : ld(dy) * ld(y);
}

template <class T>
__device__ __forceinline__ T gradient(bool log, T y, T dy, float sum) {
  return st<T>(log ? ld(dy) - expf(ld(y)) * sum : ld(y) * (ld(dy) - sum));
}

template <class T>
__global__ void softmax_gradient_rows_kernel(bool log, const T* y, const T* dy, T* dx, size_t rows, int c) {
  const int lane = threadIdx.x & 31;
  const size_t warps = (static_cast<size_t>(gridDim.x) * blockDim.x) >> 5;
  for (size_t r = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; r < rows; r += warps) {
    const size_t row = r * c;
    float sum = 0.f;
    for (int ch = lane; ch < c; ch += 32) sum += term(log, y[row + ch], dy[row + ch]);
    sum = warp_sum(sum);
    for (int ch = lane; ch < c; ch += 32) dx[row + ch] = gradient(log, y[row + ch], dy[row + ch], sum);
  }
}

template <class T>
__global__ void softmax_gradient_tiles_kernel(bool log, const T* y, const T* dy, T* dx, size_t tiles, int c, int hw) {
  __shared__ float share[kTileRows][32];
  const int ty = threadIdx.y;
  for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const PixelTile at(t, hw);
    const size_t base = at.image * c * hw + at.p;
    float sum = 0.f;
    if (at.in)
      for (int ch = ty; ch < c; ch += kTileRows)
        sum += term(log, y[base + static_cast<size_t>(ch) * hw], dy[base + static_cast<size_t>(ch) * hw]);
    sum = column_sum(sum, share);
    if (!at.in) continue;
    for (int ch = ty; ch < c; ch += kTileRows) {
      const size_t at = base + static_cast<size_t>(ch) * hw;
      dx[at] = gradient(log, y[at], dy[at], sum);
    }
  }
}

// Blocks of kThreads for a warp per row.
unsigned warp_blocks(size_t rows) { return blocks_for(rows * 32); }

}  // namespace

template <class T>
void softmax(cudaStream_t s, bool log, const T* in, T* out, int n, int c, int hw) {
  if (hw == 1)
    softmax_rows_kernel<<<warp_blocks(n), kThreads, 0, s>>>(log, in, out, static_cast<size_t>(n), c);
  else {
    const size_t tiles = pixel_tiles(n, hw);
    softmax_tiles_kernel<<<tile_blocks(tiles), tile_threads(), 0, s>>>(log, in, out, tiles, c, hw);
  }
  check_launch("softmax");
}

template <class T>
void softmax_gradient(cudaStream_t s, bool log, const T* y, const T* dy, T* dx, int n, int c, int hw) {
  if (hw == 1)
    softmax_gradient_rows_kernel<<<warp_blocks(n), kThreads, 0, s>>>(log, y, dy, dx, static_cast<size_t>(n), c);
  else {
    const size_t tiles = pixel_tiles(n, hw);
    softmax_gradient_tiles_kernel<<<tile_blocks(tiles), tile_threads(), 0, s>>>(log, y, dy, dx, tiles, c, hw);
  }
  check_launch("softmax_gradient");
}

#define INSTANTIATE(T)                                                     \
  template void softmax(cudaStream_t, bool, const T*, T*, int, int, int); \
  template void softmax_gradient(cudaStream_t, bool, const T*, const T*, T*, int, int, int);
NNGRAPH_STORAGE_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace nngraph::cuda
