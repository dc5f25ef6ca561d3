// Direct convolutions for few taps per output (C·kh·kw ≤ kDirectMaxTaps, one group), such as
// a network's first layer on one-channel images. cuDNN's general kernels run such shapes far
// below the GPU's speed (the digit network's 1→32 5×5 layer at batch 64: 43 µs forward); here
// the forward pass is a few FMAs per input load with the bias and neuron applied in registers,
// and the weight gradient a product over pixel chunks that also sums the bias gradient and
// applies the fused neuron's derivative as it loads dY. The weight gradient also reads
// channels-last images and half storage (a half graph's first layer), summing in float32.
#include <type_traits>

#include "common.cuh"
#include "conv.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

// Per tap t = (ci·kh + ky)·kw + kx, in shared memory as one 16-byte load: its row offset in
// the window (.x), its column offset (.y) and its offset in the image (.z: channel, row, column).
struct Taps {
  int4 at[kDirectMaxTaps];
};

// Elements between neighbours of x along its channels, rows and columns (NCHW or NHWC).
struct Strides {
  int channel, row, column;
};
__device__ inline Strides x_strides(const ConvShape& g) {
  return g.x_last ? Strides{1, g.w * g.c, g.c} : Strides{g.h * g.w, g.w, 1};
}

// Taps in the filters' order: OIHW's (channel, row, column), or KRSC's (row, column, channel).
__device__ void load_taps(const ConvShape& g, Taps& taps, bool krsc = false) {
  const int window = g.kh * g.kw;
  const Strides s = x_strides(g);
  for (int t = threadIdx.x; t < g.c * window; t += blockDim.x) {
    const int ci = krsc ? t % g.c : t / window, tap = krsc ? t / g.c : t - ci * window;
    const int ky = tap / g.kw, kx = tap - ky * g.kw;
    const int y = ky * g.dy, x = kx * g.dx;
    taps.at[t] = make_int4(y, x, ci * s.channel + y * s.row + x * s.column, 0);
  }
}

// The forward pass's shared state for a tile of OT output channels from o0: its weights
// tap-major (rows padded against bank conflicts) and the taps.
template <int OT>
struct Staged {
  static constexpr int WS = OT + 4;
  __align__(16) float ws[kDirectMaxTaps * WS];
  Taps taps;
};
template <int OT, class T>
__device__ void stage(const ConvShape& g, const T* __restrict__ w, int o0, Staged<OT>& s) {
  const int count = g.c * g.kh * g.kw, padded = (count + 3) & ~3;
  for (int i = threadIdx.x; i < OT * padded; i += blockDim.x) {  // coalesced: w's rows are o-major
    const int j = i / padded, t = i - j * padded;
    s.ws[t * Staged<OT>::WS + j] = o0 + j < g.oc && t < count ? ld(w[(o0 + j) * count + t]) : 0.f;
  }
  load_taps(g, s.taps, g.x_last);
}

