// Convolution passes as implicit products C = A·B on tensor cores (mma.sync m16n8k8, tf32),
// the operands gathered from the tensors as they are copied into shared memory:
//   forward         C[(image, p, q)][o] = Σ over (ky, kx, c)      x · w
//   input gradient  C[(image, y, x)][c] = Σ over (ky, kx, o)      dz · w   (stride 1)
//   weight gradient C[o][(c, ky, kx)]   = Σ over (image, p, q)    dz · x   (split over k)
// With the channels innermost in k, a stage of 16 k is one tap of 16 channels: one bounds
// check per row and stage; the weights are reordered to match (a permute per call).
// Channels-last images (g.x_last) are read 16 bytes (four channels) at a time, a bounds check
// per four; their weights are KRSC, and the weight gradient is KRSC: C[o][(ky, kx, c)].
#include "conv.cuh"
#include "tensor_core.cuh"

namespace nngraph::cuda {
namespace {

using namespace tc;

// An element's Place is its row's part plus its k index's; nowhere fails every bounds check,
// whatever is added.
__device__ Place nowhere() { return {0, -(1 << 29), 0}; }

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

// Where a k stands, moved kBK at a time by comparisons where finding it again would take
// divisions each stage: a window's channel and tap (k running (ky, kx, channel) over
// `channels`), or an output pixel.
struct TapCursor {
  int ch, kx, ky;
};
__device__ TapCursor tap_cursor(int k, int channels, int kw) {
  const int tap = k / channels, ky = tap / kw;
  return {k - tap * channels, tap - ky * kw, ky};
}
__device__ void step(TapCursor& t, int channels, int kw) {
  for (t.ch += kBK; t.ch >= channels; t.ch -= channels)
    if (++t.kx == kw) {
      t.kx = 0;
      ++t.ky;
    }
}
struct PixelCursor {
  int image, p, q;
};
__device__ PixelCursor pixel_cursor(const ConvShape& g, int m) {
  const int pq = g.oh * g.ow, image = m / pq, r = m - image * pq, p = r / g.ow;
  return {image, p, r - p * g.ow};
}
__device__ void step(PixelCursor& c, const ConvShape& g) {
  for (c.q += kBK; c.q >= g.ow; c.q -= g.ow)
    if (++c.p == g.oh) {
      c.p = 0;
      ++c.image;
    }
}

// Windows: a channels-last image read 16 bytes (four channels of one tap) at a time, with a
// bounds check per four. As operand A (kA) its rows are pixels and its k (tap, channel), read
// along k into a row-major stage; as operand B (the weight gradient's x) its rows are (tap,
// channel) and its k output pixels, read across rows into a k-major one. A thread's rows stay
// put and its copies share one k, whose part of the place a cursor (P::Cursor) keeps, stepped
// as the stages are issued, once each and in order.
template <int R, class P, bool kA>
struct Windows {
  using Tile = Stage<R, kA>;
  using Cursor = typename P::Cursor;
  static constexpr int kCount = R * kBK / 4 / kBlock;
  const float* src;
  Place rows[kCount];
  Cursor at;
  int h, w, k1, next = -1;  // next: the k the cursor stands at
  // Copy c: A's four k of row c / 4; B's four rows from 4·(c / kBK) at k c % kBK.
  __device__ static int row(int c) { return kA ? c / (kBK / 4) : c / kBK * 4; }
  __device__ static int kk(int c) { return kA ? c % (kBK / 4) * 4 : c % kBK; }
  __device__ Windows(const P& p, const float* s, int first, int count, int end) : src(s), k1(end) {
#pragma unroll
    for (int j = 0; j < kCount; ++j) {
      const int r = first + row(threadIdx.x + j * kBlock);
      if constexpr (kA)
        rows[j] = r < count ? p.a_row(r) : nowhere();
      else
        rows[j] = r < count ? p.b_row(r) : nowhere();
    }
    if constexpr (kA) {
      h = p.a_h();
      w = p.a_w();
    } else {
      h = p.b_h();
      w = p.b_w();
    }
  }
  __device__ void issue(const P& p, int k, Tile& t) {
    static_assert(kBlock % kBK == 0, "a thread's copies share their k");
    const int i = k + kk(threadIdx.x);
    if (k == next)
      p.step(at);
    else
      at = p.cursor(i);
    next = k + kBK;
    const Place moved = i < k1 ? p.place(at) : nowhere();
#pragma unroll
    for (int j = 0; j < kCount; ++j) {
      const int c = threadIdx.x + j * kBlock;
      const bool in = inside(rows[j].y + moved.y, rows[j].x + moved.x, h, w);
      copy16(&t.at(row(c), kk(c)), in ? src + (rows[j].base + moved.base) : src, in);
    }
  }
};
template <int R, class P>
using Rows = Windows<R, P, true>;

// Output pixel m (image, p, q) as the input row and column its window starts at.
template <bool kLast>
__device__ Place window_origin(const ConvShape& g, const PixelCursor& c) {
  const int y = c.p * g.sy - g.pad_top, x = c.q * g.sx - g.pad_left;
  return {offset<kLast>(c.image, 0, y, x, g.c, g.h, g.w), y, x};
}
template <bool kLast>
__device__ Place window_origin(const ConvShape& g, int m) {
  return window_origin<kLast>(g, pixel_cursor(g, m));
}
// A window's value (ky, kx, channel) as its place.
template <bool kLast>
__device__ Place window_value(const ConvShape& g, const TapCursor& t) {
  const int y = t.ky * g.dy, x = t.kx * g.dx;
  return {offset<kLast>(0, t.ch, y, x, g.c, g.h, g.w), y, x};
}
// Pixel m of planes of `plane` pixels, `channels` planes an image, in channel 0.
__device__ int plane_start(int m, int plane, int channels) {
  const int image = m / plane;
  return image * channels * plane + (m - image * plane);
}

// The passes: sizes, loaders, and where C goes (element (m, n) at out_row(m) + n · out_stride()),
// NCHW or channels-last (kLast). Forward and input gradient read weights ordered so that their
// k runs (ky, kx, channel): reordered from OIHW, or KRSC as channels-last convolutions keep them.
template <bool kLast>
struct ForwardPass {  // C[(image, p, q)][o] = Σ over (ky, kx, c) x · w, w as o × (ky, kx, c)
  ConvShape g;
  __host__ __device__ int m() const { return g.n * g.oh * g.ow; }
  __host__ __device__ int n() const { return g.oc; }
  __host__ __device__ int k() const { return g.c * g.kh * g.kw; }
  __device__ int a_h() const { return g.h; }
  __device__ int a_w() const { return g.w; }
  __device__ int a_channel() const { return kLast ? 1 : g.h * g.w; }
  __device__ Place a_row(int m) const { return window_origin<kLast>(g, m); }
  using Cursor = TapCursor;  // channels-last x's k (Windows)
  __device__ Cursor cursor(int k) const { return tap_cursor(k, g.c, g.kw); }
  __device__ void step(Cursor& t) const { cuda::step(t, g.c, g.kw); }
  __device__ Place place(const Cursor& t) const { return window_value<kLast>(g, t); }
  __device__ Place a_tap(int k) const { return place(cursor(k)); }
  __device__ int b_row(int n) const { return n * k(); }
  __device__ int b_k(int k) const { return k; }
  __device__ int out_row(int m) const { return kLast ? m * g.oc : plane_start(m, g.oh * g.ow, g.oc); }
  __device__ int out_stride() const { return kLast ? 1 : g.oh * g.ow; }
};

// Stride 1: input (y, x) meets output (y + pad − ky·dy, x + pad − kx·dx); w as c × (ky, kx, o).
template <bool kLast>
struct InputGradientPass {
  ConvShape g;
  __host__ __device__ int m() const { return g.n * g.h * g.w; }
  __host__ __device__ int n() const { return g.c; }
  __host__ __device__ int k() const { return g.oc * g.kh * g.kw; }
  __device__ int a_h() const { return g.oh; }
  __device__ int a_w() const { return g.ow; }
  __device__ int a_channel() const { return kLast ? 1 : g.oh * g.ow; }
  __device__ Place a_row(int m) const {
    const int hw = g.h * g.w, image = m / hw, r = m - image * hw, py = r / g.w, px = r - py * g.w;
    const int y = py + g.pad_top, x = px + g.pad_left;
    return {offset<kLast>(image, 0, y, x, g.oc, g.oh, g.ow), y, x};
  }
  using Cursor = TapCursor;  // channels-last dz's k (Windows)
  __device__ Cursor cursor(int k) const { return tap_cursor(k, g.oc, g.kw); }
  __device__ void step(Cursor& t) const { cuda::step(t, g.oc, g.kw); }
  __device__ Place place(const Cursor& t) const {
    const int y = -t.ky * g.dy, x = -t.kx * g.dx;
    return {offset<kLast>(0, t.ch, y, x, g.oc, g.oh, g.ow), y, x};
  }
  __device__ Place a_tap(int k) const { return place(cursor(k)); }
  __device__ int b_row(int n) const { return n * k(); }
  __device__ int b_k(int k) const { return k; }
  __device__ int out_row(int m) const { return kLast ? m * g.c : plane_start(m, g.h * g.w, g.c); }
  __device__ int out_stride() const { return kLast ? 1 : g.h * g.w; }
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
    return window_tap<false>(g, c, n - c * window);
  }
  __device__ Place b_k(int k) const { return window_origin<false>(g, k); }
  __device__ int out_row(int m) const { return m * n(); }
  __device__ int out_stride() const { return 1; }
};

struct WeightGradientLast {  // C[o][(ky, kx, c)] = Σ over (image, p, q) dz · x: KRSC
  ConvShape g;
  __host__ __device__ int m() const { return g.oc; }
  __host__ __device__ int n() const { return g.c * g.kh * g.kw; }
  __host__ __device__ int k() const { return g.n * g.oh * g.ow; }
  __device__ int a_row(int m) const { return m; }
  __device__ int a_k(int k) const { return k * g.oc; }
  __device__ int b_h() const { return g.h; }
  __device__ int b_w() const { return g.w; }
  __device__ Place b_row(int n) const { return window_value<true>(g, tap_cursor(n, g.c, g.kw)); }
  using Cursor = PixelCursor;  // x's k (Windows)
  __device__ Cursor cursor(int k) const { return pixel_cursor(g, k); }
  __device__ void step(Cursor& c) const { cuda::step(c, g); }
  __device__ Place place(const Cursor& c) const { return window_origin<true>(g, c); }
  __device__ int out_row(int m) const { return m * n(); }
  __device__ int out_stride() const { return 1; }
};

// Forward and input gradient: a grouped operand (rows where channels-last) times reordered weights. Narrow outputs (at
// most 32 columns) take half-width tiles; products too short to give the GPU two tiles a
// multiprocessor at 64 rows, half-height ones.
template <template <int, class> class A, class P>
void launch_grouped(cudaStream_t s, const P& p, bool exact, const float* a, const float* w, const float* bias,
                    const NeuronDescriptor& nd, float* out) {
  const int m = p.m(), n = p.n(), k = p.k();
  const bool narrow = n <= 32, low = static_cast<long>((m + 63) / 64) * ((n + 63) / 64) < 2L * multiprocessors();
  if (narrow && low)
    launch<P, A<32, P>, Contiguous<32, P, false>, 32, 32>(s, p, 1, k, exact, a, w, bias, nd, out);
  else if (narrow)
    launch<P, A<64, P>, Contiguous<32, P, false>, 64, 32>(s, p, 1, k, exact, a, w, bias, nd, out);
  else if (low)
    launch<P, A<32, P>, Contiguous<64, P, false>, 32, 64>(s, p, 1, k, exact, a, w, bias, nd, out);
  else
    launch<P, A<64, P>, Contiguous<64, P, false>, 64, 64>(s, p, 1, k, exact, a, w, bias, nd, out);
}

// Channels-last forward and input gradient: in tf32, with at most 64 outputs and rows for two
// tiles a multiprocessor, tiles of 256 rows with a warp on each 64 (as the weight gradient's wide
// tile), three stages of them where 64 columns wide (so that two fit a multiprocessor); else
// launch_grouped's.
template <class P>
void launch_rows(cudaStream_t s, const P& p, bool exact, const float* a, const float* w, const float* bias,
                 const NeuronDescriptor& nd, float* out) {
  const int m = p.m(), n = p.n(), k = p.k();
  const bool tall = !exact && n <= 64 && (m + 255) / 256 >= 2 * multiprocessors();
  if (tall && n <= 32)
    launch_as<P, Rows<256, P>, Contiguous<32, P, false>, 256, 32, false, 4>(s, p, 1, k, a, w, bias, nd, out);
  else if (tall)
    launch_as<P, Rows<256, P>, Contiguous<64, P, false>, 256, 64, false, 4, 3>(s, p, 1, k, a, w, bias, nd, out);
  else
    launch_grouped<Rows>(s, p, exact, a, w, bias, nd, out);
}

// Weight gradient: its k (every output pixel) split over tiles of 64 × 64, or in tf32 where the
// image is channels-last and the output channels fit 64 rows, over `wide` tiles of 32 or 64 rows
// (the fewer that hold them) × 256 or 288 columns (whichever pads the columns less: 288 is a
// 3 × 3 window of 32 channels, which 256 leaves a 32-column tile behind). A warp on each quarter
// of the columns loads 34 fragment values for 36 products (64 × 288), where a warp's 32 × 32 of
// the 64 × 64 tile loads 16 for 8; the stages leave room for two tiles a multiprocessor.
struct WeightTile {
  int rows, columns;
  bool wide() const { return columns > 64; }
};
WeightTile weight_tile(const ConvShape& g, bool exact) {
  const int n = g.c * g.kh * g.kw;
  if (!g.x_last || exact || g.oc > 64 || n <= 64) return {64, 64};
  const auto padded = [n](int columns) { return (n + columns - 1) / columns * columns; };
  return {g.oc <= 32 ? 32 : 64, padded(288) < padded(256) ? 288 : 256};
}
int weight_gradient_splits(const ConvShape& g, const WeightTile& t, int* k_split) {
  const int n = g.c * g.kh * g.kw;
  const long tiles = static_cast<long>((g.oc + t.rows - 1) / t.rows) * ((n + t.columns - 1) / t.columns);
  return k_splits(tiles, static_cast<long>(g.n) * g.oh * g.ow, k_split, 256, t.wide() ? 2 : 4);
}
template <int BM, int BN>
void launch_wide(cudaStream_t s, const WeightGradientLast& p, int splits, int k_split, const float* dz,
                 const float* x, float* out) {
  using P = WeightGradientLast;
  launch_as<P, Across<BM, P, true>, Windows<BN, P, false>, BM, BN, false, 1>(s, p, splits, k_split, dz, x, nullptr,
                                                                            NeuronDescriptor{}, out);
}

bool sizes_fit(const ConvShape& g) {
  const auto within = [](long v) { return v < (1L << 28); };  // every offset stays in int
  return device_attribute<cudaDevAttrComputeCapabilityMajor>() >= 8 &&
         within(static_cast<long>(g.n) * g.c * g.h * g.w) && within(static_cast<long>(g.n) * g.oc * g.oh * g.ow) &&
         within(static_cast<long>(g.oc) * g.c * g.kh * g.kw);
}

}  // namespace

