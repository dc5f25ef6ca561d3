// Convolutions on zero-padded frames (see conv_frame.h): register-tiled products
// (register_tiles.h) whose rows are read in place from the frame, so there is no im2col and no
// GEMM packing; the frames, how a batch's work is split, and the gradient's products.
#include "backends/cpu/conv_frame.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/register_tiles.h"

namespace nngraph {
namespace {

using namespace tiles;

// A zero-padded copy of an image's channels with the image's (0, 0) at (top, left), split into
// sy·sx phase planes of h × w each (plane (py, px) holds the padded pixels (u·sy + py, v·sx + px)),
// so that a strided window's taps are unit-stride runs too. Rows and columns that fall outside
// are never read by any output, so they are left out. A frame may hold several images side by
// side, image i's columns from i·w/images on (small images then fill the register tiles).
struct Frame {
  int h, w, top, left, sy = 1, sx = 1;
  // The phases some tap reads (bit py of rows, bit px of columns; ~0: all); only those are kept.
  unsigned rows = ~0u, columns = ~0u;
  int images = 1;
  int span() const { return w / images; }
  size_t plane() const { return static_cast<size_t>(h) * w; }
  size_t size() const { return static_cast<size_t>(count(rows, sy)) * count(columns, sx) * plane(); }
  // Where phase (py, px) lies among a channel's kept planes.
  size_t slot(int py, int px) const {
    return static_cast<size_t>(rank(rows, py)) * count(columns, sx) + rank(columns, px);
  }
  // The phases a window of kh × kw taps, dy and dx apart, reads (all of them for strides of 32 and more).
  void used_by(int kh, int kw, int dy, int dx) {
    if (sy >= 32 || sx >= 32) return;
    rows = columns = 0;
    for (int i = 0; i < kh; ++i) rows |= 1u << (i * dy % sy);
    for (int j = 0; j < kw; ++j) columns |= 1u << (j * dx % sx);
  }
  // The first plane column of phase px that holds an image column, and the end of them (in an image of width sw).
  int first_column(int px) const { return std::max(0, (left - px + sx - 1) / sx); }
  int end_column(int px, int sw) const { return (sw + left - px + sx - 1) / sx; }
  // Narrows each image's width from w (every column a window reads, padding included) to where
  // a window running past it reads the next image's (or row's) left padding, which is zero in
  // every phase plane, instead of its own right padding: one column of a 3×3 window's two.
  void narrow(int out_w, int sw) {
    int least = w, span = out_w;
    for (int px = 0; px < sx; ++px)
      if (columns == ~0u || columns >> px & 1) least = std::min(least, first_column(px));
    for (int px = 0; px < sx; ++px)
      if (columns == ~0u || columns >> px & 1) span = std::max({span, std::min(end_column(px, sw), w), w - least});
    w = span;
  }
  // Zeros rows [u0, u1) of each kept plane of `channels` frames.
  void clear(int channels, float* dst, int u0, int u1) const {
    for (int c = 0; c < channels; ++c, dst += size())
      for (size_t p = 0; p < size() / plane(); ++p)
        std::fill_n(dst + p * plane() + static_cast<size_t>(u0) * w, static_cast<size_t>(u1 - u0) * w, 0.f);
  }
  // Copies `count` images, `image` floats apart, side by side (count ≤ images; the slots past
  // them are zeroed) into the planes' rows [u0, u1) (all by default). Only where image columns
  // lie: the padding is zero already (in a new buffer, or one cleared after use), and every
  // fill of the same frame puts values in the same places.
  void fill(const float* src, size_t image, int count, int channels, int sh, int sw, float* dst, int u0 = 0,
            int u1 = -1) const {
    const int width = span();
    if (u1 < 0) u1 = h;
    for (int c = 0; c < channels; ++c, src += static_cast<size_t>(sh) * sw, dst += size())
      for (int py = 0; py < sy; ++py)
        for (int px = 0; px < sx; ++px) {
          if ((rows != ~0u && !(rows >> py & 1)) || (columns != ~0u && !(columns >> px & 1))) continue;
          float* to_plane = dst + slot(py, px) * plane();
          // Plane columns v whose image column v·sx + px − left lies in [0, sw).
          const int v0 = first_column(px), v1 = std::min(width, end_column(px, sw));
          for (int i = 0; i < images && v0 < v1; ++i)
            for (int u = u0; u < u1; ++u) {
              const int y = u * sy + py - top;
              if (y < 0 || y >= sh) continue;
              float* to = to_plane + static_cast<size_t>(u) * w + i * width;
              if (i >= count) {
                std::fill(to + v0, to + v1, 0.f);
                continue;
              }
              const float* row = src + i * image + static_cast<size_t>(y) * sw + px - left;
              if (sx == 1)
                std::copy(row + v0, row + v1, to + v0);
              else if (sx == 2)  // the common stride, with a constant step the loop vectorizes
                for (int v = v0; v < v1; ++v) to[v] = row[2 * static_cast<ptrdiff_t>(v)];
              else
                for (int v = v0; v < v1; ++v) to[v] = row[static_cast<ptrdiff_t>(v) * sx];
            }
        }
  }