// acc = the tile's sums over output pixel q's window (q < n·oh·ow), so each input value feeds
// OT FMAs from OT/4 float4 loads; taps go four at a time, their loads issued together.
template <int OT, class T>
__device__ void window_sums(const ConvShape& g, const Staged<OT>& s, const T* __restrict__ x, unsigned q,
                            float (&acc)[OT]) {
  constexpr int WS = Staged<OT>::WS;
  const int count = g.c * g.kh * g.kw;
  const unsigned plane = g.oh * g.ow, img = q / plane, p = q - img * plane, oy = p / g.ow, ox = p - oy * g.ow;
  const int y0 = static_cast<int>(oy) * g.sy - g.pad_top, x0 = static_cast<int>(ox) * g.sx - g.pad_left;
  const T* xi = x + img * g.c * g.h * g.w;
  const Strides stride = x_strides(g);
  const int corner = y0 * stride.row + x0 * stride.column;  // may be negative: only in-bounds taps are read
#pragma unroll
  for (int j = 0; j < OT; ++j) acc[j] = 0.f;
  for (int t0 = 0; t0 < count; t0 += 4) {
    float v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int4 tap = s.taps.at[min(t0 + u, count - 1)];  // past the end: 0 (its weights are 0 too)
      v[u] = t0 + u < count && inside(y0 + tap.x, x0 + tap.y, g.h, g.w) ? ld(xi[corner + tap.z]) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const float4* wt = reinterpret_cast<const float4*>(s.ws + (t0 + u) * WS);
#pragma unroll
      for (int j = 0; j < OT / 4; ++j) {
        const float4 k = wt[j];
        acc[4 * j] = fmaf(k.x, v[u], acc[4 * j]);
        acc[4 * j + 1] = fmaf(k.y, v[u], acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(k.z, v[u], acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(k.w, v[u], acc[4 * j + 3]);
      }
    }
  }
}

// A thread per output pixel and a tile of OT output channels (blockIdx.y), the bias and neuron
// applied in registers. Channels-last, a pixel's OT outputs are neighbours, stored in 16-byte
// packs where `packs`.
template <int OT, class T, class F>
__global__ void __launch_bounds__(128) direct_forward_kernel(ConvShape g, const T* __restrict__ x,
                                                             const T* __restrict__ w, const float* bias,
                                                             F neuron, bool packs, T* __restrict__ y) {
  __shared__ Staged<OT> staged;
  const int o0 = blockIdx.y * OT;
  stage(g, w, o0, staged);
  __syncthreads();
  const unsigned plane = g.oh * g.ow, q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= static_cast<unsigned>(g.n) * plane) return;
  const unsigned img = q / plane, p = q - img * plane;
  float acc[OT];
  window_sums(g, staged, x, q, acc);
#pragma unroll
  for (int j = 0; j < OT; ++j) acc[j] = neuron(acc[j] + (bias && o0 + j < g.oc ? bias[o0 + j] : 0.f));
  if (!g.y_last) {
    T* out = y + (img * g.oc + o0) * plane + p;
#pragma unroll
    for (int j = 0; j < OT; ++j)
      if (o0 + j < g.oc) out[j * plane] = st<T>(acc[j]);
    return;
  }
  T* out = y + (img * plane + p) * g.oc + o0;
  if constexpr (OT % kPack<T> == 0) {
    if (packs) {  // oc a multiple of the pack: a pack is inside or past the channels whole
#pragma unroll
      for (int j = 0; j < OT; j += kPack<T>)
        if (o0 + j < g.oc) store_values<kPack<T>>(out + j, acc + j);
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < OT; ++j)
    if (o0 + j < g.oc) out[j] = st<T>(acc[j]);
}

// db[o] = Σ over pixels of dy[o, pixel]·f'(pre[o, pixel]) with pre = x ∗ W + b computed again
// as the forward pass computes it, never stored: the speed run's whitening layer reads its
// 3-channel input again rather than its 24-channel result. Threads walk the pixels grid-stride
// for a tile of OT channels (blockIdx.y); a block's sums go to its row of `partial` (oc wide).
template <int OT, class T, class D>
__global__ void __launch_bounds__(128) direct_bias_gradient_kernel(ConvShape g, const T* __restrict__ x,
                                                                   const T* __restrict__ w, const float* bias,
                                                                   const T* __restrict__ dy, D derivative,
                                                                   bool packs, float* __restrict__ partial) {
  __shared__ Staged<OT> staged;
  __shared__ float warp_sums[4][OT];
  const int o0 = blockIdx.y * OT;
  stage(g, w, o0, staged);
  float b[OT], total[OT];
#pragma unroll
  for (int j = 0; j < OT; ++j) {
    b[j] = bias && o0 + j < g.oc ? bias[o0 + j] : 0.f;
    total[j] = 0.f;
  }
  __syncthreads();
  const unsigned plane = g.oh * g.ow, pixels = static_cast<unsigned>(g.n) * plane;
  for (unsigned q = blockIdx.x * blockDim.x + threadIdx.x; q < pixels; q += gridDim.x * blockDim.x) {
    float acc[OT], d[OT];
    window_sums(g, staged, x, q, acc);
    const unsigned img = q / plane, p = q - img * plane;
    bool loaded = false;
    if (g.y_last) {
      const T* at = dy + static_cast<size_t>(q) * g.oc + o0;
      if constexpr (OT % kPack<T> == 0) {
        if (packs) {  // oc a multiple of the pack: a pack is inside or past the channels whole
#pragma unroll
          for (int j = 0; j < OT; j += kPack<T>) {
            if (o0 + j < g.oc) {
              load_values<kPack<T>>(at + j, d + j);
            } else {
#pragma unroll
              for (int k = 0; k < kPack<T>; ++k) d[j + k] = 0.f;
            }
          }
          loaded = true;
        }
      }
      if (!loaded) {
#pragma unroll
        for (int j = 0; j < OT; ++j) d[j] = o0 + j < g.oc ? ld(at[j]) : 0.f;
      }
    } else {
      const T* at = dy + (static_cast<size_t>(img) * g.oc + o0) * plane + p;
#pragma unroll
      for (int j = 0; j < OT; ++j) d[j] = o0 + j < g.oc ? ld(at[static_cast<size_t>(j) * plane]) : 0.f;
    }
#pragma unroll
    for (int j = 0; j < OT; ++j) total[j] = fmaf(d[j], derivative(acc[j] + b[j]), total[j]);
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int j = 0; j < OT; ++j) {
    float v = total[j];
#pragma unroll
    for (int step = 16; step > 0; step /= 2) v += __shfl_xor_sync(0xffffffffu, v, step);
    if (lane == 0) warp_sums[warp][j] = v;
  }
  __syncthreads();
  const int j = threadIdx.x;
  if (j < OT && o0 + j < g.oc)
    partial[static_cast<size_t>(blockIdx.x) * g.oc + o0 + j] =
        warp_sums[0][j] + warp_sums[1][j] + warp_sums[2][j] + warp_sums[3][j];
}

// dW[o, t] = Σ over pixels of dz[o, pixel]·window(pixel)[t], db[o] = Σ dz[o, pixel], with
// dz = dy·f'(y). Each block walks chunks of kChunk pixels (of all images, flattened) for a
// tile of 32 output channels: the chunk's dz (pixel-major) and windows go to shared memory,
// then each thread multiplies 4 channels by 4 taps over its share of the chunk's pixels.
// KG groups of four taps cover the taps; 8·KG threads cover a tile and the block's 256
// threads split the chunk's pixels S ways. The bias sums are kept by the threads that load
// dz. A block's sums go to `partial` (its row: oc·taps weights, then oc biases);
// column_totals adds the rows.
constexpr int kChunk = 64, kTile = 32, kLoaders = 256 / kChunk;

// Floats of shared memory: a chunk's windows and dz, or the sums at the end.
template <int KG>
__host__ __device__ constexpr int weight_gradient_shared() {
  constexpr int chunk = kChunk * (4 * KG + 4) + kChunk * (kTile + 4), sums = 256 * 16 + kTile * kChunk;
  return chunk > sums ? chunk : sums;
}

// Blocks resident per multiprocessor: a block waits on each chunk's loads in turn, so the
// more side by side, the more loads in flight (up to 32 taps, few enough registers for 4).
__host__ __device__ constexpr int weight_gradient_residency(int kg) { return kg <= 8 ? 4 : 2; }
// The kernel variant for `count` taps: the groups of four taps its threads cover.
int tap_groups(int count) { return count <= 16 ? 4 : count <= 32 ? 8 : 16; }

template <int KG, class T, class D>
__global__ void __launch_bounds__(256, weight_gradient_residency(KG))
    direct_weight_gradient_kernel(ConvShape g, const T* __restrict__ x, const T* __restrict__ dy, const T* y,
                                  D derivative, bool packs, float* __restrict__ partial) {
  constexpr int TK = 4 * KG, S = 256 / (8 * KG), XS = TK + 4, DS = kTile + 4;  // +4: fewer bank conflicts
  __shared__ __align__(16) float smem[weight_gradient_shared<KG>()];
  __shared__ Taps taps;
  float* xs = smem;
  float* ds = smem + kChunk * XS;
  load_taps(g, taps);
  const int count = g.c * g.kh * g.kw, o0 = blockIdx.y * kTile, tid = threadIdx.x;
  const int cover = tid % (8 * KG), split = tid / (8 * KG), o4 = cover % 8, t4 = cover / 8;
  const unsigned plane = g.oh * g.ow, total = static_cast<unsigned>(g.n) * plane;
  const unsigned chunks = (total + kChunk - 1) / kChunk;
  // This thread loads pixel `mine` of each chunk: NCHW, a warp reads a channel of 32 neighbouring
  // pixels; NHWC, a pixel's kLoaders threads its kTile channels, kEach neighbours each.
  constexpr int kEach = kTile / kLoaders;
  const int mine = g.y_last ? tid / kLoaders : tid % kChunk, first = g.y_last ? tid % kLoaders : tid / kChunk;
  auto loaded = [&](int k) { return g.y_last ? first * kEach + k : first + k * kLoaders; };  // dzv[k]'s channel
  const Strides xstride = x_strides(g);
  const unsigned pixel = g.y_last ? g.oc : 1, channel = g.y_last ? 1 : plane;  // dy's strides
  // A chunk's values are loaded into registers while the previous chunk's products run.
  float dzv[kEach], xv[TK / kLoaders];
  auto load = [&](unsigned chunk) {
    const unsigned q = chunk * kChunk + mine;
    const bool live = q < total;
    const unsigned img = live ? q / plane : 0, p = q - img * plane, oy = p / g.ow, ox = p - oy * g.ow;
    const int y0 = static_cast<int>(oy) * g.sy - g.pad_top, x0 = static_cast<int>(ox) * g.sx - g.pad_left;
    const T* xi = x + img * g.c * g.h * g.w + (y0 * xstride.row + x0 * xstride.column);
    const unsigned at = img * g.oc * plane + p * pixel + o0 * channel;
    if (packs) {  // NHWC, whole aligned packs: kEach channels in kEach / kPack<T> loads
      const unsigned o = first * kEach;
#pragma unroll
      for (int k = 0; k < kEach; ++k) dzv[k] = 0.f;
      if (live && o0 + o < static_cast<unsigned>(g.oc)) {
#pragma unroll
        for (int k = 0; k < kEach; k += kPack<T>) {
          load_values<kPack<T>>(dy + at + o + k, dzv + k);
          if constexpr (!std::is_same_v<D, NoDerivative>) {
            float v[kPack<T>];
            load_values<kPack<T>>(y + at + o + k, v);
#pragma unroll
            for (int j = 0; j < kPack<T>; ++j) dzv[k + j] *= derivative(v[j]);
          }
        }
      }
    } else {
#pragma unroll
      for (int k = 0; k < kEach; ++k) {
        const int o = loaded(k);
        dzv[k] = 0.f;
        if (live && o0 + o < g.oc) {
          dzv[k] = ld(dy[at + o * channel]);
          if constexpr (!std::is_same_v<D, NoDerivative>) dzv[k] *= derivative(ld(y[at + o * channel]));
        }
      }
    }
#pragma unroll
    for (int k = 0; k < TK / kLoaders; ++k) {
      const int t = first + k * kLoaders;
      xv[k] = 0.f;
      if (live && t < count) {
        const int4 tap = taps.at[t];
        if (inside(y0 + tap.x, x0 + tap.y, g.h, g.w)) xv[k] = ld(xi[tap.z]);
      }
    }
  };
  float acc[4][4] = {}, bias[kEach] = {};
  __syncthreads();  // taps
  if (blockIdx.x < chunks) load(blockIdx.x);
  for (unsigned chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
    __syncthreads();  // the last chunk's products are done with shared memory
#pragma unroll
    for (int k = 0; k < kEach; ++k) {
      ds[mine * DS + loaded(k)] = dzv[k];
      bias[k] += dzv[k];
    }
#pragma unroll
    for (int k = 0; k < TK / kLoaders; ++k) xs[mine * XS + first + k * kLoaders] = xv[k];
    __syncthreads();
    if (chunk + gridDim.x < chunks) load(chunk + gridDim.x);
#pragma unroll 4
    for (int p = split; p < kChunk; p += S) {
      const float4 d = *reinterpret_cast<const float4*>(ds + p * DS + 4 * o4);
      const float4 v = *reinterpret_cast<const float4*>(xs + p * XS + 4 * t4);
      const float dv[4] = {d.x, d.y, d.z, d.w}, wv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(dv[i], wv[j], acc[i][j]);
    }
  }
  // The splits' products and the loaders' bias sums, each added in a fixed order.
  __syncthreads();
  float* sums = smem;                  // [thread][16]
  float* bias_sums = smem + 256 * 16;  // [channel][pixel slot]
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) sums[tid * 16 + i * 4 + j] = acc[i][j];
#pragma unroll
  for (int k = 0; k < kEach; ++k) bias_sums[loaded(k) * kChunk + mine] = bias[k];
  __syncthreads();
  float* row = partial + static_cast<size_t>(blockIdx.x) * (g.oc * count + g.oc);
  if (tid < kTile && o0 + tid < g.oc) {
    float b = 0.f;
    for (int i = 0; i < kChunk; ++i) b += bias_sums[tid * kChunk + i];
    row[g.oc * count + o0 + tid] = b;
  }
  if (split != 0) return;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int o = o0 + 4 * o4 + i;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float sum = 0.f;
      for (int s = 0; s < S; ++s) sum += sums[(tid + s * 8 * KG) * 16 + i * 4 + j];
      if (o < g.oc && 4 * t4 + j < count) row[o * count + 4 * t4 + j] = sum;
    }
  }
}

}  // namespace

