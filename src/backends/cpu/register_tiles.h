#pragma once
// Register-tiled products for the cpu convolutions (conv_frame.cpp, conv_winograd.cpp): each
// tile keeps its accumulators in vector registers, its rows' coefficients are broadcast and its
// positions read as vectors at per-term offsets, so the operands are read where they lie.
#include <algorithm>
#include <cstddef>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace nngraph::tiles {

// One vector register of floats; every tile shape below keeps its accumulators in registers.
#if defined(__AVX512F__)
inline constexpr int V = 16;
#elif defined(__AVX__)
inline constexpr int V = 8;
#else
inline constexpr int V = 4;
#endif
typedef float vf __attribute__((vector_size(V * sizeof(float)), aligned(alignof(float)), may_alias));
inline vf load(const float* p) { return *reinterpret_cast<const vf*>(p); }
inline void store(float* p, vf v) { *reinterpret_cast<vf*>(p) = v; }
// s − 0 is s exactly (0 + s is not, for −0), so this compiles to a bare broadcast.
inline vf splat(float s) { return s - vf{}; }

inline int round_up(int v, int m) { return (v + m - 1) / m * m; }

// Where a product's coefficients a(m, t) lie: a[m·row + t·term], rows from `rows` on repeating
// the last (their outputs are dropped), so the forward reads its weights in place, unpacked.
struct Coefficients {
  const float* a;
  size_t row, term;
  int rows;
};

// Masked stores (AVX-512) put a tile's vectors into the output straight from the registers
// even where its positions are not the output's own.
#if defined(__AVX512F__)
inline constexpr bool kMaskedStores = true;
inline void store_lanes(float* p, unsigned lanes, vf v) {
  if (lanes == 0xffffu)
    store(p, v);
  else
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>(lanes), reinterpret_cast<__m512>(v));
}
// The lanes' values (the others zero), read without touching memory outside them.
inline vf load_lanes(const float* p, unsigned lanes) {
  if (lanes == 0xffffu) return load(p);
  return reinterpret_cast<vf>(_mm512_maskz_loadu_ps(static_cast<__mmask16>(lanes), p));
}
#else
inline constexpr bool kMaskedStores = false;
inline void store_lanes(float* p, unsigned, vf v) { store(p, v); }
inline vf load_lanes(const float* p, unsigned) { return load(p); }  // whole vectors only, as store_lanes
#endif

// to[v] = from[v] for v < n: whole vectors, then one masked tail (a frame's rows are a few
// vectors long, too short for a call to memcpy to pay).
inline void copy_floats(float* to, const float* from, int n) {
  int v = 0;
  for (; v + V <= n; v += V) store(to + v, load(from + v));
  if constexpr (kMaskedStores) {
    if (v < n) store_lanes(to + v, (1u << (n - v)) - 1, load_lanes(from + v, (1u << (n - v)) - 1));
  } else {
    for (; v < n; ++v) to[v] = from[v];
  }
}

// to[v] = from[2v] for v < n (a stride-2 frame's phase rows), reading nothing past from[2n − 2].
inline void copy_even(float* to, const float* from, int n) {
#if defined(__AVX512F__)
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (int v = 0; v < n; v += V) {
    const int values = std::min(2 * (n - v) - 1, 2 * V - 1);  // from[2v] up to from[2v + values − 1]
    const unsigned low = values >= V ? 0xffffu : (1u << values) - 1, high = values > V ? (1u << (values - V)) - 1 : 0;
    const __m512 a = _mm512_maskz_loadu_ps(static_cast<__mmask16>(low), from + 2 * v);
    const __m512 b = _mm512_maskz_loadu_ps(static_cast<__mmask16>(high), from + 2 * v + V);
    store_lanes(to + v, n - v >= V ? 0xffffu : (1u << (n - v)) - 1,
                reinterpret_cast<vf>(_mm512_permutex2var_ps(a, even, b)));
  }
#else
  for (int v = 0; v < n; ++v) to[v] = from[2 * static_cast<ptrdiff_t>(v)];
#endif
}

// A run of a vector's lanes whose positions are consecutive outputs: `to` is lane 0's offset
// in row 0's output (lanes outside are not written).
struct Piece {
  ptrdiff_t to;
  unsigned lanes;
};

// Where a tile goes straight from its registers: row m at out + m·plane, a bias per row added
// (null: none), then the addend's value at the same place (null: none), relu where asked, rows
// from `rows` on not written. Vector v at out + v·V where the positions are the output's own
// (pieces null), else as pieces[first[v], first[v + 1]) say.
struct Direct {
  float* out;
  size_t plane;
  const float* bias;
  bool relu;
  int rows;
  const Piece* pieces = nullptr;
  const int* first = nullptr;
  const float* addend = nullptr;  // laid out as out
};

