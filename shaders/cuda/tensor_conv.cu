// Convolution passes as implicit products C = A·B on tensor cores (mma.sync m16n8k8, tf32),
// the operands gathered from the tensors as they are copied into shared memory:
//   forward         C[(image, p, q)][o] = Σ over (ky, kx, c)      x · w
//   input gradient  C[(image, y, x)][c] = Σ over (ky, kx, o)      dz · w   (stride 1)
//   weight gradient C[o][(c, ky, kx)]   = Σ over (image, p, q)    dz · x   (split over k)
// With the channels innermost in k, a stage of 16 k is one tap of 16 channels: one bounds
// check per row and stage; the weights are reordered to match (a permute per call).
// Exact float32 splits each operand v into big = tf32(v) and small = tf32(v − big) and sums
// small·big + big·small + big·big: the dropped small·small is below float32's rounding.
#include <cstdint>

#include "common.cuh"
#include "conv.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

constexpr int kBK = 16, kBlock = 128, kStages = 4;  // k per stage; four warps as 2 × 2 over the tile

// A stage of one operand, R rows (its outer dimension) × kBK: k-major for operands loaded
// along rows, row-major for those loaded along k. Rows padded so that a fragment load
// (k = lane % 4, row = lane / 4) touches 32 banks, row-major rows to 16-byte multiples.
template <int R, bool kRowMajor>
struct Stage {
  float v[kRowMajor ? R : kBK][kRowMajor ? kBK + 4 : R + 8];
  __device__ float& at(int row, int k) { return kRowMajor ? v[row][k] : v[k][row]; }
  __device__ float at(int row, int k) const { return kRowMajor ? v[row][k] : v[k][row]; }
};

// An element's Place is its row's part plus its k index's; nowhere fails every bounds check,
// whatever is added.
__device__ Place nowhere() { return {0, -(1 << 29), 0}; }

// tf32 needs sm_80; tensor_convolution_fits keeps older GPUs off these kernels.
__device__ uint32_t tf32(float v) {
  uint32_t r = __float_as_uint(v);
#if __CUDA_ARCH__ >= 800
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
#endif
  return r;
}

__device__ void mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}