bool direct_convolution_fits(const ConvShape& g) {
  const size_t in = static_cast<size_t>(g.n) * g.c * g.h * g.w, out = static_cast<size_t>(g.n) * g.oc * g.oh * g.ow;
  return g.c * g.kh * g.kw <= kDirectMaxTaps && fits_32(in) && fits_32(out + g.oh * g.ow * kTile);
}

namespace {

// The widest channel tile (most FMAs per load; at most the channels, rounded up to 8) that
// still gives the GPU about half its threads: a thread's work is one long dependent walk over
// the taps, so few threads stall.
int channel_tile(const ConvShape& g) {
  const size_t pixels = static_cast<size_t>(g.n) * g.oh * g.ow, want = static_cast<size_t>(multiprocessors()) * 1024;
  int tile = 8;
  for (int t : {16, 24, 32})
    if (t <= (g.oc + 7) / 8 * 8 && pixels * ((g.oc + t - 1) / t) >= want) tile = t;
  return tile;
}

// launch(std::integral_constant<int, tile>) for g's channel tile.
template <class L>
void with_channel_tile(const ConvShape& g, L&& launch) {
  switch (channel_tile(g)) {
    case 8: return launch(std::integral_constant<int, 8>{});
    case 16: return launch(std::integral_constant<int, 16>{});
    case 24: return launch(std::integral_constant<int, 24>{});
    default: return launch(std::integral_constant<int, 32>{});
  }
}

}  // namespace