// c[m][0, NV·V) = Σ_t a(m, t) · x[off[t] + column]: MR outputs at NV·V consecutive positions,
// into c, or as `direct` says.
template <int MR, int NV>
void product_tile(int terms, Coefficients k, const float* x, const int* __restrict off, float* __restrict c,
                  const Direct* direct) {
  vf acc[MR][NV];
  const float* a[MR];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
    a[m] = k.a + std::min(m, k.rows - 1) * k.row;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[m][v] = vf{};
  }
  for (int t = 0; t < terms; ++t) {
    const float* b = x + off[t];
    vf bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = load(b + v * V);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const vf am = splat(a[m][t * k.term]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[m][v] += am * bv[v];
    }
  }
  if (direct) {
    const bool relu = direct->relu;
    auto finish = [relu](vf r) { return relu ? (r < vf{} ? vf{} : r) : r; };  // relu keeps NaN
    const size_t plane = direct->plane;
    const float* add = direct->addend;
    vf bias[MR];
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) bias[m] = splat(direct->bias && m < direct->rows ? direct->bias[m] : 0.f);
    if (!direct->pieces) {
#pragma GCC unroll 8
      for (int m = 0; m < MR; ++m) {
        if (m >= direct->rows) break;
        float* row = direct->out + m * plane;
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) {
          const vf r = acc[m][v] + bias[m];
          store(row + v * V, finish(add ? r + load(add + m * plane + v * V) : r));
        }
      }
      return;
    }
    // Each piece read once for all the rows it stores: per row and vector, the walk over the
    // pieces cost a tenth of a 3-channel 7×7 stem's tiles.
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      for (int p = direct->first[v]; p < direct->first[v + 1]; ++p) {
        const Piece piece = direct->pieces[p];
#pragma GCC unroll 8
        for (int m = 0; m < MR; ++m) {
          if (m >= direct->rows) break;
          const vf r = acc[m][v] + bias[m];
          const size_t at = m * plane + piece.to;
          store_lanes(direct->out + at, piece.lanes, finish(add ? r + load_lanes(add + at, piece.lanes) : r));
        }
      }
    return;
  }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) store(c + (m * NV + v) * V, acc[m][v]);
}

// ct[t][0, NVO·V) += Σ over images and q < positions of x[off[t] + q] · z[q][·]: vectors run
// along the outputs, so no horizontal sums are needed.
template <int NK, int NVO>
void gradient_tile(int images, int positions, const float* z, size_t z_image, int ldz, const float* x,
                   size_t x_image, const int* __restrict off, float* __restrict ct, int ldc) {
  vf acc[NK][NVO];
#pragma GCC unroll 24
  for (int k = 0; k < NK; ++k)
#pragma GCC unroll 8
    for (int v = 0; v < NVO; ++v) acc[k][v] = vf{};
  for (int i = 0; i < images; ++i, z += z_image, x += x_image) {
    const float* zq = z;
    for (int q = 0; q < positions; ++q, zq += ldz) {
      vf zv[NVO];
#pragma GCC unroll 8
      for (int v = 0; v < NVO; ++v) zv[v] = load(zq + v * V);
#pragma GCC unroll 24
      for (int k = 0; k < NK; ++k) {
        const vf b = splat(x[off[k] + q]);
#pragma GCC unroll 8
        for (int v = 0; v < NVO; ++v) acc[k][v] += b * zv[v];
      }
    }
  }
#pragma GCC unroll 24
  for (int k = 0; k < NK; ++k)
#pragma GCC unroll 8
    for (int v = 0; v < NVO; ++v) store(ct + k * ldc + v * V, load(ct + k * ldc + v * V) + acc[k][v]);
}

using ProductTile = void (*)(int, Coefficients, const float*, const int*, float*, const Direct*);
// A register tile of mr rows by nv vectors, and the narrower ones (tails[j]: j + 1 vectors) for
// the positions left past the last whole tile.
struct ProductShape {
  int mr, nv;
  ProductTile tile;
  ProductTile tails[5];
};
struct GradientShape {
  int nk, nvo;
  void (*tile)(int, int, const float*, size_t, int, const float*, size_t, const int*, float*, int);
};
#if defined(__AVX512F__)  // 32 registers: 24 accumulators
inline constexpr ProductShape kProductShapes[] = {
    {8, 3, product_tile<8, 3>, {product_tile<8, 1>, product_tile<8, 2>}},
    {6, 4, product_tile<6, 4>, {product_tile<6, 1>, product_tile<6, 2>, product_tile<6, 3>}},
    {4, 6, product_tile<4, 6>,
     {product_tile<4, 1>, product_tile<4, 2>, product_tile<4, 3>, product_tile<4, 4>, product_tile<4, 5>}}};
inline constexpr GradientShape kGradientShapes[] = {{6, 4, gradient_tile<6, 4>}, {8, 3, gradient_tile<8, 3>},
                                             {12, 2, gradient_tile<12, 2>}, {24, 1, gradient_tile<24, 1>}};
#else  // 16 registers: 12 accumulators
inline constexpr ProductShape kProductShapes[] = {
    {4, 3, product_tile<4, 3>, {product_tile<4, 1>, product_tile<4, 2>}},
    {6, 2, product_tile<6, 2>, {product_tile<6, 1>}},
    {2, 6, product_tile<2, 6>,
     {product_tile<2, 1>, product_tile<2, 2>, product_tile<2, 3>, product_tile<2, 4>, product_tile<2, 5>}}};
inline constexpr GradientShape kGradientShapes[] = {{4, 3, gradient_tile<4, 3>}, {6, 2, gradient_tile<6, 2>},
                                             {12, 1, gradient_tile<12, 1>}};
#endif

// The shape that pads an m × n tiling least (the first of equals).
template <typename Shape, size_t N>
const Shape& least_padded(const Shape (&shapes)[N], int m, int n, int Shape::*rows, int Shape::*vectors) {
  const Shape* best = &shapes[0];
  for (const Shape& s : shapes) {
    const auto area = [&](const Shape& t) {
      return static_cast<long>(round_up(m, t.*rows)) * round_up(n, t.*vectors * V);
    };
    if (area(s) < area(*best)) best = &s;
  }
  return *best;
}

}  // namespace nngraph::tiles