__device__ void copy4(float* dst, const float* src, bool in) {  // zero-fills when !in
#if __CUDA_ARCH__ >= 800
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(in ? 4 : 0));
#endif
}
__device__ void copy16(float* dst, const float* src, bool in) {  // 16-byte aligned both sides
#if __CUDA_ARCH__ >= 800
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(in ? 16 : 0));
#endif
}
__device__ void commit() {
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

// Loaders: one thread's share of an operand's stages, each issued as asynchronous copies.
//
// Grouped: rows contiguous in memory, k ordered (ky, kx, channel) with kBK dividing the
// channels, so a stage is one tap of kBK channels and a thread's row needs one bounds check
// per stage (the passes that use it run whole stages: no split). A thread holds one row and
// the stage's k 128 / R apart.
template <int R, class P>
struct Grouped {
  using Tile = Stage<R, false>;
  static constexpr int kCount = R * kBK / kBlock;
  const float* src;
  Place row;
  int h, w, channel;  // bounds, and the distance between channels
  __device__ Grouped(const P& p, const float* s, int first, int rows, int) : src(s) {
    const int r = first + threadIdx.x % R;
    row = r < rows ? p.a_row(r) : nowhere();
    h = p.a_h();
    w = p.a_w();
    channel = p.a_channel();
  }
  __device__ void issue(const P& p, int k, Tile& t) const {
    const Place tap = p.a_tap(k);
    const bool in = inside(row.y + tap.y, row.x + tap.x, h, w);
    const float* at = src + (row.base + tap.base);
#pragma unroll
    for (int j = 0; j < kCount; ++j) {
      const int kk = threadIdx.x / R + j * (kBlock / R);
      copy4(&t.at(threadIdx.x % R, kk), in ? at + kk * channel : src, in);
    }
  }
};

// Contiguous: each row's k run contiguous in groups of four (offset row(r) + k_offset(k)),
// copied 16 bytes at a time.
template <int R, class P, bool kA>
struct Contiguous {
  using Tile = Stage<R, true>;
  static constexpr int kCount = R * kBK / 4 / kBlock;
  const float* src;
  int rows, first, k1;
  __device__ Contiguous(const P&, const float* s, int f, int r, int end) : src(s), rows(r), first(f), k1(end) {}
  __device__ void issue(const P& p, int k, Tile& t) const {
#pragma unroll
    for (int j = 0; j < kCount; ++j) {
      const int c = threadIdx.x + j * kBlock, r = c / (kBK / 4), kq = (c % (kBK / 4)) * 4;
      const bool in = first + r < rows && k + kq < k1;
      int offset = 0;
      if constexpr (kA) {
        if (in) offset = p.a_row(first + r) + p.a_k(k + kq);
      } else {
        if (in) offset = p.b_row(first + r) + p.b_k(k + kq);
      }
      copy16(&t.at(r, kq), src + offset, in);
    }
  }
};

// Gathered: any layout, a bounds check per element; a thread holds one k and rows 8 apart.
template <int R, class P>
struct Gathered {
  using Tile = Stage<R, true>;
  static constexpr int kCount = R * kBK / kBlock;
  const float* src;
  Place rows[kCount];
  int h, w, k1;
  __device__ Gathered(const P& p, const float* s, int first, int count, int end) : src(s), k1(end) {
#pragma unroll
    for (int j = 0; j < kCount; ++j) {
      const int r = first + threadIdx.x / kBK + j * (kBlock / kBK);
      rows[j] = r < count ? p.b_row(r) : nowhere();
    }
    h = p.b_h();
    w = p.b_w();
  }
  __device__ void issue(const P& p, int k, Tile& t) const {
    const int kk = threadIdx.x % kBK;
    const Place i = k + kk < k1 ? p.b_k(k + kk) : nowhere();
#pragma unroll
    for (int j = 0; j < kCount; ++j) {
      const bool in = inside(rows[j].y + i.y, rows[j].x + i.x, h, w);
      copy4(&t.at(threadIdx.x / kBK + j * (kBlock / kBK), kk), in ? src + (rows[j].base + i.base) : src, in);
    }
  }
};

// Output pixel m (image, p, q) as the input row and column its window starts at.
__device__ Place window_origin(const ConvShape& g, int m) {
  const int pq = g.oh * g.ow, image = m / pq, r = m - image * pq, p = r / g.ow, q = r - p * g.ow;
  const int y = p * g.sy - g.pad_top, x = q * g.sx - g.pad_left;
  return {(image * g.c * g.h + y) * g.w + x, y, x};
}
// Pixel m of planes of `plane` pixels, `channels` planes an image, in channel 0.
__device__ int plane_start(int m, int plane, int channels) {
  const int image = m / plane;
  return image * channels * plane + (m - image * plane);
}

// The passes: sizes, loaders, and where C goes (element (m, n) at out_row(m) + n · out_stride()).
// Forward and input gradient read weights reordered so that their k runs (ky, kx, channel).
struct Forward {  // C[(image, p, q)][o] = Σ over (ky, kx, c) x · w, w as o × (ky, kx, c)
  ConvShape g;
  __host__ __device__ int m() const { return g.n * g.oh * g.ow; }
  __host__ __device__ int n() const { return g.oc; }
  __host__ __device__ int k() const { return g.c * g.kh * g.kw; }
  __device__ int a_h() const { return g.h; }
  __device__ int a_w() const { return g.w; }
  __device__ int a_channel() const { return g.h * g.w; }
  __device__ Place a_row(int m) const { return window_origin(g, m); }
  __device__ Place a_tap(int k) const {
    const int tap = k / g.c;
    return window_tap(g, k - tap * g.c, tap);
  }
  __device__ int b_row(int n) const { return n * k(); }
  __device__ int b_k(int k) const { return k; }
  __device__ int out_row(int m) const { return plane_start(m, g.oh * g.ow, g.oc); }
  __device__ int out_stride() const { return g.oh * g.ow; }
};

// Stride 1: input (y, x) meets output (y + pad − ky·dy, x + pad − kx·dx); w as c × (ky, kx, o).
struct InputGradient {
  ConvShape g;
  __host__ __device__ int m() const { return g.n * g.h * g.w; }
  __host__ __device__ int n() const { return g.c; }
  __host__ __device__ int k() const { return g.oc * g.kh * g.kw; }
  __device__ int a_h() const { return g.oh; }
  __device__ int a_w() const { return g.ow; }
  __device__ int a_channel() const { return g.oh * g.ow; }
  __device__ Place a_row(int m) const {
    const int hw = g.h * g.w, image = m / hw, r = m - image * hw, py = r / g.w, px = r - py * g.w;
    const int y = py + g.pad_top, x = px + g.pad_left;
    return {(image * g.oc * g.oh + y) * g.ow + x, y, x};
  }
  __device__ Place a_tap(int k) const {
    const int tap = k / g.oc, o = k - tap * g.oc, ky = tap / g.kw, kx = tap - ky * g.kw;
    const int y = -ky * g.dy, x = -kx * g.dx;
    return {(o * g.oh + y) * g.ow + x, y, x};
  }
  __device__ int b_row(int n) const { return n * k(); }
  __device__ int b_k(int k) const { return k; }
  __device__ int out_row(int m) const { return plane_start(m, g.h * g.w, g.c); }
  __device__ int out_stride() const { return g.h * g.w; }
};

struct WeightGradient {  // C[o][(c, ky, kx)] = Σ over (image, p, q) dz · x
  ConvShape g;
  __host__ __device__ int m() const { return g.oc; }
  __host__ __device__ int n() const { return g.c * g.kh * g.kw; }
  __host__ __device__ int k() const { return g.n * g.oh * g.ow; }
  __device__ int a_row(int m) const { return m * g.oh * g.ow; }
  __device__ int a_k(int k) const { return plane_start(k, g.oh * g.ow, g.oc); }  // 4 in a row: oh·ow % 4 == 0
  __device__ int b_h() const { return g.h; }
  __device__ int b_w() const { return g.w; }
  __device__ Place b_row(int n) const {
    const int window = g.kh * g.kw, c = n / window;
    return window_tap(g, c, n - c * window);
  }
  __device__ Place b_k(int k) const { return window_origin(g, k); }
  __device__ int out_row(int m) const { return m * n(); }
  __device__ int out_stride() const { return 1; }
};

// Fragment values as tf32 parts: big, and with kExact the remainder's.
template <bool kExact, int N>
__device__ void split(const float (&v)[N], uint32_t (&big)[N], uint32_t (&small)[N]) {
#pragma unroll
  for (int e = 0; e < N; ++e) {
    big[e] = tf32(v[e]);
    if (kExact) small[e] = tf32(v[e] - __uint_as_float(big[e]));
  }
}

// A BM × BN tile of C over k in [blockIdx.z · k_split, + k_split), in stages of kBK through a
// ring of kStages in shared memory filled by asynchronous copies, kStages − 1 in flight while
// one is multiplied.
template <class P, class LA, class LB, int BM, int BN, bool kExact>
__global__ void __launch_bounds__(kBlock) tensor_kernel(P p, const float* __restrict__ a,
                                                        const float* __restrict__ b, const float* bias,
                                                        NeuronDescriptor nd, float* __restrict__ out, int k_split,
                                                        int split_stride) {
  constexpr int MT = BM / 32, NT = BN / 16;  // a warp's 16 × 8 fragments
  __shared__ __align__(16) typename LA::Tile sa[kStages];
  __shared__ __align__(16) typename LB::Tile sb[kStages];
  const int M = p.m(), N = p.n(), m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int k0 = blockIdx.z * k_split, k1 = min(p.k(), k0 + k_split), steps = (k1 - k0 + kBK - 1) / kBK;
  const LA la(p, a, m0, M, k1);
  const LB lb(p, b, n0, N, k1);
  auto issue = [&](int step) {
    if (step < steps) {
      la.issue(p, k0 + step * kBK, sa[step % kStages]);
      lb.issue(p, k0 + step * kBK, sb[step % kStages]);
    }
    commit();
  };
  for (int step = 0; step < kStages - 1; ++step) issue(step);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int wm = (warp & 1) * (BM / 2), wn = (warp >> 1) * (BN / 2);
  float acc[MT][NT][4] = {};
  for (int s = 0; s < steps; ++s) {
    wait_pending<kStages - 2>();  // stage s has landed (this thread's copies)
    __syncthreads();              // everyone's, and stage s − 1's products are done
    issue(s + kStages - 1);
    const auto& A = sa[s % kStages];
    const auto& B = sb[s % kStages];
    // The tensor cores truncate as they accumulate: a stage's products go to fresh sums that
    // are then added with rounding, so no running total passes through them.
    float part[MT][NT][4] = {};
#pragma unroll
    for (int k8 = 0; k8 < kBK; k8 += 8) {
      uint32_t ab[MT][4], as[MT][4], bb[NT][2], bs[NT][2];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const int r = wm + i * 16 + g;
        const float v[4] = {A.at(r, k8 + t), A.at(r + 8, k8 + t), A.at(r, k8 + t + 4), A.at(r + 8, k8 + t + 4)};
        split<kExact>(v, ab[i], as[i]);
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int c = wn + j * 8 + g;
        const float v[2] = {B.at(c, k8 + t), B.at(c, k8 + t + 4)};
        split<kExact>(v, bb[j], bs[j]);
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          if (kExact) {
            mma(part[i][j], as[i], bb[j]);
            mma(part[i][j], ab[i], bs[j]);
          }
          mma(part[i][j], ab[i], bb[j]);
        }
    }
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] += part[i][j][e];
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

template <class P, class LA, class LB, int BM, int BN>
void launch(cudaStream_t s, const P& p, int splits, int k_split, bool exact, const float* a, const float* b,
            const float* bias, const NeuronDescriptor& nd, float* out) {
  const dim3 grid((p.m() + BM - 1) / BM, (p.n() + BN - 1) / BN, splits);
  const int stride = p.m() * p.n();
  if (exact)
    tensor_kernel<P, LA, LB, BM, BN, true><<<grid, kBlock, 0, s>>>(p, a, b, bias, nd, out, k_split, stride);
  else
    tensor_kernel<P, LA, LB, BM, BN, false><<<grid, kBlock, 0, s>>>(p, a, b, bias, nd, out, k_split, stride);
}

// Forward and input gradient: a grouped operand times reordered weights. Narrow outputs (at
// most 32 columns) take half-width tiles; products too short to give the GPU two tiles a
// multiprocessor at 64 rows, half-height ones.
template <class P>
void launch_grouped(cudaStream_t s, const P& p, bool exact, const float* a, const float* w, const float* bias,
                    const NeuronDescriptor& nd, float* out) {
  const int m = p.m(), n = p.n(), k = p.k();
  const bool narrow = n <= 32, low = static_cast<long>((m + 63) / 64) * ((n + 63) / 64) < 2L * multiprocessors();
  if (narrow && low)
    launch<P, Grouped<32, P>, Contiguous<32, P, false>, 32, 32>(s, p, 1, k, exact, a, w, bias, nd, out);
  else if (narrow)
    launch<P, Grouped<64, P>, Contiguous<32, P, false>, 64, 32>(s, p, 1, k, exact, a, w, bias, nd, out);
  else if (low)
    launch<P, Grouped<32, P>, Contiguous<64, P, false>, 32, 64>(s, p, 1, k, exact, a, w, bias, nd, out);
  else
    launch<P, Grouped<64, P>, Contiguous<64, P, false>, 64, 64>(s, p, 1, k, exact, a, w, bias, nd, out);
}

// Weight gradient: its k (every output pixel) split so the GPU holds about four tiles a
// multiprocessor (two left it waiting on latencies: 74 against 61 µs for the digit
// network's second layer at batch 64), each split at least 256 deep.
int weight_gradient_splits(const ConvShape& g, int* k_split) {
  const long k = static_cast<long>(g.n) * g.oh * g.ow;
  const int tiles = ((g.oc + 63) / 64) * ((g.c * g.kh * g.kw + 63) / 64);
  const long want = std::max(1L, std::min<long>((4L * multiprocessors() + tiles - 1) / tiles, k / 256));
  *k_split = static_cast<int>(((k + want - 1) / want + kBK - 1) / kBK * kBK);
  return static_cast<int>((k + *k_split - 1) / *k_split);
}

bool sizes_fit(const ConvShape& g) {
  const auto within = [](long v) { return v < (1L << 28); };  // every offset stays in int
  return device_attribute<cudaDevAttrComputeCapabilityMajor>() >= 8 &&
         within(static_cast<long>(g.n) * g.c * g.h * g.w) && within(static_cast<long>(g.n) * g.oc * g.oh * g.ow) &&
         within(static_cast<long>(g.oc) * g.c * g.kh * g.kw);
}

}  // namespace