template <class T>
void direct_convolution(cudaStream_t s, const ConvShape& g, const T* x, const T* w, const float* bias,
                        const NeuronDescriptor& nd, T* y) {
  const unsigned pixels = static_cast<unsigned>(g.n) * g.oh * g.ow, blocks = (pixels + 127) / 128;
  const bool packs = g.y_last && g.oc % kPack<T> == 0 && packed(y);
  with_neuron(nd, [&](auto neuron) {
    with_channel_tile(g, [&](auto tile) {
      constexpr int OT = decltype(tile)::value;
      direct_forward_kernel<OT, T, decltype(neuron)>
          <<<dim3(blocks, (g.oc + OT - 1) / OT), 128, 0, s>>>(g, x, w, bias, neuron, packs, y);
    });
  });
  check_launch("convolution");
}

template <class T>
void direct_bias_gradient(cudaStream_t s, const ConvShape& g, const T* x, const T* w, const float* bias, const T* dy,
                          const NeuronDescriptor& nd, float* db, float* partial) {
  const int rows = direct_bias_gradient_rows(g);
  const bool packs = g.y_last && g.oc % kPack<T> == 0 && packed(dy);
  with_derivative(nd, [&](auto derivative) {
    with_channel_tile(g, [&](auto tile) {
      constexpr int OT = decltype(tile)::value;
      direct_bias_gradient_kernel<OT, T, decltype(derivative)>
          <<<dim3(rows, (g.oc + OT - 1) / OT), 128, 0, s>>>(g, x, w, bias, dy, derivative, packs, partial);
    });
  });
  column_totals<T>(s, partial, rows, g.oc, 0, nullptr, db);
  check_launch("convolution_bias_gradient");
}