bool tensor_convolution_fits(const ConvShape& g, const float* x, const float* w) {
  if (g.x_last) return g.c % 4 == 0 && packed(x) && packed(w) && sizes_fit(g);
  return g.c % kBK == 0 && sizes_fit(g);
}
bool tensor_input_gradient_fits(const ConvShape& g, const float* dz) {
  if (g.sy != 1 || g.sx != 1 || !sizes_fit(g)) return false;
  return g.x_last ? g.oc % 4 == 0 && packed(dz) : g.oc % kBK == 0;
}
bool tensor_weight_gradient_fits(const ConvShape& g, const float* x, const float* dz) {
  if (!packed(dz) || !sizes_fit(g)) return false;
  return g.x_last ? g.c % 4 == 0 && g.oc % 4 == 0 && packed(x) : g.oh * g.ow % 4 == 0;
}

void tensor_convolution(cudaStream_t s, const ConvShape& g, bool exact, const float* x, const float* w,
                        const float* bias, const NeuronDescriptor& nd, float* y, float* reordered) {
  if (g.x_last) {
    launch_rows(s, ForwardPass<true>{g}, exact, x, w, bias, nd, y);
  } else {
    const int dims[3] = {g.oc, g.c, g.kh * g.kw}, perm[3] = {0, 2, 1};  // o × (ky, kx, c)
    permute(s, w, reordered, dims, perm);
    launch_grouped<Grouped>(s, ForwardPass<false>{g}, exact, x, reordered, bias, nd, y);
  }
  check_launch("convolution");
}

