// Convolutions with the outputs in vector lanes (see conv_lanes.h).
#include "backends/cpu/conv_lanes.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/frame.h"

namespace nngraph {
namespace {

using namespace frames;

// Positions a tile, by blocks of V outputs: 7 × 2 (14 accumulators, one broadcast and two
// filter vectors a term) ran at 94% of a Zen 4 core's peak, ahead of 7 × 1, 7 × 4 and 4 × 4.
#if defined(__AVX512F__)
constexpr int kP = 7;
#else  // 16 registers: 12 accumulators
constexpr int kP = 6;
#endif
constexpr int kNV = 2;
// Terms a pass over a part's tiles takes: its filter rows (kChunk · kNV · V floats, 16 KiB with
// 512-bit vectors) stay in the first-level cache from tile to tile. A tile over every term
// read the rows of a long sum (4608 terms, 576 KiB) from the second level each time.
constexpr int kChunk = 128;

// c[p][v][l] (+)= Σ_t a[v·block + t·V + l] · x[p][off[t]] for p < P, v < NV: a position's input
// broadcast to the lanes of its outputs, added to c's values where `more`.
template <int P, int NV>
void lane_tile(int terms, const float* const* x, const int* __restrict off, const float* a, size_t block,
               float* __restrict c, bool more) {
  vf acc[P][NV];
  const float* xp[P];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) {
    xp[p] = x[p];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[p][v] = more ? load(c + (p * NV + v) * V) : vf{};
  }
  for (int t = 0; t < terms; ++t, a += V) {
    const int o = off[t];
    vf w[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) w[v] = load(a + v * block);
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      const vf b = splat(xp[p][o]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[p][v] += b * w[v];
    }
  }
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) store(c + (p * NV + v) * V, acc[p][v]);
}

using LaneTile = void (*)(int, const float* const*, const int*, const float*, size_t, float*, bool);
// kTiles[nv - 1][p - 1]: a tile of p positions and nv blocks.
template <int NV, size_t... P>
constexpr std::array<LaneTile, kP> tiles_of(std::index_sequence<P...>) {
  return {lane_tile<static_cast<int>(P) + 1, NV>...};
}
const std::array<LaneTile, kP> kTiles[kNV] = {tiles_of<1>(std::make_index_sequence<kP>()),
                                              tiles_of<2>(std::make_index_sequence<kP>())};

}  // namespace

size_t lanes_floats(int outputs, int terms) { return static_cast<size_t>((outputs + V - 1) / V) * terms * V; }

void pack_lanes(ThreadPool& pool, const float* w, int outputs, int terms, float* packed) {
  const int blocks = (outputs + V - 1) / V;
  pool.parallel_for(static_cast<size_t>(blocks), [&](size_t first, size_t end) {
    for (size_t b = first; b < end; ++b) {
      float* to = packed + b * terms * V;
      for (int t = 0; t < terms; ++t)
        for (int l = 0; l < V; ++l) {
          const size_t o = b * V + l;
          to[static_cast<size_t>(t) * V + l] = o < static_cast<size_t>(outputs) ? w[o * terms + t] : 0.f;
        }
    }
  });
}