int direct_bias_gradient_rows(const ConvShape& g) {
  const long blocks = (static_cast<long>(g.n) * g.oh * g.ow + 127) / 128;
  const long tiles = (g.oc + channel_tile(g) - 1) / channel_tile(g);
  return static_cast<int>(std::max(1L, std::min(blocks, 4L * multiprocessors() / tiles)));
}

int direct_weight_gradient_rows(const ConvShape& g) {
  const int tiles = (g.oc + kTile - 1) / kTile;
  const long chunks = (static_cast<long>(g.n) * g.oh * g.ow + kChunk - 1) / kChunk;
  // A few chunks per block at least: each block ends by writing all its sums.
  const long resident = weight_gradient_residency(tap_groups(g.c * g.kh * g.kw)) * multiprocessors();
  return static_cast<int>(std::max(1L, std::min<long>((chunks + 2) / 3, resident / tiles)));
}

template <class T>
void direct_weight_gradient(cudaStream_t s, const ConvShape& g, const T* x, const T* dy, const T* y,
                            const NeuronDescriptor& nd, T* dw, float* db, float* partial) {
  const int count = g.c * g.kh * g.kw, rows = direct_weight_gradient_rows(g);
  const dim3 grid(rows, (g.oc + kTile - 1) / kTile);
  const bool packs = g.y_last && g.oc % (kTile / kLoaders) == 0 && packed(dy) && (!y || packed(y));
  with_derivative(y ? nd : NeuronDescriptor{}, [&](auto derivative) {
    const int kg = tap_groups(count);
    if (kg == 4)
      direct_weight_gradient_kernel<4><<<grid, 256, 0, s>>>(g, x, dy, y, derivative, packs, partial);
    else if (kg == 8)
      direct_weight_gradient_kernel<8><<<grid, 256, 0, s>>>(g, x, dy, y, derivative, packs, partial);
    else
      direct_weight_gradient_kernel<16><<<grid, 256, 0, s>>>(g, x, dy, y, derivative, packs, partial);
  });
  column_totals(s, partial, rows, g.oc * count + g.oc, g.oc * count, dw, db);
  check_launch("convolution_gradient");
}

#define INSTANTIATE(T)                                                                                        \
  template void direct_convolution(cudaStream_t, const ConvShape&, const T*, const T*, const float*,          \
                                   const NeuronDescriptor&, T*);                                              \
  template void direct_weight_gradient(cudaStream_t, const ConvShape&, const T*, const T*, const T*,          \
                                       const NeuronDescriptor&, T*, float*, float*);                          \
  template void direct_bias_gradient(cudaStream_t, const ConvShape&, const T*, const T*, const float*,        \
                                     const T*, const NeuronDescriptor&, float*, float*);
NNGRAPH_STORAGE_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace nngraph::cuda