void tensor_input_gradient(cudaStream_t s, const ConvShape& g, bool exact, const float* dz, const float* w,
                           float* dx, float* reordered) {
  const int taps = g.kh * g.kw;
  if (g.x_last) {
    const int dims[3] = {g.oc, taps, g.c}, perm[3] = {2, 1, 0};  // KRSC as c × (ky, kx, o)
    permute(s, w, reordered, dims, perm);
    launch_rows(s, InputGradientPass<true>{g}, exact, dz, reordered, nullptr, NeuronDescriptor{}, dx);
  } else {
    const int dims[3] = {g.oc, g.c, taps}, perm[3] = {1, 2, 0};  // c × (ky, kx, o)
    permute(s, w, reordered, dims, perm);
    launch_grouped<Grouped>(s, InputGradientPass<false>{g}, exact, dz, reordered, nullptr, NeuronDescriptor{}, dx);
  }
  check_launch("convolution_gradient");
}

size_t tensor_weight_gradient_partial(const ConvShape& g) {  // exact or not: either tile's
  int k_split = 0;
  const int splits = std::max(weight_gradient_splits(g, weight_tile(g, true), &k_split),
                              weight_gradient_splits(g, weight_tile(g, false), &k_split));
  return splits > 1 ? static_cast<size_t>(splits) * g.oc * g.c * g.kh * g.kw : 0;
}