 private:
  static int count(unsigned mask, int s) { return mask == ~0u ? s : __builtin_popcount(mask); }
  static int rank(unsigned mask, int p) { return mask == ~0u ? p : __builtin_popcount(mask & ((1u << p) - 1)); }
};

// Term (c, i, j)'s offset: channel c's frame at tap (i, j), in the tap's phase plane.
void tap_offsets(const ConvGeometry& g, int channels, const Frame& f, int* off) {
  for (int c = 0; c < channels; ++c)
    for (int i = 0; i < g.kh; ++i)
      for (int j = 0; j < g.kw; ++j) {
        const int y = i * g.dy, x = j * g.dx;
        *off++ = static_cast<int>(c * f.size() + f.slot(y % f.sy, x % f.sx) * f.plane() + (y / f.sy) * f.w + x / f.sx);
      }
}

// Per group, out[m] = Σ_t a[m][t] · frame[off[t] + q] over the terms t = (channel, tap) of
// `channels` frames, at the positions q = row·pitch + i·span + column (column < cols) of each
// image i side by side in the frame, into planes of rows × cols, `out_image` floats apart.
class FrameProduct {
 public:
  FrameProduct(const ConvGeometry& g, int m, int channels, const Frame& f, int rows, int cols, size_t out_image = 0)
      : shape_(least_padded(kProductShapes, m, rows * f.w, &ProductShape::mr, &ProductShape::nv)),
        m_(m), terms_(channels * g.kh * g.kw), rows_(rows), cols_(cols), pitch_(f.w), span_(f.span()),
        images_(f.images), nr_(shape_.nv * V), tiles_((rows * f.w + nr_ - 1) / nr_), groups_(g.groups),
        out_image_(out_image), off_(terms_) {
    tap_offsets(g, channels, f, off_.data());
    // The last tile as narrow as the positions left need.
    const int left = rows * f.w - (tiles_ - 1) * nr_, vectors = (left + V - 1) / V;
    if (vectors < shape_.nv) tail_ = shape_.tails[vectors - 1], tail_nr_ = vectors * V;
  }
  int blocks() const { return (m_ + shape_.mr - 1) / shape_.mr; }
  // Whether the tiles end exactly at the last position (they read nothing past it): the last
  // tile ends at the next whole vector.
  bool exact() const { return rows_ * pitch_ % V == 0; }
  size_t tile_floats() const { return static_cast<size_t>(shape_.mr) * nr_; }
  // Floats of frame the product reads: the offsets' reach plus the last tile's overrun.
  size_t extent() const { return *std::max_element(off_.begin(), off_.end()) + static_cast<size_t>(tiles_) * nr_; }
  // Reads a[m][t] = weights[(grp·m + m)·terms + t] as they lie (the forward's weights).
  void read_in_place(const float* weights) { in_place_ = weights; }
  // Packs a[m][t] = value(grp, m, t) for every group, block by block across the pool.
  template <typename Value>
  void pack(ThreadPool& pool, Value value) {
    const size_t block_floats = static_cast<size_t>(terms_) * shape_.mr;
    packed_.reset(new float[groups_ * blocks() * block_floats]);  // every value is written below
    pool.parallel_for(static_cast<size_t>(groups_) * blocks(), [&](size_t first, size_t end) {
      for (size_t gb = first; gb < end; ++gb) {
        const int grp = static_cast<int>(gb / blocks()), m0 = static_cast<int>(gb % blocks()) * shape_.mr;
        float* a = packed_.get() + gb * block_floats;
        for (int t = 0; t < terms_; ++t, a += shape_.mr)
          for (int r = 0; r < shape_.mr; ++r) a[r] = m0 + r < m_ ? value(grp, m0 + r, t) : 0.f;
      }
    });
  }
  int tiles() const { return tiles_; }
  // The rows [first, end) of frame f (this product's) that tiles [t0, t1) read for their outputs.
  std::pair<int, int> frame_rows(const Frame& f, int t0, int t1) const {
    const long q0 = static_cast<long>(t0) * nr_, q1 = static_cast<long>(t1) * nr_;
    return {static_cast<int>(q0 / pitch_), static_cast<int>(std::min<long>(f.h, (q1 + pitch_ - 1) / pitch_ + f.h - rows_))};
  }
  // Rows [block·mr, block·mr + mr) of group grp's product over tiles [t0, t1) (all by default),
  // bias, addend (laid out as out; null: none) and neuron applied on the way into the output
  // (of the frame's first `count` images).
  void run(int count, int grp, int block, const float* frame, float* out, float* tile, const float* bias = nullptr,
           const NeuronDescriptor& neuron = NeuronDescriptor{}, int t0 = 0, int t1 = -1,
           const float* addend = nullptr) const {
    if (t1 < 0) t1 = tiles_;
    const int mr = shape_.mr, valid = std::min(mr, m_ - block * mr);
    const Coefficients a =
        in_place_ ? Coefficients{in_place_ + (static_cast<size_t>(grp) * m_ + block * mr) * terms_,
                                 static_cast<size_t>(terms_), 1, valid}
                  : Coefficients{packed_.get() + (static_cast<size_t>(grp) * blocks() + block) * terms_ * mr, 1,
                                 static_cast<size_t>(mr), mr};
    const bool own = pitch_ == cols_ && images_ == 1 && exact();
    if ((own || kMaskedStores) && (neuron.type == NeuronType::None || neuron.type == NeuronType::ReLU)) {
      // Each tile straight from the registers, bias and relu on the way: vector by vector where
      // the positions are the output's own, else in pieces.
      const size_t plane = static_cast<size_t>(rows_) * cols_;
      std::vector<Piece> pieces(own ? 0 : nr_ + shape_.nv + 2);
      std::vector<int> first(shape_.nv + 1);
      for (int t = t0; t < t1; ++t) {
        const size_t at = block * mr * plane + (own ? static_cast<size_t>(t) * nr_ : 0);
        Direct d{out + at, plane, bias ? bias + grp * m_ + block * mr : nullptr, neuron.type == NeuronType::ReLU, valid};
        if (addend) d.addend = addend + at;
        if (!own) {
          lay_pieces(t, count, pieces.data(), first.data());
          d.pieces = pieces.data();
          d.first = first.data();
        }
        tile_at(t)(terms_, a, frame + static_cast<size_t>(t) * nr_, off_.data(), tile, &d);
      }
      return;
    }
    for (int t = t0; t < t1; ++t) {
      tile_at(t)(terms_, a, frame + static_cast<size_t>(t) * nr_, off_.data(), tile, nullptr);
      const int q0 = t * nr_, width = t == tiles_ - 1 ? tail_nr_ : nr_;
      for (int r = 0; r < valid; ++r) {
        const int o = block * mr + r;
        const float* from = tile + r * width;
        float* plane = out + static_cast<size_t>(o) * rows_ * cols_;
        const float b = bias ? bias[grp * m_ + o] : 0.f;
        // Bias and neuron applied while the tile is in cache; the common epilogues inline.
        for_each_run(t, count, [&](int lo, int hi, ptrdiff_t at) {
          float* to = plane + at + lo;
          const float* value = from + (lo - q0);
          if (addend) {
            std::copy(value, value + (hi - lo), to);
            bias_neuron(to, hi - lo, bias ? bias + grp * m_ + o : nullptr, neuron, addend + (to - out));
          } else if (neuron.type == NeuronType::ReLU) {
            for (int e = 0; e < hi - lo; ++e) to[e] = std::max(value[e] + b, 0.f);
          } else if (neuron.type == NeuronType::None) {
            for (int e = 0; e < hi - lo; ++e) to[e] = value[e] + b;
          } else {
            std::copy(value, value + (hi - lo), to);
            bias_neuron(to, hi - lo, bias ? bias + grp * m_ + o : nullptr, neuron);
          }
        });
      }
    }
  }

