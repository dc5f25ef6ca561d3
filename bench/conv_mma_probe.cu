// Can a convolution kernel of our own come near cuDNN's on Hopper, and what do batch norm's
// passes cost inside it? An implicit-GEMM forward convolution (bf16 NHWC images, KRSC filters,
// float32 sums) in two kinds: mma.sync m16n8k16 with four stages of asynchronous copies, and
// Hopper's warpgroup wgmma over 128-byte-swizzled stages. Each runs alone and with batch norm
// folded in: the input's scale, shift and relu applied as each stage lands (the previous layer's
// normalize pass), and the output's per-channel sum and sum of squares taken from the tile
// before it is stored (the statistics pass). Each variant is checked against cuDNN's output on
// the same (or normalized) input and the statistics against the host's sums of the stored
// output; times in microseconds beside cuDNN's quickest algorithm by Find (and, for a 1×1
// window, cuBLAS's product). Not part of the library; built by hand on a machine with cuDNN:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a bench/conv_mma_probe.cu -lcudnn -lcublas -o /tmp/mma && /tmp/mma [shapes]
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

using bf16 = __nv_bfloat16;

static void cu(cudaError_t e, int line) {
  if (e != cudaSuccess) { fprintf(stderr, "cuda line %d: %s\n", line, cudaGetErrorString(e)); exit(1); }
}
static void dn(cudnnStatus_t s, int line) {
  if (s != CUDNN_STATUS_SUCCESS) { fprintf(stderr, "cudnn line %d: %s\n", line, cudnnGetErrorString(s)); exit(1); }
}
#define CU(x) cu((x), __LINE__)
#define DN(x) dn((x), __LINE__)

constexpr int BK = 32, STAGES = 4;

struct Conv {
  const bf16* x;        // n × h × w × c
  const bf16* filt;     // k × r × s × c
  bf16* y;              // n × h × w × k (stride 1, same size)
  const float2* norm;   // per input channel (scale, shift) with the prologue
  float2* partial;      // per row tile and output channel (sum, sum of squares) with the epilogue
  int n, h, w, c, k, r, s, pad, m, kdim;
};

