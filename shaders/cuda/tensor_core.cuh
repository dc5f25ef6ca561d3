#pragma once
// Products C = A·B on tensor cores (mma.sync m16n8k8, tf32) for tensor_conv.cu and
// tensor_product.cu. A pass P gives the sizes m(), n(), k(), where C's element (m, n) goes
// (out_row(m) + n · out_stride()), and the offsets its loaders read: a loader copies one
// operand's stages of kBK k into shared memory by asynchronous copies, gathering as it goes.
// Exact float32 splits each operand v into big (v as tf32) and small (v − big as tf32) and
// sums small·big + big·small + big·big: the dropped small·small is below float32's rounding.
#include <atomic>
#include <cstdint>

#include "common.cuh"
#include "kernels.cuh"

namespace nngraph::cuda::tc {

constexpr int kBK = 16, kBlock = 128, kStages = 4;  // k per stage; four warps; stages in flight + 1 (by default)

// A stage of one operand, R rows (its outer dimension) × kBK: k-major for operands loaded
// along rows, row-major for those loaded along k. A fragment's k slot t (lane % 4) holds k =
// 2t and slot t + 4 holds 2t + 1, in both operands, so the product is unchanged and a row-major
// stage hands a lane both in one 8-byte load. Rows padded so that a fragment load touches
// every bank once (row-major: 24 floats ≡ 8 banks a row; k-major: R + 4, 2t rows ≡ 8t banks)
// and start at 16-byte multiples.
template <int R, bool kRowMajor>
struct Stage {
  float v[kRowMajor ? R : kBK][kRowMajor ? kBK + 8 : R + 4];
  __device__ float& at(int row, int k) { return kRowMajor ? v[row][k] : v[k][row]; }
  __device__ float2 pair(int row, int k) const {  // (k, k + 1), k even
    if constexpr (kRowMajor) return *reinterpret_cast<const float2*>(&v[row][k]);
    return {v[k][row], v[k + 1][row]};
  }
};

// Operands as tf32 (sm_80 and later; the fits functions keep older GPUs off these kernels):
// integer operations, as cvt.rna.tf32 takes three instructions with its checks for infinities.
constexpr uint32_t kTf32 = 0xffffe000u;  // the bits a tf32 keeps
__device__ inline uint32_t round_tf32(float v) { return (__float_as_uint(v) + 0x1000u) & kTf32; }  // half up

// c += a·b, or with `fresh` c = a·b (the compiler passes zero registers: no zeroing of c).
__device__ inline void mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], bool fresh = false) {
#if __CUDA_ARCH__ >= 800
  const float z = 0.f;
  if (fresh)
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%10,%10,%10};\n"
        : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(z));
  else
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}

