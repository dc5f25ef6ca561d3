// Reductions: bias gradients (with the fused neuron's gradient), the numerics checks and the
// loss scale's update.
#include <algorithm>

#include "backends/optimizer_math.h"
#include "columns.cuh"
#include "common.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

// Stage 1, planes (hw > 1): block (channel, chunk) walks its images' planes of that channel.
// With y given, each value is dy·f'(y), stored as it is summed where dz is: one pass over dy.
template <class T, class D>
__global__ void bias_partial_kernel(const T* dy, const T* y, T* dz, D derivative, float* partial, int n, int c, int hw,
                                    int chunks) {
  const int ch = blockIdx.x, chunk = blockIdx.y;
  const int n0 = static_cast<int>(static_cast<long>(n) * chunk / chunks);
  const int n1 = static_cast<int>(static_cast<long>(n) * (chunk + 1) / chunks);
  const unsigned count = static_cast<unsigned>(n1 - n0) * hw;
  float sum = 0.f;
#pragma unroll 4
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x) {
    const unsigned img = i / hw;
    const size_t at = (static_cast<size_t>(n0 + img) * c + ch) * hw + (i - img * hw);
    float v = ld(dy[at]);
    if (y) v *= derivative(ld(y[at]));
    if (dz) dz[at] = st<T>(v);
    sum += v;
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) partial[static_cast<size_t>(chunk) * c + ch] = sum;
}

// Stage 1, rows (hw 1: fully connected results, channels-last pixels): column_partial_kernel's
// terms, R = 1 (dy alone) or 2 (dy and y: dy·f'(y), stored as it is summed where dz is).
template <class T, class D, int R>
struct BiasTerms {
  const T* dy;
  const T* y;
  T* dz;
  D derivative;
  using Constants = char;  // none
  using Value = T;
  static constexpr int kReads = R, kSums = 1;
  bool aligned() const { return packed(dy) && (R == 1 || (packed(y) && packed(dz))); }
  __device__ char constants(int) const { return 0; }
  template <int V>
  __device__ void load(size_t at, Loaded<V, T> (&r)[kReads]) const {
    r[0].load(dy + at);
    if constexpr (R == 2) r[1].load(y + at);
  }
  template <int V>
  __device__ void add_each(size_t at, const Loaded<V, T> (&r)[kReads], const char*, float* a, float*) const {
    float d[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
      d[i] = r[0][i];
      if constexpr (R == 2) d[i] *= derivative(r[1][i]);
      a[i] += d[i];
    }
    if constexpr (R == 2)
      if (dz) store_values<V>(dz + at, d);
  }
};

// Stage 2 (and the direct convolution's weight gradient): columns [0, split) of the rows'
// totals go to a, the rest to b (skipped where b is null). A block adds 32 columns, its 8
// thread rows every 8th row, then combines them in a fixed order (deterministic); a holds
// storage type T (a half graph's weight gradient).
template <class T>
__global__ void column_totals_kernel(const float* partial, int rows, int width, int split, T* a, float* b) {
  __shared__ float sums[8][33];
  const int i = blockIdx.x * 32 + threadIdx.x;
  float sum = 0.f;
  if (i < width)
    for (int r = threadIdx.y; r < rows; r += 8) sum += partial[static_cast<size_t>(r) * width + i];
  sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || i >= width) return;
  for (int k = 1; k < 8; ++k) sum += sums[k][threadIdx.x];
  if (i < split)
    a[i] = st<T>(sum);
  else if (b)
    b[i - split] = sum;
}

template <class T>
__global__ void nonfinite_kernel(const T* data, size_t n, int* flag) {
  NNGRAPH_GRID_LOOP(i, n) if (!isfinite(ld(data[i]))) *flag = 1;
}

constexpr int kMaxChecked = 32;

// Block b checks tensor t with first_block[t] <= b < first_block[t + 1].
struct ManyChecked {
  const void* data[kMaxChecked];
  DType dtype[kMaxChecked];
  size_t count[kMaxChecked];
  unsigned first_block[kMaxChecked + 1];
  int n;
};

template <class T>
__device__ bool all_finite(const T* x, size_t first, size_t stride, size_t count) {
  bool ok = true;
  for (size_t i = first; i < count; i += stride) ok &= isfinite(ld(x[i]));
  return ok;
}