__device__ inline void cp_async16(void* dst, const void* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
__device__ inline void cp_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N>
__device__ inline void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
__device__ inline void ldmatrix4(unsigned (&r)[4], const void* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ inline void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Rows of 32 values (four 16-byte chunks), the chunk swizzled so that the eight rows an
// ldmatrix reads fall in eight different bank groups.
__device__ inline int swz(int row, int chunk) { return row * BK + ((chunk ^ ((row >> 1) & 3)) << 3); }

// A k block's tap (ty, tx) and first channel for this thread's chunk: one tap of 32 channels.
struct Block {
  int ty, tx, c;
};
__device__ inline Block block_of(const Conv& p, int k0, int chunk) {
  const int tap = k0 / p.c, ty = tap / p.s;
  return {ty, tap - ty * p.s, k0 - tap * p.c + chunk * 8};
}
// Where output pixel m lies: its image's first value, row and column (rows past the end lie
// outside every window, and their offsets stay in range).
struct Pixel {
  int base, y, x;
};
__device__ inline Pixel pixel_of(const Conv& p, int m) {
  if (m >= p.m) return {0, -(1 << 14), 0};
  const int hw = p.h * p.w, img = m / hw, rem = m - img * hw, y = rem / p.w;
  return {img * hw * p.c, y, rem - y * p.w};
}
// The window row a k block reads for one output pixel: its offset and whether it lies inside.
struct Tap {
  int offset;
  bool in;
};
__device__ inline Tap tap_of(const Conv& p, const Block& b, const Pixel& at) {
  const int iy = at.y + b.ty - p.pad, ix = at.x + b.tx - p.pad;
  return {at.base + (iy * p.w + ix) * p.c + b.c, iy >= 0 && iy < p.h && ix >= 0 && ix < p.w};
}

// The previous layer's batch norm + relu on 8 channels' values in place, their (scale, shift)
// from norm.
__device__ inline void normalize_chunk(uint4* at, const float2* norm) {
  uint4 v = *at;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 f = __bfloat1622float2(h[e]), lo = norm[2 * e], hi = norm[2 * e + 1];
    h[e] = __floats2bfloat162_rn(fmaxf(fmaf(f.x, lo.x, lo.y), 0.f), fmaxf(fmaf(f.y, hi.x, hi.y), 0.f));
  }
  *at = v;
}

// A block computes BM output pixels × BN output channels with WM × WN warps, each a tile of
// TM × TN; a thread copies rows THREADS / 4 apart, a 16-byte chunk of each.
template <int BM, int BN, int WM, int WN, bool PRO, bool EPI>
__global__ void __launch_bounds__(WM * WN * 32) conv_kernel(Conv p) {
  constexpr int THREADS = WM * WN * 32, ROWS = THREADS / 4, TM = BM / WM, TN = BN / WN, MT = TM / 16, NT = TN / 8;
  constexpr int AR = BM / ROWS, BR = BN / ROWS;
  static_assert(AR * ROWS == BM && BR * ROWS == BN && MT * 16 * WM == BM && NT * 8 * WN == BN && NT % 2 == 0);
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sa = reinterpret_cast<bf16*>(smem);
  bf16* sb = sa + STAGES * BM * BK;
  float2* snorm = reinterpret_cast<float2*>(sb + STAGES * BN * BK);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp % WM, wn = warp / WM;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN, chunk = tid & 3;
  if constexpr (PRO)
    for (int i = tid; i < p.c; i += THREADS) snorm[i] = p.norm[i];
  Pixel own[AR];
#pragma unroll
  for (int j = 0; j < AR; ++j) own[j] = pixel_of(p, m0 + (tid >> 2) + j * ROWS);
  const int kblocks = p.kdim / BK;
  auto load = [&](int kb, int stage) {
    const Block b = block_of(p, kb * BK, chunk);
#pragma unroll
    for (int j = 0; j < AR; ++j) {
      const Tap t = tap_of(p, b, own[j]);
      cp_async16(sa + stage * BM * BK + swz((tid >> 2) + j * ROWS, chunk), t.in ? p.x + t.offset : p.x, t.in);
    }
#pragma unroll
    for (int j = 0; j < BR; ++j) {
      const int row = (tid >> 2) + j * ROWS;
      cp_async16(sb + stage * BN * BK + swz(row, chunk), p.filt + static_cast<size_t>(n0 + row) * p.kdim + kb * BK + chunk * 8,
                 true);
    }
  };
  // The previous layer's batch norm + relu on this thread's own chunks of a landed stage;
  // rows outside the image stay zero, as the normalized image's padding is.
  auto normalize = [&](int kb, int stage) {
    const Block b = block_of(p, kb * BK, chunk);
#pragma unroll
    for (int j = 0; j < AR; ++j) {
      if (!tap_of(p, b, own[j]).in) continue;
      normalize_chunk(reinterpret_cast<uint4*>(sa + stage * BM * BK + swz((tid >> 2) + j * ROWS, chunk)), snorm + b.c);
    }
  };
  if constexpr (PRO) __syncthreads();  // the table
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < kblocks) load(s, s);
    cp_commit();
  }
  float acc[MT][NT][4] = {};
  for (int kb = 0; kb < kblocks; ++kb) {
    cp_wait<STAGES - 2>();
    const int stage = kb % STAGES;
    if constexpr (PRO) normalize(kb, stage);
    __syncthreads();
    if (kb + STAGES - 1 < kblocks) load(kb + STAGES - 1, (kb + STAGES - 1) % STAGES);
    cp_commit();
    const bf16* A = sa + stage * BM * BK;
    const bf16* B = sb + stage * BN * BK;
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      unsigned af[MT][4], bfr[NT][2];
#pragma unroll
      for (int i = 0; i < MT; ++i) ldmatrix4(af[i], A + swz(wm * TM + i * 16 + (lane & 15), kk * 2 + (lane >> 4)));
#pragma unroll
      for (int j = 0; j < NT / 2; ++j) {
        unsigned r[4];
        ldmatrix4(r, B + swz(wn * TN + j * 16 + ((lane >> 4) << 3) + (lane & 7), kk * 2 + ((lane >> 3) & 1)));
        bfr[2 * j][0] = r[0], bfr[2 * j][1] = r[1], bfr[2 * j + 1][0] = r[2], bfr[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma(acc[i][j], af[i], bfr[j][0], bfr[j][1]);
    }
  }
  cp_wait<0>();
  const int g = lane >> 2, t = lane & 3;
  float sum[NT][2] = {}, sq[NT][2] = {};
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = m0 + wm * TM + i * 16 + g + half * 8;
      if (m >= p.m) continue;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const __nv_bfloat162 v = __floats2bfloat162_rn(acc[i][j][2 * half], acc[i][j][2 * half + 1]);
        *reinterpret_cast<__nv_bfloat162*>(p.y + static_cast<size_t>(m) * p.k + n0 + wn * TN + j * 8 + 2 * t) = v;
        if constexpr (EPI) {  // the statistics of what is stored
          const float2 f = __bfloat1622float2(v);
          sum[j][0] += f.x, sum[j][1] += f.y, sq[j][0] += f.x * f.x, sq[j][1] += f.y * f.y;
        }
      }
    }
  if constexpr (EPI) {
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int d = 4; d < 32; d <<= 1) {
          sum[j][e] += __shfl_xor_sync(0xffffffffu, sum[j][e], d);
          sq[j][e] += __shfl_xor_sync(0xffffffffu, sq[j][e], d);
        }
    __syncthreads();  // the stages' memory holds the warps' sums now
    float2* red = reinterpret_cast<float2*>(smem);  // [WM][BN]
    if (g == 0)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) red[wm * BN + wn * TN + j * 8 + 2 * t + e] = {sum[j][e], sq[j][e]};
    __syncthreads();
    for (int col = tid; col < BN; col += THREADS) {
      float2 total = {0.f, 0.f};
#pragma unroll
      for (int w = 0; w < WM; ++w) total.x += red[w * BN + col].x, total.y += red[w * BN + col].y;
      p.partial[static_cast<size_t>(blockIdx.x) * p.k + n0 + col] = total;
    }
  }
}