void lane_convolution(ThreadPool& pool, const ConvGeometry& g, const Tensor& x, const float* packed,
                      const Tensor& bias, const NeuronDescriptor& neuron, const Tensor& y, const Tensor& addend) {
  const auto& is = x.shape();
  const auto& os = y.shape();
  const int n = x.batch(), terms = is.c * g.kh * g.kw, positions = os.h * os.w;
  Frame frame = forward_frame(g, is, os);
  // A 1×1 window over the unpadded image reads the image itself (its frame would be a copy).
  const bool in_place = g.kh == 1 && g.kw == 1 && g.sy == 1 && g.sx == 1 && g.pad_top == 0 && g.pad_left == 0 &&
                        frame.h == is.h && frame.w == is.w;
  std::vector<int> off(terms);
  tap_offsets(g, is.c, frame, off.data());
  const size_t plane = static_cast<size_t>(positions), in_image = static_cast<size_t>(is.c) * is.h * is.w;
  const int blocks = (os.c + V - 1) / V, groups = (blocks + kNV - 1) / kNV, tiles = (positions + kP - 1) / kP;
  // Units of an image, (block group, tile) pairs: tile by tile where the frame outweighs the
  // filter (a part then reads only its rows of the frame), else group by group (only its
  // outputs' rows of the filter).
  const long units = static_cast<long>(groups) * tiles;
  const bool by_tiles = static_cast<size_t>(is.c) * frame.size() > static_cast<size_t>(os.c) * terms;
  const int parts = n >= pool.size() ? 1 : static_cast<int>(std::min<long>(units, (pool.size() + n - 1) / n));
  // Floats of frame read: a narrowed frame's last position reads past the last channel's plane,
  // into zeros (frame.h).
  const size_t last = static_cast<size_t>(positions - 1) / os.w * frame.w + (positions - 1) % os.w;
  const size_t reach = std::max(static_cast<size_t>(is.c) * frame.size(),
                                *std::max_element(off.begin(), off.end()) + last + 1);
  const float* bs = bias.data_as<const float>();
  const float* add = addend ? addend.data_as<const float>() : nullptr;
  float* out = y.data_as<float>();
  // Unit u's first block and blocks, first position and positions.
  struct Unit {
    int b0, nv, q0, np;
  };
  auto unit = [&](long u) {
    const long grp = by_tiles ? u % groups : u / tiles, tile = by_tiles ? u / groups : u % tiles;
    const int b0 = static_cast<int>(grp) * kNV, q0 = static_cast<int>(tile) * kP;
    return Unit{b0, std::min(kNV, blocks - b0), q0, std::min(kP, positions - q0)};
  };
  const size_t block = static_cast<size_t>(terms) * V;  // floats of a block's packed filter
  pool.parallel_for(static_cast<size_t>(n) * parts, [&](size_t first, size_t end) {
    // Zero but for the image's rows, which are zeroed again however the loop ends: every
    // later call (of either kernel) relies on the zeros.
    float* buffer = in_place ? nullptr : thread_scratch(Scratch::Frame, reach);
    struct Cleared {
      const Frame& frame;
      int channels;
      float* buffer;
      ~Cleared() {
        if (buffer) frame.clear(channels, buffer, 0, frame.h);
      }
    } cleared{frame, is.c, nullptr};
    constexpr size_t kTile = static_cast<size_t>(kP) * kNV * V;
    std::vector<float> c;
    const float* xs[kP];
    int framed = -1;
    for (size_t item = first; item < end; ++item) {
      const int img = static_cast<int>(item / parts), part = static_cast<int>(item % parts);
      const float* image = x.data_as<const float>() + img * in_image;
      if (!in_place && img != framed) {
        cleared.buffer = buffer;
        frame.fill(image, in_image, 1, is.c, is.h, is.w, buffer);
        framed = img;
      }
      const float* src = in_place ? image : buffer;
      const size_t at = static_cast<size_t>(img) * os.c * plane;
      const long u0 = units * part / parts, u1 = units * (part + 1) / parts;
      c.resize(static_cast<size_t>(u1 - u0) * kTile);
      // Chunk by chunk of terms, the part's units group by group (each group's rows of the
      // chunk read once a pass), each tile's sums kept in c between chunks.
      for (int k0 = 0; k0 < terms; k0 += kChunk) {
        const int kt = std::min(kChunk, terms - k0);
        auto pass = [&](long u) {
          const Unit w = unit(u);
          for (int p = 0; p < w.np; ++p) xs[p] = src + (w.q0 + p) / os.w * frame.w + (w.q0 + p) % os.w;
          kTiles[w.nv - 1][w.np - 1](kt, xs, off.data() + k0, packed + w.b0 * block + static_cast<size_t>(k0) * V,
                                     block, c.data() + (u - u0) * kTile, k0 > 0);
        };
        if (!by_tiles)
          for (long u = u0; u < u1; ++u) pass(u);
        else
          for (long grp = 0; grp < groups; ++grp)
            for (long u = u0 + ((grp - u0) % groups + groups) % groups; u < u1; u += groups) pass(u);
      }
      for (long u = u0; u < u1; ++u) {
        const auto [b0, nv, q0, np] = unit(u);
        // Each output's np values to its plane, bias, addend and neuron on the way.
        for (int v = 0; v < nv; ++v)
          for (int l = 0; l < V; ++l) {
            const int o = (b0 + v) * V + l;
            if (o >= os.c) break;
            const size_t to = at + o * plane + q0;
            float* row = out + to;
            const float* value = c.data() + (u - u0) * kTile + v * V + l;  // position p's at p·nv·V
            const float b = bs ? bs[o] : 0.f;
            const float* a = add ? add + to : nullptr;
            // The common epilogues inline (a short row each): a call per row cost as much as
            // the row's products in a 1×1 convolution of 64 channels.
            if (neuron.type == NeuronType::ReLU || neuron.type == NeuronType::None) {
              const bool relu = neuron.type == NeuronType::ReLU;
              for (int p = 0; p < np; ++p) {
                const float r = value[p * nv * V] + b + (a ? a[p] : 0.f);
                row[p] = relu ? std::max(r, 0.f) : r;  // relu keeps NaN
              }
            } else {
              for (int p = 0; p < np; ++p) row[p] = value[p * nv * V];
              bias_neuron(row, np, bs ? bs + o : nullptr, neuron, a);
            }
          }
      }
    }
  });
}

}  // namespace nngraph