void tensor_weight_gradient(cudaStream_t s, const ConvShape& g, bool exact, const float* x, const float* dz,
                            float* dw, float* partial) {
  int k_split = 0;
  const WeightTile tile = weight_tile(g, exact);
  const int splits = weight_gradient_splits(g, tile, &k_split), n = g.c * g.kh * g.kw;
  float* out = splits > 1 ? partial : dw;
  if (g.x_last) {
    using P = WeightGradientLast;
    using Launch = void (*)(cudaStream_t, const P&, int, int, const float*, const float*, float*);
    static constexpr Launch wide[2][2] = {{launch_wide<32, 256>, launch_wide<32, 288>},
                                        {launch_wide<64, 256>, launch_wide<64, 288>}};
    if (tile.wide())
      wide[tile.rows == 64][tile.columns == 288](s, P{g}, splits, k_split, dz, x, out);
    else
      launch<P, Across<64, P, true>, Windows<64, P, false>, 64, 64>(s, P{g}, splits, k_split, exact, dz, x, nullptr,
                                                                     NeuronDescriptor{}, out);
  } else {
    using P = WeightGradient;
    launch<P, Contiguous<64, P, true>, Gathered<64, P>, 64, 64>(s, P{g}, splits, k_split, exact, dz, x, nullptr,
                                                                NeuronDescriptor{}, out);
  }
  if (splits > 1) column_totals(s, partial, splits, g.oc * n, g.oc * n, dw, nullptr);
  check_launch("convolution_gradient");
}

}  // namespace nngraph::cuda