#include "conv_wgmma.cuh"

// The row tiles' partial sums per channel: 32 channels × 8 rows a block, then atomics.
__global__ void finish_stats(const float2* partial, int tiles, int k, float2* out) {
  __shared__ float2 part[8][32];
  const int col = blockIdx.x * 32 + threadIdx.x;
  float2 s = {0.f, 0.f};
  if (col < k)
    for (int r = blockIdx.y * 8 + threadIdx.y; r < tiles; r += 8 * gridDim.y) {
      const float2 v = partial[static_cast<size_t>(r) * k + col];
      s.x += v.x, s.y += v.y;
    }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < k) {
    for (int r = 1; r < 8; ++r) s.x += part[r][threadIdx.x].x, s.y += part[r][threadIdx.x].y;
    atomicAdd(&out[col].x, s.x);
    atomicAdd(&out[col].y, s.y);
  }
}

// The reference's normalized input: relu(x · scale + shift) per channel, as bf16.
__global__ void normalize_ref(const bf16* x, const float2* norm, int c, size_t count, bf16* out) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    const float2 a = norm[i % c];
    out[i] = __float2bfloat16(fmaxf(fmaf(__bfloat162float(x[i]), a.x, a.y), 0.f));
  }
}

static cudnnHandle_t H;
static cublasHandle_t B;

struct Shape {
  int n, c, k, h, r;
};

template <class F>
static float time_us(F f, int reps = 21) {  // the median of `reps` calls after 3
  for (int i = 0; i < 3; ++i) f();
  std::vector<cudaEvent_t> ev(reps + 1);
  for (auto& e : ev) CU(cudaEventCreate(&e));
  CU(cudaEventRecord(ev[0]));
  for (int i = 0; i < reps; ++i) {
    f();
    CU(cudaEventRecord(ev[i + 1]));
  }
  CU(cudaEventSynchronize(ev[reps]));
  std::vector<float> us(reps);
  for (int i = 0; i < reps; ++i) {
    CU(cudaEventElapsedTime(&us[i], ev[i], ev[i + 1]));
    us[i] *= 1000;
  }
  for (auto& e : ev) CU(cudaEventDestroy(e));
  std::nth_element(us.begin(), us.begin() + reps / 2, us.end());
  return us[reps / 2];
}

static std::vector<float> to_host(const bf16* d, size_t count) {
  std::vector<bf16> h(count);
  CU(cudaMemcpy(h.data(), d, count * sizeof(bf16), cudaMemcpyDeviceToHost));
  std::vector<float> f(count);
  for (size_t i = 0; i < count; ++i) f[i] = __bfloat162float(h[i]);
  return f;
}

static float max_rel(const std::vector<float>& got, const std::vector<float>& want) {
  float diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) diff = std::max(diff, std::fabs(got[i] - want[i])), scale = std::max(scale, std::fabs(want[i]));
  return diff / std::max(scale, 1e-30f);
}

