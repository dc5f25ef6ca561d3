// Row-major products C = op(A)·op(B) too small for tiles (a fully connected layer with a
// few outputs: the digit network's last layer, 64 × 10 × 1024): cuBLAS runs them as a split
// product and a reduction, two launches of a few µs each. Plain float32 multiply-adds.
#include "common.cuh"

namespace nngraph::cuda {
namespace {

constexpr int kWarps = 8, kColumns = 64, kSplit = 4;

// A warp per element of C, its lanes along k: A (not transposed) and B (transposed) both run
// along k, so each lane's loads are contiguous with its neighbours'.
__global__ void __launch_bounds__(kWarps * 32)
    dot_kernel(int m, int n, int k, const float* __restrict__ a, int lda, const float* __restrict__ b, int ldb,
               float* __restrict__ c, int ldc) {
  const int lane = threadIdx.x & 31, e = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (e >= m * n) return;
  const int i = e / n, j = e % n;
  const float* ar = a + static_cast<size_t>(i) * lda;
  const float* br = b + static_cast<size_t>(j) * ldb;
  float sum[4] = {};
  int p = lane;
  for (; p + 96 < k; p += 128)  // four independent sums
#pragma unroll
    for (int u = 0; u < 4; ++u) sum[u] = fmaf(ar[p + 32 * u], br[p + 32 * u], sum[u]);
  for (; p < k; p += 32) sum[0] = fmaf(ar[p], br[p], sum[0]);
  const float s = warp_sum((sum[0] + sum[1]) + (sum[2] + sum[3]));
  if (lane == 0) c[static_cast<size_t>(i) * ldc + j] = s;
}

// A thread per element of C and quarter of k, a block's threads along one row of C: B (not
// transposed) is read along its rows, A's element is the same for the whole block.
template <bool kTA>
__global__ void __launch_bounds__(kColumns * kSplit)
    column_kernel(int n, int k, const float* __restrict__ a, int lda, const float* __restrict__ b, int ldb,
                  float* __restrict__ c, int ldc) {
  const int i = blockIdx.y, j = blockIdx.x * kColumns + threadIdx.x;
  float sum[2] = {};
  if (j < n) {
    int p = threadIdx.y;
    for (; p + kSplit < k; p += 2 * kSplit)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int q = p + u * kSplit;
        sum[u] = fmaf(kTA ? a[static_cast<size_t>(q) * lda + i] : a[static_cast<size_t>(i) * lda + q],
                      b[static_cast<size_t>(q) * ldb + j], sum[u]);
      }
    if (p < k)
      sum[0] = fmaf(kTA ? a[static_cast<size_t>(p) * lda + i] : a[static_cast<size_t>(i) * lda + p],
                    b[static_cast<size_t>(p) * ldb + j], sum[0]);
  }
  __shared__ float part[kSplit][kColumns];
  part[threadIdx.y][threadIdx.x] = sum[0] + sum[1];
  __syncthreads();
  if (threadIdx.y > 0 || j >= n) return;
  float total = 0;
#pragma unroll
  for (int y = 0; y < kSplit; ++y) total += part[y][threadIdx.x];
  c[static_cast<size_t>(i) * ldc + j] = total;
}

}  // namespace

bool thin_product_fits(bool ta, bool tb, int m, int n, int k) {
  const long elements = static_cast<long>(m) * n;
  if (m < 1 || n < 1 || k < 1 || elements * k > (1L << 22)) return false;
  if (!tb) return m <= 65535;     // column_kernel: a row of C per grid row
  return !ta && elements < (1L << 28);  // dot_kernel
}

void thin_product(cudaStream_t s, bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b,
                  int ldb, float* c, int ldc) {
  if (tb) {
    dot_kernel<<<(m * n + kWarps - 1) / kWarps, kWarps * 32, 0, s>>>(m, n, k, a, lda, b, ldb, c, ldc);
  } else {
    const dim3 grid((n + kColumns - 1) / kColumns, m), block(kColumns, kSplit);
    if (ta)
      column_kernel<true><<<grid, block, 0, s>>>(n, k, a, lda, b, ldb, c, ldc);
    else
      column_kernel<false><<<grid, block, 0, s>>>(n, k, a, lda, b, ldb, c, ldc);
  }
  check_launch("gemm");
}

}  // namespace nngraph::cuda
