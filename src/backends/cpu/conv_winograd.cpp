// 3×3 stride-1 convolutions as Winograd F(2×2, 3×3): each 2×2 block of outputs is 16
// products of transformed 4×4 input patches with transformed weights instead of 36, so the
// product (the frame kernels' register tiles) does 4/9 of the direct arithmetic. Tiles go in
// chunks of whole tile rows, small enough that a chunk's transforms stay in the L2 cache.
#include "backends/cpu/conv_winograd.h"

#include <algorithm>
#include <initializer_list>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/register_tiles.h"

namespace nngraph {

namespace {

using namespace tiles;

// The positions one register tile of a product of m rows over n columns covers: plain_product's
// row pitch ld is a multiple of it.
int product_width(int m, int n) {
  return least_padded(kProductShapes, m, n, &ProductShape::mr, &ProductShape::nv).nv * V;
}

// Row-major C[m × ld] = A[m × k] · B[k × ld] (A's rows lda apart) with the register tiles, over
// the columns [0, n) rounded up to product_width(m, n) (ld at least that).
void plain_product(int m, int n, int k, const float* a, int lda, const float* b, float* c, int ld) {
  const ProductShape& s = least_padded(kProductShapes, m, n, &ProductShape::mr, &ProductShape::nv);
  const int nr = s.nv * V;
  std::vector<int> off(k);
  for (int t = 0; t < k; ++t) off[t] = t * ld;
  for (int m0 = 0; m0 < m; m0 += s.mr) {
    const int valid = std::min(s.mr, m - m0);
    const Coefficients coefficients{a + static_cast<size_t>(m0) * lda, static_cast<size_t>(lda), 1, valid};
    for (int q = 0; q < n; q += nr) {
      const Direct d{c + static_cast<size_t>(m0) * ld + q, static_cast<size_t>(ld), nullptr, false, valid};
      s.tile(k, coefficients, b + q, off.data(), nullptr, &d);
    }
  }
}

// A padded input row's even and odd columns from the left edge of each tile: e[t] = row[2t −
// left], o[t] = row[2t + 1 − left] for t ≤ tw, zero outside the image (and for rows y outside).
void split_row(const float* plane, int y, int h, int w, int left, int tw, float* __restrict e, float* __restrict o) {
  if (y < 0 || y >= h) {
    std::fill_n(e, tw + 1, 0.f);
    std::fill_n(o, tw + 1, 0.f);
    return;
  }
  const float* row = plane + static_cast<size_t>(y) * w;
  const auto pixel = [&](int x) { return x >= 0 && x < w ? row[x] : 0.f; };
  // Tiles whose four columns lie inside, in a loop the compiler vectorizes; the edges apart.
  const int t0 = std::min(tw + 1, (left + 1) / 2), t1 = std::max(t0, std::min(tw + 1, (w + left) / 2));
  for (const auto& [from, to] : {std::pair{0, t0}, std::pair{t1, tw + 1}})
    for (int t = from; t < to; ++t) {
      e[t] = pixel(2 * t - left);
      o[t] = pixel(2 * t + 1 - left);
    }
  const float* inside = row + (2 * t0 - left);  // tile t0's first column
  for (int k = 0; k < t1 - t0; ++k) {
    e[t0 + k] = inside[2 * k];
    o[t0 + k] = inside[2 * k + 1];
  }
}

// One row p of V = B^T d B for tw tiles: the patch rows combined as a + sign·b (rows at offsets
// a, b into the even and odd columns e, o), then the columns as B's columns, into to[q·step + t].
void transform_row(const float* __restrict e, const float* __restrict o, int a, int b, float sign, int tw,
                   float* __restrict to, size_t step) {
  for (int t = 0; t < tw; ++t) {
    const float ae = e[a + t] + sign * e[b + t], ae1 = e[a + t + 1] + sign * e[b + t + 1];
    const float ao = o[a + t] + sign * o[b + t], ao1 = o[a + t + 1] + sign * o[b + t + 1];
    to[t] = ae - ae1;
    to[step + t] = ao + ae1;
    to[2 * step + t] = ae1 - ao;
    to[3 * step + t] = ao - ao1;
  }
}

// Row i of Y = A^T M A for tw tiles (M[k] at m + k·step): out[2t], out[2t + 1].
void inverse_row(const float* __restrict m, size_t step, int i, int tw, float* __restrict out) {
  const float* r0 = m + (i == 0 ? 0 : 4) * step;  // A^T row 0: rows 0 + 1 + 2; row 1: rows 1 − 2 − 3
  const float* r1 = m + (i == 0 ? 4 : 8) * step;
  const float* r2 = m + (i == 0 ? 8 : 12) * step;
  const float sign = i == 0 ? 1.f : -1.f;
  for (int t = 0; t < tw; ++t) {
    float s[4];
    for (int q = 0; q < 4; ++q) s[q] = r0[q * step + t] + sign * (r1[q * step + t] + r2[q * step + t]);
    out[2 * t] = s[0] + s[1] + s[2];
    out[2 * t + 1] = s[1] - s[2] - s[3];
  }
}

}  // namespace

bool winograd_fits(const ConvGeometry& g, const ImageShape& in, const ImageShape& out, int n) {
  const long tiles = static_cast<long>(n) * ((out.h + 1) / 2) * ((out.w + 1) / 2);
  // Every chunk of tiles reads all the transformed weights (16 per weight). Up to 128 × 128
  // channels (1 MiB) they stay in the L2 cache; up to 256 × 256 each of the 16 products streams
  // its own (256 KiB) for a chunk of at least 128 tiles. That pays (measured on 2 cores: 0.79
  // of the frames' time at 28×28, 0.92 at 10×10, but 1.55 at 8×8) where the images are 10×10
  // or more and no 2×2 tile sticks out past an odd edge (7×7 outputs compute 8×8). Enough
  // tiles repay the transforms.
  const long channels = static_cast<long>(in.c) * out.c;
  const bool streamed = channels <= 256 * 256 && out.h % 2 == 0 && out.w % 2 == 0 && out.h >= 10 && out.w >= 10;
  return g.kh == 3 && g.kw == 3 && g.sy == 1 && g.sx == 1 && g.dy == 1 && g.dx == 1 && g.groups == 1 &&
         in.c >= 16 && out.c >= 16 && tiles >= 1024 && (channels <= 128 * 128 || streamed);
}

void winograd_convolution(ThreadPool& pool, const ConvGeometry& g, const Tensor& x, const Tensor& w,
                          const Tensor& bias, const NeuronDescriptor& neuron, const Tensor& y, const Tensor& addend) {
  const auto& is = x.shape();
  const auto& os = y.shape();
  const int n = x.batch(), c_in = is.c, c_out = os.c, th = (os.h + 1) / 2, tw = (os.w + 1) / 2;
  const size_t in_plane = static_cast<size_t>(is.h) * is.w, out_plane = static_cast<size_t>(os.h) * os.w;

  // U[k][o][c] = (G g G^T)[k], G = [1 0 0; ½ ½ ½; ½ −½ ½; 0 0 1].
  const size_t oc = static_cast<size_t>(c_out) * c_in;
  float* u = thread_scratch(Scratch::WinogradWeights, 16 * oc);
  const float* weights = w.data_as<const float>();
  pool.parallel_for(oc, [&](size_t first, size_t end) {
    for (size_t i = first; i < end; ++i) {
      const float* k = weights + i * 9;
      float gg[4][3];
      for (int j = 0; j < 3; ++j) {
        gg[0][j] = k[j];
        gg[1][j] = 0.5f * (k[j] + k[3 + j] + k[6 + j]);
        gg[2][j] = 0.5f * (k[j] - k[3 + j] + k[6 + j]);
        gg[3][j] = k[6 + j];
      }
      for (int p = 0; p < 4; ++p) {
        const float t[4] = {gg[p][0], 0.5f * (gg[p][0] + gg[p][1] + gg[p][2]), 0.5f * (gg[p][0] - gg[p][1] + gg[p][2]),
                            gg[p][2]};
        for (int q = 0; q < 4; ++q) u[(4 * p + q) * oc + i] = t[q];
      }
    }
  });

  // Chunks of whole tile rows (of the batch's n·th), about 1 MiB of transformed input each,
  // and at least 128 tiles, over which each product's weights are read once.
  const int rows_total = n * th;
  const int target = std::max(1, (std::max(16384 / c_in, 128) + tw - 1) / tw), threads = pool.size();
  const int wanted = ((rows_total + target - 1) / target + threads - 1) / threads * threads;  // the threads' share even
  const int per_chunk = (rows_total + wanted - 1) / wanted, chunks = (rows_total + per_chunk - 1) / per_chunk;
  const int most = per_chunk * tw;
  const int ld = tiles::round_up(most, product_width(c_out, most));
  const float* bs = bias.data_as<const float>();
  pool.parallel_for(static_cast<size_t>(chunks), [&](size_t first, size_t end) {
    // v[k][c][ld] and m[k][o][ld]; row scratch: E, O (even and odd padded columns) of 4 rows, and their combinations.
    float* v = thread_scratch(Scratch::WinogradInput, 16 * static_cast<size_t>(c_in) * ld);
    float* m = thread_scratch(Scratch::WinogradProducts, 16 * static_cast<size_t>(c_out) * ld);
    std::vector<float> even(4 * (tw + 1)), odd(4 * (tw + 1)), row_out(2 * tw);
    for (size_t chunk = first; chunk < end; ++chunk) {
      const int r0 = static_cast<int>(chunk) * per_chunk, r1 = std::min(rows_total, r0 + per_chunk);
      const int count = (r1 - r0) * tw;
      // V = B^T d B, B^T = [1 0 −1 0; 0 1 1 0; 0 −1 1 0; 0 1 0 −1], tile by tile along each tile row.
      for (int r = r0; r < r1; ++r) {
        const int img = r / th, ty = r % th, at = (r - r0) * tw;
        for (int c = 0; c < c_in; ++c) {
          const float* plane = x.data_as<const float>() + (static_cast<size_t>(img) * c_in + c) * in_plane;
          for (int i = 0; i < 4; ++i)
            split_row(plane, 2 * ty + i - g.pad_top, is.h, is.w, g.pad_left, tw, even.data() + i * (tw + 1),
                      odd.data() + i * (tw + 1));
          const int s = tw + 1;
          const float* e = even.data();
          const float* o = odd.data();
          float* to = v + static_cast<size_t>(c) * ld + at;
          const size_t step = static_cast<size_t>(c_in) * ld;  // from one k to the next
          // Rows combined as B^T's rows p (the patch rows i at index i·s), then the columns.
          transform_row(e, o, 0, 2 * s, -1.f, tw, to, step);
          transform_row(e, o, s, 2 * s, 1.f, tw, to + 4 * step, step);
          transform_row(e, o, 2 * s, s, -1.f, tw, to + 8 * step, step);
          transform_row(e, o, s, 3 * s, -1.f, tw, to + 12 * step, step);
        }
      }
      // The columns the register tiles read past the chunk's tiles: zero, not an earlier chunk's values.
      for (size_t row = 0; count < ld && row < 16 * static_cast<size_t>(c_in); ++row)
        std::fill(v + row * ld + count, v + (row + 1) * ld, 0.f);
      // M[k] = U[k] · V[k]: 16 products with the register tiles.
      for (int k = 0; k < 16; ++k)
        plain_product(c_out, count, c_in, u + k * oc, c_in, v + k * static_cast<size_t>(c_in) * ld,
                      m + k * static_cast<size_t>(c_out) * ld, ld);
      // Y = A^T M A, A^T = [1 1 1 0; 0 1 −1 −1], then bias, addend and neuron, row by row into the output.
      const size_t step = static_cast<size_t>(c_out) * ld;
      auto emit = [&](int o, int r) {
        const int img = r / th, ty = r % th, at = (r - r0) * tw;
        const float* mk = m + static_cast<size_t>(o) * ld + at;
        for (int i = 0; i < 2 && 2 * ty + i < os.h; ++i) {
          inverse_row(mk, step, i, tw, row_out.data());
          const size_t row = (static_cast<size_t>(img) * c_out + o) * out_plane + static_cast<size_t>(2 * ty + i) * os.w;
          float* to = y.data_as<float>() + row;
          std::copy(row_out.begin(), row_out.begin() + os.w, to);
          if (bs || addend || neuron.type != NeuronType::None)
            bias_neuron(to, os.w, bs ? bs + o : nullptr, neuron, addend ? addend.data_as<const float>() + row : nullptr);
        }
      };
      // With an addend, a channel's rows one after another, so that its reads run on rather than
      // hop from plane to plane (ResNet-18's first residual convolutions at batch 64: 33 → 29.7 ms;
      // without one that order cost 4%).
      if (addend) {
        for (int o = 0; o < c_out; ++o)
          for (int r = r0; r < r1; ++r) emit(o, r);
      } else {
        for (int r = r0; r < r1; ++r)
          for (int o = 0; o < c_out; ++o) emit(o, r);
      }
    }
  });
}

}  // namespace nngraph