__device__ inline void copy4(float* dst, const float* src, bool in) {  // zero-fills when !in
#if __CUDA_ARCH__ >= 800
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(in ? 4 : 0));
#endif
}
__device__ inline void copy16(float* dst, const float* src, bool in) {  // 16-byte aligned both sides
#if __CUDA_ARCH__ >= 800
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(in ? 16 : 0));
#endif
}
__device__ inline void commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ void wait_pending() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Wide: an operand read four floats (16 bytes) at a time where four are contiguous (offset
// row(r) + k_offset(k)): along k into a row-major stage (Contiguous: each row's k run
// contiguous in groups of four) or along rows into a k-major one (Across: each k's rows).
template <int R, class P, bool kA, bool kAlongK>
struct Wide {
  using Tile = Stage<R, kAlongK>;
  static constexpr int kCount = R * kBK / 4 / kBlock;
  const float* src;
  int rows, first, k1;
  __device__ Wide(const P&, const float* s, int f, int r, int end) : src(s), rows(r), first(f), k1(end) {}
  __device__ void issue(const P& p, int k, Tile& t) const {
#pragma unroll
    for (int j = 0; j < kCount; ++j) {
      const int c = threadIdx.x + j * kBlock;
      const int r = kAlongK ? c / (kBK / 4) : (c % (R / 4)) * 4, kk = kAlongK ? (c % (kBK / 4)) * 4 : c / (R / 4);
      const bool in = first + r < rows && k + kk < k1;
      int offset = 0;
      if constexpr (kA) {
        if (in) offset = p.a_row(first + r) + p.a_k(k + kk);
      } else {
        if (in) offset = p.b_row(first + r) + p.b_k(k + kk);
      }
      copy16(&t.at(r, kk), src + offset, in);
    }
  }
};
template <int R, class P, bool kA>
using Contiguous = Wide<R, P, kA, true>;
template <int R, class P, bool kA>
using Across = Wide<R, P, kA, false>;

// Fragment values as tf32 parts: big, and with kExact the remainder's. Exact truncates big,
// whose error the remainder carries exactly (v − big is a float), and rounds the remainder.
template <bool kExact, int N>
__device__ void split(const float (&v)[N], uint32_t (&big)[N], uint32_t (&small)[N]) {
#pragma unroll
  for (int e = 0; e < N; ++e) {
    if (kExact) {
      big[e] = __float_as_uint(v[e]) & kTf32;
      small[e] = round_tf32(v[e] - __uint_as_float(big[e]));
    } else {
      big[e] = round_tf32(v[e]);
    }
  }
}

template <int M, int N, class F>
__device__ void each(F f) {
#pragma unroll
  for (int i = 0; i < M; ++i)
#pragma unroll
    for (int j = 0; j < N; ++j) f(i, j);
}

// A BM × BN tile of C over k in [blockIdx.z · k_split, + k_split), in stages of kBK through a
// ring of S in (dynamic) shared memory filled by asynchronous copies, S − 1 in flight while one
// is multiplied. The four warps lie WM along the tile's rows and 4 / WM along its columns.
template <class P, class LA, class LB, int BM, int BN, bool kExact, int WM, int S>
__global__ void __launch_bounds__(kBlock) tensor_kernel(P p, const float* __restrict__ a,
                                                        const float* __restrict__ b, const float* bias,
                                                        NeuronDescriptor nd, float* __restrict__ out, int k_split,
                                                        int split_stride) {
  constexpr int WN = kBlock / 32 / WM, MT = BM / WM / 16, NT = BN / WN / 8;  // a warp's 16 × 8 fragments
  extern __shared__ __align__(16) unsigned char stages[];
  auto* sa = reinterpret_cast<typename LA::Tile*>(stages);
  auto* sb = reinterpret_cast<typename LB::Tile*>(stages + S * sizeof(typename LA::Tile));
  const int M = p.m(), N = p.n(), m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int k0 = blockIdx.z * k_split, k1 = min(p.k(), k0 + k_split), steps = (k1 - k0 + kBK - 1) / kBK;
  LA la(p, a, m0, M, k1);  // loaders may walk their k: issued once a stage, in order
  LB lb(p, b, n0, N, k1);
  auto issue = [&](int step) {
    if (step < steps) {
      la.issue(p, k0 + step * kBK, sa[step % S]);
      lb.issue(p, k0 + step * kBK, sb[step % S]);
    }
    commit();
  };
  for (int step = 0; step < S - 1; ++step) issue(step);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int wm = (warp % WM) * (BM / WM), wn = (warp / WM) * (BN / WN);
  float acc[MT][NT][4] = {};
  for (int s = 0; s < steps; ++s) {
    wait_pending<S - 2>();  // stage s has landed (this thread's copies)
    __syncthreads();              // everyone's, and stage s − 1's products are done
    issue(s + S - 1);
    const auto& A = sa[s % S];
    const auto& B = sb[s % S];
    // The tensor cores truncate as they accumulate: in exact float32 a stage's products go to
    // fresh sums that are then added with rounding, so no running total passes through them.
    // tf32 sums in them, as its operands' rounding is far coarser than the truncation.
    [[maybe_unused]] float part[MT][NT][4];  // exact: written first by the stage's first products
#pragma unroll
    for (int k8 = 0; k8 < kBK; k8 += 8) {
      uint32_t ab[MT][4], as[MT][4], bb[NT][2], bs[NT][2];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const int r = wm + i * 16 + g;
        const float2 top = A.pair(r, k8 + 2 * t), bottom = A.pair(r + 8, k8 + 2 * t);
        const float v[4] = {top.x, bottom.x, top.y, bottom.y};
        split<kExact>(v, ab[i], as[i]);
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int c = wn + j * 8 + g;
        const float2 p = B.pair(c, k8 + 2 * t);
        const float v[2] = {p.x, p.y};
        split<kExact>(v, bb[j], bs[j]);
      }
      // Each kind of product over every fragment in turn: consecutive mma are independent.
      if constexpr (kExact) {
        each<MT, NT>([&](int i, int j) { mma(part[i][j], as[i], bb[j], k8 == 0); });
        each<MT, NT>([&](int i, int j) { mma(part[i][j], ab[i], bs[j]); });
        each<MT, NT>([&](int i, int j) { mma(part[i][j], ab[i], bb[j]); });
      } else {
        each<MT, NT>([&](int i, int j) { mma(acc[i][j], ab[i], bb[j]); });
      }
    }
    if constexpr (kExact) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] += part[i][j][e];
    }
  }

  out += static_cast<size_t>(blockIdx.z) * split_stride;
  const int stride = p.out_stride();
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = m0 + wm + i * 16 + g + 8 * half;
      if (m >= M) continue;
      float* row = out + p.out_row(m);
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int n = n0 + wn + j * 8 + 2 * t + e;
          if (n < N)
            row[static_cast<size_t>(n) * stride] = math::neuron(nd, acc[i][j][2 * half + e] + (bias ? bias[n] : 0.f));
        }
    }
}