__global__ void many_nonfinite_kernel(ManyChecked m, int* flag) {
  int t = 0;
  while (t + 1 < m.n && blockIdx.x >= m.first_block[t + 1]) ++t;
  const size_t local = blockIdx.x - m.first_block[t], blocks = m.first_block[t + 1] - m.first_block[t];
  const size_t first = local * blockDim.x + threadIdx.x, stride = blocks * blockDim.x;
  bool ok;
  if (m.dtype[t] == DType::Float16)
    ok = all_finite(static_cast<const __half*>(m.data[t]), first, stride, m.count[t]);
  else if (m.dtype[t] == DType::BFloat16)
    ok = all_finite(static_cast<const __nv_bfloat16*>(m.data[t]), first, stride, m.count[t]);
  else
    ok = all_finite(static_cast<const float*>(m.data[t]), first, stride, m.count[t]);
  if (!__syncthreads_and(ok) && threadIdx.x == 0) *flag = 1;
}

__global__ void advance_loss_scale_kernel(math::LossScaleState* s, float growth, float backoff, int interval) {
  math::advance_loss_scale(*s, growth, backoff, interval);
}

}  // namespace

template <class T>
void bias_gradient(cudaStream_t s, const T* dy, const T* y, T* dz, const NeuronDescriptor& nd, float* db, int n, int c,
                   int hw, float* partial) {
  const int chunks = bias_gradient_chunks(n, c, hw);
  float* sums = chunks == 1 ? db : partial;  // one chunk: its sums are the totals
  if (hw == 1 && !y)
    column_partials<T>(s, BiasTerms<T, NoDerivative, 1>{dy, nullptr, nullptr, {}}, sums, n, c, chunks);
  else
    with_derivative(nd, [&](auto derivative) {
      if (hw == 1)
        column_partials<T>(s, BiasTerms<T, decltype(derivative), 2>{dy, y, dz, derivative}, sums, n, c, chunks);
      else
        bias_partial_kernel<<<dim3(c, chunks), kThreads, 0, s>>>(dy, y, dz, derivative, sums, n, c, hw, chunks);
    });
  if (chunks > 1) column_totals(s, partial, chunks, c, c, db, nullptr);
  check_launch("bias_gradient");
}

#define INSTANTIATE(T)                                                                                       \
  template void bias_gradient(cudaStream_t, const T*, const T*, T*, const NeuronDescriptor&, float*, int, int, int, \
                              float*);
NNGRAPH_STORAGE_TYPES(INSTANTIATE)
#undef INSTANTIATE

template <class T>
void column_totals(cudaStream_t s, const float* partial, int rows, int width, int split, T* a, float* b) {
  column_totals_kernel<<<(width + 31) / 32, dim3(32, 8), 0, s>>>(partial, rows, width, split, a, b);
}
#define INSTANTIATE(T) template void column_totals(cudaStream_t, const float*, int, int, int, T*, float*);
NNGRAPH_STORAGE_TYPES(INSTANTIATE)
#undef INSTANTIATE

int bias_gradient_chunks(int n, int c, int hw) {
  // Planes: about eight blocks per multiprocessor in all.
  if (hw == 1) return row_chunks(n, c);
  return std::max(1, std::min({n, 1024 / std::max(1, c), 1024}));
}

void mark_nonfinite(cudaStream_t s, const std::vector<Checked>& tensors, int* flag) {
  for (size_t start = 0; start < tensors.size(); start += kMaxChecked) {
    ManyChecked m{};
    m.n = static_cast<int>(std::min<size_t>(kMaxChecked, tensors.size() - start));
    for (int i = 0; i < m.n; ++i) {
      const Checked& c = tensors[start + i];
      m.data[i] = c.data;
      m.dtype[i] = c.dtype;
      m.count[i] = c.count;
      m.first_block[i + 1] = m.first_block[i] + std::min<unsigned>(blocks_for(c.count), 256);
    }
    many_nonfinite_kernel<<<m.first_block[m.n], kThreads, 0, s>>>(m, flag);
  }
  check_launch("loss_scale_check");
}

void advance_loss_scale(cudaStream_t s, math::LossScaleState* state, const LossScaling& rule) {
  advance_loss_scale_kernel<<<1, 1, 0, s>>>(state, rule.growth, rule.backoff, rule.growth_interval);
  check_launch("loss_scale_update");
}

void any_nonfinite(cudaStream_t s, const void* data, DType dtype, size_t count, int* flag) {
  cudaMemsetAsync(flag, 0, sizeof(int), s);
  with_storage(dtype, [&](auto z) {
    using T = decltype(z);
    nonfinite_kernel<<<blocks_for(count), kThreads, 0, s>>>(static_cast<const T*>(data), count, flag);
  });
  check_launch("check_numerics");
}

}  // namespace nngraph::cuda