bool tensor_convolution_fits(const ConvShape& g) { return g.c % kBK == 0 && sizes_fit(g); }
bool tensor_input_gradient_fits(const ConvShape& g) {
  return g.sy == 1 && g.sx == 1 && g.oc % kBK == 0 && sizes_fit(g);
}
bool tensor_weight_gradient_fits(const ConvShape& g, const float* dz) {
  return g.oh * g.ow % 4 == 0 && reinterpret_cast<uintptr_t>(dz) % 16 == 0 && sizes_fit(g);
}

void tensor_convolution(cudaStream_t s, const ConvShape& g, bool exact, const float* x, const float* w,
                        const float* bias, const NeuronDescriptor& nd, float* y, float* reordered) {
  const int dims[3] = {g.oc, g.c, g.kh * g.kw}, perm[3] = {0, 2, 1};  // o × (ky, kx, c)
  permute(s, w, reordered, dims, perm);
  launch_grouped(s, Forward{g}, exact, x, reordered, bias, nd, y);
  check_launch("convolution");
}

void tensor_input_gradient(cudaStream_t s, const ConvShape& g, bool exact, const float* dz, const float* w,
                           float* dx, float* reordered) {
  const int dims[3] = {g.oc, g.c, g.kh * g.kw}, perm[3] = {1, 2, 0};  // c × (ky, kx, o)
  permute(s, w, reordered, dims, perm);
  launch_grouped(s, InputGradient{g}, exact, dz, reordered, nullptr, NeuronDescriptor{}, dx);
  check_launch("convolution_gradient");
}

size_t tensor_weight_gradient_partial(const ConvShape& g) {
  int k_split = 0;
  const int splits = weight_gradient_splits(g, &k_split);
  return splits > 1 ? static_cast<size_t>(splits) * g.oc * g.c * g.kh * g.kw : 0;
}

void tensor_weight_gradient(cudaStream_t s, const ConvShape& g, bool exact, const float* x, const float* dz,
                            float* dw, float* partial) {
  int k_split = 0;
  const int splits = weight_gradient_splits(g, &k_split), n = g.c * g.kh * g.kw;
  using P = WeightGradient;
  launch<P, Contiguous<64, P, true>, Gathered<64, P>, 64, 64>(s, P{g}, splits, k_split, exact, dz, x, nullptr,
                                                              NeuronDescriptor{}, splits > 1 ? partial : dw);
  if (splits > 1) column_totals(s, partial, splits, g.oc * n, g.oc * n, dw, nullptr);
  check_launch("convolution_gradient");
}

}  // namespace nngraph::cuda
