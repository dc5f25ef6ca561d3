#pragma once
// The frames the cpu convolutions read (conv_frame.cpp, conv_frame_gradient.cpp): zero-padded
// copies of images, split into phase planes for strides, and the register-tiled products whose
// rows are read in place from them.
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/register_tiles.h"
#include "ops/conv.h"

namespace nngraph::frames {

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
                copy_floats(to + v0, row + v0, v1 - v0);
              else if (sx == 2)
                copy_even(to + v0, row + 2 * static_cast<ptrdiff_t>(v0), v1 - v0);
              else
                for (int v = v0; v < v1; ++v) to[v] = row[static_cast<ptrdiff_t>(v) * sx];
            }
        }
  }

 private:
  static int count(unsigned mask, int s) { return mask == ~0u ? s : __builtin_popcount(mask); }
  static int rank(unsigned mask, int p) { return mask == ~0u ? p : __builtin_popcount(mask & ((1u << p) - 1)); }
};

// The frame a forward convolution reads: every row and column some output's window reads,
// only the phase planes its taps read, narrowed to the next row's left padding.
inline Frame forward_frame(const ConvGeometry& g, const ImageShape& in, const ImageShape& out) {
  Frame f{out.h + (g.kh - 1) * g.dy / g.sy, out.w + (g.kw - 1) * g.dx / g.sx, g.pad_top, g.pad_left, g.sy, g.sx};
  f.used_by(g.kh, g.kw, g.dy, g.dx);
  f.narrow(out.w, in.w);
  return f;
}

// Term (c, i, j)'s offset: channel c's frame at tap (i, j), in the tap's phase plane.
inline void tap_offsets(const ConvGeometry& g, int channels, const Frame& f, int* off) {
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
    if (own() || !kMaskedStores) return;  // only stores of lanes go by pieces
    // Each tile's pieces for a whole frame, laid once here rather than by every block of output
    // rows in run() (a tenth of a strided 1×1 convolution's time at batch 64, 128 → 256 channels).
    std::vector<Piece> laid(nr_ + shape_.nv + 2);
    firsts_.resize(static_cast<size_t>(tiles_) * (shape_.nv + 1));
    for (int t = 0; t < tiles_; ++t) {
      int* first = firsts_.data() + static_cast<size_t>(t) * (shape_.nv + 1);
      lay_pieces(t, images_, laid.data(), first);
      piece_at_.push_back(pieces_.size());
      pieces_.insert(pieces_.end(), laid.begin(), laid.begin() + first[shape_.nv]);
    }
  }
  int blocks() const { return (m_ + shape_.mr - 1) / shape_.mr; }
  // Whether the tiles end exactly at the last position (they read nothing past it): the last
  // tile ends at the next whole vector.
  bool exact() const { return rows_ * pitch_ % V == 0; }
  // Whether the positions are the output's own (one image, no columns past its width, whole vectors).
  bool own() const { return pitch_ == cols_ && images_ == 1 && exact(); }
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
    const bool own = this->own();
    if ((own || kMaskedStores) && (neuron.type == NeuronType::None || neuron.type == NeuronType::ReLU)) {
      // Each tile straight from the registers, bias and relu on the way: vector by vector where
      // the positions are the output's own, else in pieces (laid here for a partial frame).
      const size_t plane = static_cast<size_t>(rows_) * cols_;
      const bool partial = !own && count < images_;
      std::vector<Piece> pieces(partial ? nr_ + shape_.nv + 2 : 0);
      std::vector<int> first(partial ? shape_.nv + 1 : 0);
      for (int t = t0; t < t1; ++t) {
        const size_t at = block * mr * plane + (own ? static_cast<size_t>(t) * nr_ : 0);
        Direct d{out + at, plane, bias ? bias + grp * m_ + block * mr : nullptr, neuron.type == NeuronType::ReLU, valid};
        if (addend) d.addend = addend + at;
        if (partial) {
          lay_pieces(t, count, pieces.data(), first.data());
          d.pieces = pieces.data();
          d.first = first.data();
        } else if (!own) {
          d.pieces = pieces_.data() + piece_at_[t];
          d.first = firsts_.data() + static_cast<size_t>(t) * (shape_.nv + 1);
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
  std::vector<Piece> pieces_;        // a whole frame's tiles' pieces, where not own()
  std::vector<size_t> piece_at_;     // each tile's first among them
  std::vector<int> firsts_;          // each tile's vectors' firsts (shape_.nv + 1 a tile), as lay_pieces
  std::unique_ptr<float[]> packed_;  // [group][block][term][mr], zero past m
  const float* in_place_ = nullptr;  // or a[group·m + m][term], read in place
};

}  // namespace nngraph::frames