// One kernel over p's tiles of bm × bn: its shared-memory limit raised once per size, so that
// the timed loops only launch.
template <void (*Kernel)(Conv)>
static void launch_kernel(const Conv& p, int bm, int bn, int threads, size_t bytes) {
  static size_t allowed = 0;
  if (bytes > allowed) {
    CU(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    allowed = bytes;
  }
  Kernel<<<dim3((p.m + bm - 1) / bm, p.k / bn), threads, bytes>>>(p);
}

template <int BM_, int BN_, int WM_, int WN_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, KB = BK, KIND = 0;
  template <bool PRO, bool EPI>
  static void launch(const Conv& p) {
    const size_t bytes = STAGES * (BM + BN) * BK * sizeof(bf16) + (PRO ? p.c * sizeof(float2) : 0);
    launch_kernel<conv_kernel<BM, BN, WM_, WN_, PRO, EPI>>(p, BM, BN, WM_ * WN_ * 32, bytes);
  }
  static const char* name() {
    static char text[32];
    snprintf(text, sizeof text, "%d×%d, %d warps", BM, BN, WM_ * WN_);
    return text;
  }
};

template <int WGS, int BN_, int ST, int LAG = 1>
struct WgConfig {
  static constexpr int BM = 64 * WGS, BN = BN_, KB = WK, KIND = 1;
  template <bool PRO, bool EPI>
  static void launch(const Conv& p) {
    const size_t bytes = ST * (BM + BN) * WK * sizeof(bf16) + 1024 + (PRO ? p.c * sizeof(float2) : 0);
    launch_kernel<wg_conv_kernel<WGS, BN, ST, LAG, PRO, EPI>>(p, BM, BN, WGS * 128, bytes);
  }
  static const char* name() {
    static char text[48];
    snprintf(text, sizeof text, "wgmma %d×%d, %d stages, lag %d", BM, BN, ST, LAG);
    return text;
  }
};

template <int WGS, int BN_, int ST>
struct WsConfig {  // the warp-specialized kernel: a loading warpgroup and WGS multiplying ones
  static constexpr int BM = 64 * WGS, BN = BN_, KB = WK, KIND = 2;
  template <bool PRO, bool EPI>
  static void launch(const Conv& p) {
    const size_t bytes = ST * (BM + BN) * WK * sizeof(bf16) + 1024 + (PRO ? p.c * sizeof(float2) : 0) + 2 * ST * 8;
    launch_kernel<ws_conv_kernel<WGS, BN, ST, PRO, EPI>>(p, BM, BN, (WGS + 1) * 128, bytes);
  }
  static const char* name() {
    static char text[48];
    snprintf(text, sizeof text, "wgmma %d×%d, %d stages, loader", BM, BN, ST);
    return text;
  }
};

template <class Tuple, class F, size_t... I>
static void for_each_config(F&& f, std::index_sequence<I...>) {
  (f(std::tuple_element_t<I, Tuple>{}, static_cast<int>(I)), ...);
}
template <class Tuple, class F>
static void for_each_config(F&& f) {
  for_each_config<Tuple>(f, std::make_index_sequence<std::tuple_size_v<Tuple>>{});
}