 private:
  ProductTile tile_at(int t) const { return t == tiles_ - 1 && tail_ ? tail_ : shape_.tile; }
  // Calls fn(lo, hi, at) for each run [lo, hi) of tile t's positions that are consecutive
  // outputs (columns of one row of one of the frame's first `count` images): position q's
  // output is at `at + q` from row 0's plane. A row of the frame is `images_` spans.
  template <typename Fn>
  void for_each_run(int t, int count, Fn fn) const {
    const int q0 = t * nr_, q1 = std::min(rows_ * pitch_, q0 + nr_);
    int row = q0 / pitch_, i = q0 % pitch_ / span_;
    for (int start = row * pitch_ + i * span_; start < q1; start += span_) {
      const int lo = std::max(q0, start), hi = std::min(q1, start + cols_);
      if (i < count && lo < hi)
        fn(lo, hi, static_cast<ptrdiff_t>(i) * out_image_ + static_cast<ptrdiff_t>(row) * cols_ - start);
      if (++i == images_) i = 0, ++row;
    }
  }
  // Tile t's vectors as pieces of lanes (pieces[first[v], first[v + 1]) for vector v).
  void lay_pieces(int t, int count, Piece* pieces, int* first) const {
    const int q0 = t * nr_;
    int n = 0, next = 0;
    for_each_run(t, count, [&](int lo, int hi, ptrdiff_t at) {
      for (int q = lo; q < hi;) {
        const int v = (q - q0) / V, lane0 = q0 + v * V, end = std::min(hi, lane0 + V);
        while (next <= v) first[next++] = n;
        pieces[n++] = {at + lane0, ((1u << (end - lane0)) - 1) & ~((1u << (q - lane0)) - 1)};
        q = end;
      }
    });
    while (next <= shape_.nv) first[next++] = n;
  }

