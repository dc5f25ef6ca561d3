// Row-major products C = op(A)·op(B) on tensor cores (tensor_core.cuh), split over k where
// m and n alone leave the GPU idle: a fully connected layer at a small batch is 64 rows
// deep, which cuBLAS's float32 kernels run on a few dozen multiprocessors.
#include <type_traits>

#include "tensor_core.cuh"

namespace nngraph::cuda {
namespace {

using namespace tc;

// op(A) is m × k: A itself (row m at m·lda) or, with kTA, A stored k × m. op(B) is k × n: B
// itself or, with kTB, B stored n × k. The loaders read B by its rows n.
template <bool kTA, bool kTB>
struct Product {
  int rows, columns, depth, lda, ldb, ldc;
  __host__ __device__ int m() const { return rows; }
  __host__ __device__ int n() const { return columns; }
  __host__ __device__ int k() const { return depth; }
  __device__ int a_row(int m) const { return kTA ? m : m * lda; }
  __device__ int a_k(int k) const { return kTA ? k * lda : k; }
  __device__ int b_row(int n) const { return kTB ? n * ldb : n; }
  __device__ int b_k(int k) const { return kTB ? k : k * ldb; }
  __device__ int out_row(int m) const { return m * ldc; }
  __device__ int out_stride() const { return 1; }
};

int product_splits(int m, int n, int k, int* k_split) {
  return k_splits(static_cast<long>((m + 63) / 64) * ((n + 63) / 64), k, k_split, 128);
}

template <bool kTA, bool kTB>
void run(cudaStream_t s, bool exact, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
         float* partial) {
  using P = Product<kTA, kTB>;
  using LA = std::conditional_t<kTA, Across<64, P, true>, Contiguous<64, P, true>>;
  using LB = std::conditional_t<kTB, Contiguous<64, P, false>, Across<64, P, false>>;
  int k_split = 0;
  const int splits = product_splits(m, n, k, &k_split);
  launch<P, LA, LB, 64, 64>(s, P{m, n, k, lda, ldb, n}, splits, k_split, exact, a, b, nullptr, NeuronDescriptor{},
                            splits > 1 ? partial : c);
  if (splits > 1) column_totals(s, partial, splits, m * n, m * n, c, nullptr);
}

}  // namespace

bool tensor_product_fits(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                         int ldc) {
  // Four floats at a time along each operand's contiguous dimension.
  const auto aligned = [](const void* p, long ld) { return reinterpret_cast<uintptr_t>(p) % 16 == 0 && ld % 4 == 0; };
  const long a_count = static_cast<long>(ta ? k : m) * lda, b_count = static_cast<long>(tb ? n : k) * ldb;
  return device_attribute<cudaDevAttrComputeCapabilityMajor>() >= 8 && m > 0 && n > 0 && k > 0 &&
         (ta ? m : k) % 4 == 0 && (tb ? k : n) % 4 == 0 && aligned(a, lda) && aligned(b, ldb) && ldc == n &&
         a_count < (1L << 31) && b_count < (1L << 31) && static_cast<long>(m) * n < (1L << 28);
}

size_t tensor_product_partial(int m, int n, int k) {
  int k_split = 0;
  const int splits = product_splits(m, n, k, &k_split);
  return splits > 1 ? static_cast<size_t>(splits) * m * n : 0;
}

void tensor_product(cudaStream_t s, bool exact, bool ta, bool tb, int m, int n, int k, const float* a, int lda,
                    const float* b, int ldb, float* c, float* partial) {
  if (ta && tb)
    run<true, true>(s, exact, m, n, k, a, lda, b, ldb, c, partial);
  else if (ta)
    run<true, false>(s, exact, m, n, k, a, lda, b, ldb, c, partial);
  else if (tb)
    run<false, true>(s, exact, m, n, k, a, lda, b, ldb, c, partial);
  else
    run<false, false>(s, exact, m, n, k, a, lda, b, ldb, c, partial);
  check_launch("gemm");
}

}  // namespace nngraph::cuda