static void run(const Shape& s) {
  const int pad = s.r / 2;
  const size_t xs = static_cast<size_t>(s.n) * s.h * s.h * s.c, ys = static_cast<size_t>(s.n) * s.h * s.h * s.k,
               ws = static_cast<size_t>(s.k) * s.r * s.r * s.c;
  std::mt19937 rng(s.c * 31 + s.k);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<bf16> hx(xs), hw(ws);
  for (auto& v : hx) v = __float2bfloat16(u(rng));
  const float wscale = 1.f / std::sqrt(static_cast<float>(s.r * s.r * s.c));
  for (auto& v : hw) v = __float2bfloat16(u(rng) * wscale);
  std::vector<float2> hn(s.c);
  for (auto& v : hn) v = {0.5f + 0.5f * (u(rng) + 1.f), 0.3f * u(rng)};
  bf16 *x, *w, *y, *yref, *xn;
  float2 *norm, *partial, *stats;
  const int tiles = static_cast<int>((static_cast<size_t>(s.n) * s.h * s.h + 63) / 64);  // of the smallest BM
  CU(cudaMalloc(&x, xs * 2));
  CU(cudaMalloc(&xn, xs * 2));
  CU(cudaMalloc(&w, ws * 2));
  CU(cudaMalloc(&y, ys * 2));
  CU(cudaMalloc(&yref, ys * 2));
  CU(cudaMalloc(&norm, s.c * sizeof(float2)));
  CU(cudaMalloc(&partial, static_cast<size_t>(tiles) * s.k * sizeof(float2)));
  CU(cudaMalloc(&stats, s.k * sizeof(float2)));
  CU(cudaMemcpy(x, hx.data(), xs * 2, cudaMemcpyHostToDevice));
  CU(cudaMemcpy(w, hw.data(), ws * 2, cudaMemcpyHostToDevice));
  CU(cudaMemcpy(norm, hn.data(), s.c * sizeof(float2), cudaMemcpyHostToDevice));
  normalize_ref<<<1024, 256>>>(x, norm, s.c, xs, xn);

  // cuDNN: NHWC bf16, float sums, tensor cores; the quickest algorithm by Find.
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t fd;
  cudnnConvolutionDescriptor_t cd;
  DN(cudnnCreateTensorDescriptor(&xd));
  DN(cudnnCreateTensorDescriptor(&yd));
  DN(cudnnCreateFilterDescriptor(&fd));
  DN(cudnnCreateConvolutionDescriptor(&cd));
  DN(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, s.n, s.c, s.h, s.h));
  DN(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, s.n, s.k, s.h, s.h));
  DN(cudnnSetFilter4dDescriptor(fd, CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, s.k, s.c, s.r, s.r));
  DN(cudnnSetConvolution2dDescriptor(cd, pad, pad, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  DN(cudnnSetConvolutionMathType(cd, CUDNN_TENSOR_OP_MATH));
  const size_t wsb = size_t(512) << 20;
  void* work;
  CU(cudaMalloc(&work, wsb));
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  int found = 0;
  DN(cudnnFindConvolutionForwardAlgorithmEx(H, xd, x, fd, w, cd, yd, yref, 8, &found, perf, work, wsb));
  const cudnnConvolutionFwdAlgo_t algo = perf[0].algo;
  const float one = 1.f, zero = 0.f;
  auto dnn = [&](const bf16* in) {
    DN(cudnnConvolutionForward(H, &one, xd, in, fd, w, cd, algo, work, wsb, &zero, yd, yref));
  };
  const float t_dnn = time_us([&] { dnn(x); });
  // A 1×1 window is a product, as the library runs it where cuBLAS is quicker: y (m × k) = x (m × c)
  // · filtersᵀ, column-major yᵀ = filters (c × k)ᵀ · xᵀ.
  float t_blas = 0;
  if (s.r == 1) {
    const int m = s.n * s.h * s.h;
    t_blas = time_us([&] {
      if (cublasGemmEx(B, CUBLAS_OP_T, CUBLAS_OP_N, s.k, m, s.c, &one, w, CUDA_R_16BF, s.c, x, CUDA_R_16BF, s.c, &zero, yref,
                       CUDA_R_16BF, s.k, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
        exit(1);
    });
  }

  Conv p{x, w, y, norm, partial, s.n, s.h, s.h, s.c, s.k, s.r, s.r, pad, s.n * s.h * s.h, s.r * s.r * s.c};
  // Every tile that divides the channels, timed plain; the quickest of each kind (mma.sync,
  // wgmma, wgmma with a loading warpgroup) then with batch norm in it.
  using Configs = std::tuple<Config<128, 128, 2, 4>, Config<128, 64, 4, 2>, Config<128, 256, 2, 4>,
                             Config<256, 128, 4, 2>, Config<64, 64, 2, 2>, WgConfig<2, 128, 4>,
                             WgConfig<2, 128, 5>, WgConfig<1, 128, 4>, WgConfig<4, 128, 4>, WgConfig<2, 64, 6>,
                             WgConfig<4, 128, 4, 0>, WgConfig<2, 128, 5, 0>, WgConfig<2, 64, 6, 0>,
                             WsConfig<2, 128, 5>, WsConfig<2, 128, 6>, WsConfig<2, 256, 4>, WsConfig<2, 64, 8>>;
  for (const int kind : {0, 1, 2}) {
  float best = 1e30f;
  int pick = -1;
  for_each_config<Configs>([&](auto c, int i) {
    using C = decltype(c);
    if (C::KIND != kind || s.k % C::BN || s.c % C::KB) return;
    const float t = time_us([&] { C::template launch<false, false>(p); });
    if (t < best) best = t, pick = i;
  });
  for_each_config<Configs>([&](auto c, int i) {
    using C = decltype(c);
    if (i != pick) return;
    const int tiles = (p.m + C::BM - 1) / C::BM;
    C::template launch<false, false>(p);
    dnn(x);
    CU(cudaDeviceSynchronize());
    const float e_plain = max_rel(to_host(y, ys), to_host(yref, ys));
    const float t_pro = time_us([&] { C::template launch<true, false>(p); });
    dnn(xn);
    CU(cudaDeviceSynchronize());
    const float e_pro = max_rel(to_host(y, ys), to_host(yref, ys));
    auto both = [&] {
      CU(cudaMemsetAsync(stats, 0, s.k * sizeof(float2)));
      C::template launch<true, true>(p);
      finish_stats<<<dim3((s.k + 31) / 32, 16), dim3(32, 8)>>>(partial, tiles, s.k, stats);
    };
    const float t_both = time_us(both);
    both();
    CU(cudaDeviceSynchronize());
    const std::vector<float> got = to_host(y, ys);
    const float e_both = max_rel(got, to_host(yref, ys));
    std::vector<double> hs(s.k, 0), hq(s.k, 0);
    for (size_t e = 0; e < ys; ++e) hs[e % s.k] += got[e], hq[e % s.k] += double(got[e]) * got[e];
    std::vector<float2> ds(s.k);
    CU(cudaMemcpy(ds.data(), stats, s.k * sizeof(float2), cudaMemcpyDeviceToHost));
    double e_stats = 0;
    for (int k = 0; k < s.k; ++k) {
      const double count = static_cast<double>(p.m), mean = hs[k] / count, var = hq[k] / count - mean * mean;
      const double gm = ds[k].x / count, gv = ds[k].y / count - gm * gm;
      e_stats = std::max({e_stats, std::fabs(gm - mean) / std::sqrt(var), std::fabs(gv - var) / var});
    }
    const double flop = 2.0 * p.m * s.k * p.kdim;
    char blas[24] = "";
    if (t_blas > 0) snprintf(blas, sizeof blas, "; cuBLAS %.1f", t_blas);
    printf("| %d×%d×%d×%d → %d, %d×%d | %.1f (algo %d%s) | %.1f (%.0f TFLOP/s; %s) | %.1f | %.1f | %.1e %.1e %.1e | %.1e |\n",
           s.n, s.h, s.h, s.c, s.k, s.r, s.r, t_dnn, static_cast<int>(algo), blas, best, flop / best * 1e-6, C::name(), t_pro,
           t_both, e_plain, e_pro, e_both, e_stats);
  });
  }
  for (void* q : {(void*)x, (void*)xn, (void*)w, (void*)y, (void*)yref, (void*)norm, (void*)partial, (void*)stats, work})
    CU(cudaFree(q));
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyFilterDescriptor(fd);
  cudnnDestroyConvolutionDescriptor(cd);
}

int main(int argc, char** argv) {  // argv[1]: how many of the shapes (all by default)
  DN(cudnnCreate(&H));
  if (cublasCreate(&B) != CUBLAS_STATUS_SUCCESS) return 1;
  cudaDeviceProp prop;
  CU(cudaGetDeviceProperties(&prop, 0));
  printf("%s, cuDNN %zu; microseconds a call, the median of 21 after 3\n", prop.name, cudnnGetVersion());
  printf("| n×h×w×c → k, window | cuDNN | ours | ours + bn/relu in | ours + bn/relu in + stats out | max error: plain, in, both | stats error |\n");
  printf("|---|---:|---:|---:|---:|---|---:|\n");
  const Shape shapes[] = {{512, 64, 64, 32, 3},   {512, 128, 128, 16, 3}, {512, 256, 256, 8, 3},  {256, 64, 64, 56, 3},
                          {256, 128, 128, 28, 3}, {256, 256, 256, 14, 3}, {256, 512, 512, 7, 3},  {256, 256, 64, 56, 1},
                          {256, 64, 256, 56, 1},  {256, 1024, 256, 14, 1}, {256, 256, 1024, 14, 1}};
  const int count = argc > 1 ? std::atoi(argv[1]) : static_cast<int>(sizeof shapes / sizeof shapes[0]);
  for (int i = 0; i < count && i < static_cast<int>(sizeof shapes / sizeof shapes[0]); ++i) run(shapes[i]);
  return 0;
}