  const ProductShape& shape_;
  int m_, terms_, rows_, cols_, pitch_, span_, images_, nr_, tiles_, groups_;
  ProductTile tail_ = nullptr;  // the last tile's, where it is narrower
  int tail_nr_ = nr_;           // the last tile's positions
  size_t out_image_;
  std::vector<int> off_;             // each term's offset into the frame
  std::unique_ptr<float[]> packed_;  // [group][block][term][mr], zero past m
  const float* in_place_ = nullptr;  // or a[group·m + m][term], read in place
};

// How many of n images each frame holds side by side: one, unless more pad the product's
// positions (a small image's fill few register tiles) by a tenth less, frames taken whole by the
// threads; then the count that pads least with each frame at most a few MiB. Only for
// stride-1 windows: a tile then reads rows several times as long (phase planes more so), and
// each image's columns take their own epilogue, which a short product (a 1×1 window) does not repay.
int images_per_frame(const ConvGeometry& g, int m, int rows, const Frame& one, int channels, int n, int threads) {
  if (g.sy != 1 || g.sx != 1 || g.kh * g.kw == 1) return 1;
  const size_t most = std::max<size_t>(1, (4u << 20) / (sizeof(float) * channels * one.size()));
  const auto cost = [&](int k) {
    const int frames = (n + k - 1) / k, positions = rows * one.w * k;
    const ProductShape& s = least_padded(kProductShapes, m, positions, &ProductShape::mr, &ProductShape::nv);
    return static_cast<long>((frames + threads - 1) / threads) * round_up(m, s.mr) * round_up(positions, s.nv * V);
  };
  int best = 1;
  for (int k = 2; k <= std::min<long>({n, 16, static_cast<long>(most)}) && (n + k - 1) / k >= threads; ++k)
    if (cost(k) < cost(best)) best = k;
  return cost(best) * 10 <= cost(1) * 9 ? best : 1;
}

}  // namespace

void frame_convolution(ThreadPool& pool, const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias,
                       const NeuronDescriptor& neuron, const Tensor& y, const Tensor& addend) {
  const auto& is = x.shape();
  const auto& os = y.shape();
  const int n = x.batch(), cg = is.c / g.groups, og = os.c / g.groups;
  Frame frame{os.h + (g.kh - 1) * g.dy / g.sy, os.w + (g.kw - 1) * g.dx / g.sx, g.pad_top, g.pad_left, g.sy, g.sx};
  frame.used_by(g.kh, g.kw, g.dy, g.dx);
  frame.narrow(os.w, is.w);
  // A 1×1 window over the unpadded image whose tiles end at its last pixel reads the image itself.
  const bool in_place = g.kh == 1 && g.kw == 1 && g.sy == 1 && g.sx == 1 && g.pad_top == 0 && g.pad_left == 0 &&
                        os.h == is.h && os.w == is.w && os.h * os.w % V == 0;
  frame.images = in_place ? 1 : images_per_frame(g, og, os.h, frame, cg, n, pool.size());
  frame.w *= frame.images;
  const size_t plane = static_cast<size_t>(os.h) * os.w, in_image = static_cast<size_t>(is.c) * is.h * is.w;
  FrameProduct product(g, og, cg, frame, os.h, os.w, os.c * plane);
  product.read_in_place(w.data_as<const float>());
  const float* bs = bias.data_as<const float>();
  // Work units are (group, block of output rows). A small batch splits each frame's work in
  // parts: where the frame outweighs the weights, its (tile, unit) pairs taken tile by tile
  // (each part fills only the rows its tiles read; whole tiles alone left 16 threads 17 tiles
  // of a strided convolution at batch 1 to share), else its units (each part reads only its
  // rows of weights).
  const int frames = (n + frame.images - 1) / frame.images, blocks = product.blocks(), units = g.groups * blocks;
  const int tiles = product.tiles();
  const bool by_tiles = !in_place && g.groups == 1 && cg * frame.size() > w.count();
  const long pairs = static_cast<long>(tiles) * units;
  const int parts = frames >= pool.size()
                        ? 1
                        : static_cast<int>(std::min<long>(by_tiles ? pairs : units, pool.size() / frames));
  // Tiles in chunks whose share of the frame stays in the L2 cache while every block of output
  // rows reads it (a frame of many channels streams otherwise, once per block).
  const int chunk = static_cast<int>(std::clamp<size_t>(
      static_cast<size_t>(tiles) * (256 << 10) / (sizeof(float) * cg * frame.size()), 1, tiles));
  pool.parallel_for(static_cast<size_t>(frames) * parts, [&](size_t first, size_t end) {
    // Zero but for the rows filled below, which are zeroed again however the loop ends (an
    // exception included): every later call, of any frame, relies on the zeros.
    float* buffer = in_place ? nullptr : thread_scratch(Scratch::Frame, std::max(product.extent(), cg * frame.size()));
    std::vector<float> tile(product.tile_floats());
    long framed = -1;
    struct Cleared {
      const Frame& frame;
      int channels;
      float* buffer;
      int from, to;
      ~Cleared() {
        if (from < to) frame.clear(channels, buffer, from, to);
      }
    } filled{frame, cg, buffer, frame.h, 0};
    for (size_t item = first; item < end; ++item) {
      const int f = static_cast<int>(item / parts), part = static_cast<int>(item % parts);
      const int img = f * frame.images, count = std::min(frame.images, n - img);
      // This part's pairs [p0, p1): from unit u0 of tile t0 to unit u1 of tile t1 (exclusive).
      const long p0 = by_tiles ? pairs * part / parts : 0, p1 = by_tiles ? pairs * (part + 1) / parts : pairs;
      const int t0 = static_cast<int>(p0 / units), t1 = static_cast<int>((p1 - 1) / units);
      const int u0 = static_cast<int>(p0 % units), u1 = static_cast<int>((p1 - 1) % units) + 1;
      const auto [r0, r1] = product.frame_rows(frame, t0, t1 + 1);
      // Tiles [ta, tb) of units [ua, ub).
      auto cover = [&](int ta, int tb, int ua, int ub) {
        for (int tc = ta; tc < tb; tc += chunk)
          for (int u = ua; u < ub; ++u) {
            const int grp = u / blocks, block = u % blocks;
            const float* image =
                x.data_as<const float>() + img * in_image + static_cast<size_t>(grp) * cg * is.h * is.w;
            const long key = (static_cast<long>(f) * g.groups + grp) * parts + (by_tiles ? part : 0);
            if (!in_place && key != framed) {
              filled.from = std::min(filled.from, r0), filled.to = std::max(filled.to, r1);
              frame.fill(image, in_image, count, cg, is.h, is.w, buffer, r0, r1);
              framed = key;
            }
            const size_t at = (static_cast<size_t>(img) * os.c + static_cast<size_t>(grp) * og) * plane;
            product.run(count, grp, block, in_place ? image : buffer, y.data_as<float>() + at, tile.data(), bs, neuron,
                        tc, std::min(tb, tc + chunk), addend ? addend.data_as<const float>() + at : nullptr);
          }
      };
      if (!by_tiles) {
        cover(0, tiles, units * part / parts, units * (part + 1) / parts);
      } else if (t0 == t1) {
        cover(t0, t0 + 1, u0, u1);
      } else {
        cover(t0, t0 + 1, u0, units);
        cover(t0 + 1, t1, 0, units);
        cover(t1, t1 + 1, 0, u1);
      }
    }
  });
}

void frame_convolution_gradient(ThreadPool& pool, const ConvGeometry& g, const Tensor& x, const Tensor& w,
                                const Tensor& dy, const Tensor& y, const NeuronDescriptor& neuron, const Tensor& dx,
                                const Tensor& dwt, const Tensor& dbt) {
  const auto& is = x.shape();
  const auto& os = dy.shape();
  const int n = x.batch(), cg = is.c / g.groups, og = os.c / g.groups, taps = g.kh * g.kw, k = cg * taps;
  const size_t in_plane = static_cast<size_t>(is.h) * is.w, out_plane = static_cast<size_t>(os.h) * os.w;
  const bool act = y && neuron.type != NeuronType::None;
  float* dw = dwt.data_as<float>();
  float* db = dbt.data_as<float>();

  // dw[o][t] = Σ over positions q of the input's frame at off[t] + q times dz[o] at q, summed
  // as its transpose ct[t][o] with dz laid out position-major (zero at the dropped columns).
  const Frame xf{os.h + (g.kh - 1) * g.dy, os.w + (g.kw - 1) * g.dx, g.pad_top, g.pad_left};
  const GradientShape& gs = least_padded(kGradientShapes, k, og, &GradientShape::nk, &GradientShape::nvo);
  const int kpad = round_up(k, gs.nk), ldz = round_up(og, gs.nvo * V), positions = os.h * xf.w;
  std::vector<int> xoff(kpad, 0);
  tap_offsets(g, cg, xf, xoff.data());
  const size_t x_extent = *std::max_element(xoff.begin(), xoff.end()) + static_cast<size_t>(positions);
  const size_t z_floats = static_cast<size_t>(positions) * ldz;

  // dx is the forward product of dz's frame with the weights turned 180° and their input and
  // output channels swapped.
  const Frame zf{is.h + (g.kh - 1) * g.dy, is.w + (g.kw - 1) * g.dx, (g.kh - 1) * g.dy - g.pad_top,
                 (g.kw - 1) * g.dx - g.pad_left};
  FrameProduct back(g, cg, og, zf, is.h, is.w);
  if (dx) {
    const float* weights = w.data_as<const float>();
    back.pack(pool, [&](int grp, int c, int t) {
      const int o = t / taps, turned = taps - 1 - t % taps;
      return weights[((static_cast<size_t>(grp) * og + o) * cg + c) * taps + turned];
    });
  }
  const size_t z_extent = back.extent();

  // Units per group: weight-gradient blocks of terms, then blocks of input-gradient rows.
  const int kblocks = dw ? kpad / gs.nk : 0, xblocks = dx ? back.blocks() : 0;
  const int per_group = std::max(kblocks + xblocks, 1);  // one, to sum db, where there is nothing else
  const int units = g.groups * per_group, threads = pool.size();
  // With an image or more per thread, each chunk takes a range of images, several small ones
  // per call (to amortize the tile's final sums); otherwise each image's units are split.
  const int parts = n >= threads ? 1 : std::min(units, threads / n);
  const int chunks = n >= threads ? threads : n * parts;
  const int together = n >= threads ? std::clamp((256 + positions - 1) / positions, 1, (n + threads - 1) / threads) : 1;
  const size_t partial_floats = (dw ? static_cast<size_t>(g.groups) * kpad * ldz : 0) + os.c;
  std::vector<std::vector<float>> partial(chunks);  // each zeroed and filled by its own thread

  pool.parallel_for(static_cast<size_t>(chunks), [&](size_t c0, size_t c1) {
    for (size_t chunk = c0; chunk < c1; ++chunk) {
      std::vector<float>& sums = partial[chunk];
      sums.assign(dw || db ? partial_floats : 0, 0.f);
      std::vector<float> xbuf(dw ? together * x_extent : 0, 0.f), zt(dw ? together * z_floats : 0, 0.f);
      std::vector<float> zbuf(dx ? together * z_extent : 0, 0.f), dz(act ? og * out_plane : 0);
      std::vector<float> tile(back.tile_floats());
      const int part = static_cast<int>(chunk) % parts, u0 = units * part / parts, u1 = units * (part + 1) / parts;
      const int i0 = parts > 1 ? static_cast<int>(chunk) / parts : static_cast<int>(n * chunk / chunks);
      const int i1 = parts > 1 ? i0 + 1 : static_cast<int>(n * (chunk + 1) / chunks);
      for (int first = i0; first < i1; first += together) {
        const int count = std::min(together, i1 - first);
        int framed = -1;
        for (int u = u0; u < u1; ++u) {
          const int grp = u / per_group, unit = u % per_group;
          if (grp != framed) {
            // dz of each image, its position-major copy, its frame, and db's sums (by the part
            // holding the group's first unit).
            const bool bias_here = db && u0 <= grp * per_group;
            for (int i = 0; i < count; ++i) {
              const size_t at = (static_cast<size_t>(first + i) * os.c + static_cast<size_t>(grp) * og) * out_plane;
              const float* z = dy.data_as<const float>() + at;
              if (act) {
                neuron_derivative(z, y.data_as<const float>() + at, dz.data(), og * out_plane, neuron);
                z = dz.data();
              }
              if (dw) {
                xf.fill(x.data_as<const float>() + (static_cast<size_t>(first + i) * is.c + static_cast<size_t>(grp) * cg) * in_plane,
                        0, 1, cg, is.h, is.w, xbuf.data() + i * x_extent);
                float* to = zt.data() + i * z_floats;
                for (int oy = 0; oy < os.h; ++oy)
                  for (int ox = 0; ox < os.w; ++ox) {
                    float* row = to + static_cast<size_t>(oy * xf.w + ox) * ldz;
                    const float* from = z + oy * os.w + ox;
                    for (int o = 0; o < og; ++o) row[o] = from[o * out_plane];
                  }
              }
              if (dx) zf.fill(z, 0, 1, og, os.h, os.w, zbuf.data() + i * z_extent);
              for (int o = 0; bias_here && o < og; ++o) {
                double s = 0;
                for (size_t q = 0; q < out_plane; ++q) s += z[o * out_plane + q];
                sums[partial_floats - os.c + grp * og + o] += static_cast<float>(s);
              }
            }
            framed = grp;
          }
          if (unit < kblocks) {
            float* ct = sums.data() + (static_cast<size_t>(grp) * kpad + unit * gs.nk) * ldz;
            for (int o = 0; o < ldz; o += gs.nvo * V)
              gs.tile(count, positions, zt.data() + o, z_floats, ldz, xbuf.data(), x_extent, xoff.data() + unit * gs.nk,
                      ct + o, ldz);
          } else if (dx) {
            for (int i = 0; i < count; ++i)
              back.run(1, grp, unit - kblocks, zbuf.data() + i * z_extent,
                       dx.data_as<float>() + (static_cast<size_t>(first + i) * is.c + static_cast<size_t>(grp) * cg) * in_plane,
                       tile.data());
          }
        }
      }
    }
  });
  if (!dw && !db) return;
  pool.parallel_for(static_cast<size_t>(g.groups) * k + 1, [&](size_t first, size_t end) {
    for (size_t r = first; r < end; ++r) {
      if (r == static_cast<size_t>(g.groups) * k) {  // the bias row
        for (int o = 0; db && o < os.c; ++o) {
          float s = 0.f;
          for (const auto& part : partial) s += part[partial_floats - os.c + o];
          db[o] = s;
        }
        continue;
      }
      const size_t grp = r / k, t = r % k;
      for (int o = 0; dw && o < og; ++o) {
        float s = 0.f;
        for (const auto& part : partial) s += part[(grp * kpad + t) * ldz + o];
        dw[(grp * og + o) * k + t] = s;
      }
    }
  });
}

}  // namespace nngraph