// One kernel: exact or not, its warps WM along the rows, S stages. Past 48 KiB of stages the
// kernel is let take more shared memory, once on each device (a refusal fails the launch,
// which the caller checks).
template <class P, class LA, class LB, int BM, int BN, bool kExact, int WM = 2, int S = kStages>
void launch_as(cudaStream_t s, const P& p, int splits, int k_split, const float* a, const float* b,
               const float* bias, const NeuronDescriptor& nd, float* out) {
  constexpr size_t bytes = S * (sizeof(typename LA::Tile) + sizeof(typename LB::Tile));
  const auto kernel = tensor_kernel<P, LA, LB, BM, BN, kExact, WM, S>;
  if constexpr (bytes > 48 * 1024) {
    static std::atomic<uint64_t> opened{0};  // a bit for each device
    int device = 0;
    cudaGetDevice(&device);
    const uint64_t bit = uint64_t{1} << (device % 64);
    if (!(opened.load() & bit) &&
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)) ==
            cudaSuccess)
      opened.fetch_or(bit);
  }
  const dim3 grid((p.m() + BM - 1) / BM, (p.n() + BN - 1) / BN, splits);
  kernel<<<grid, kBlock, bytes, s>>>(p, a, b, bias, nd, out, k_split, p.m() * p.n());
}

template <class P, class LA, class LB, int BM, int BN>
void launch(cudaStream_t s, const P& p, int splits, int k_split, bool exact, const float* a, const float* b,
            const float* bias, const NeuronDescriptor& nd, float* out) {
  if (exact)
    launch_as<P, LA, LB, BM, BN, true>(s, p, splits, k_split, a, b, bias, nd, out);
  else
    launch_as<P, LA, LB, BM, BN, false>(s, p, splits, k_split, a, b, bias, nd, out);
}

// k split so that the GPU holds about `per_sm` tiles a multiprocessor (four for 64 × 64 tiles: two
// left it waiting on latencies, 74 against 61 µs for the digit network's second convolution's
// weight gradient at batch 64), each split at least 256 deep; *k_split is a whole number of stages.
inline int k_splits(long tiles, long k, int* k_split, int least = 256, int per_sm = 4) {
  const long want =
      std::max(1L, std::min<long>((static_cast<long>(per_sm) * multiprocessors() + tiles - 1) / tiles, k / least));
  *k_split = static_cast<int>(((k + want - 1) / want + kBK - 1) / kBK * kBK);
  return static_cast<int>((k + *k_split - 1) / *k_split);
}

}  // namespace nngraph::cuda::tc
