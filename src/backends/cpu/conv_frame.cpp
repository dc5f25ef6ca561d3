// Convolutions on zero-padded frames (see conv_frame.h and frame.h): how a batch's work is split
// among the threads, and each part's products.
#include "backends/cpu/conv_frame.h"

#include <algorithm>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/frame.h"

namespace nngraph {
namespace {

using namespace frames;

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
  Frame frame = forward_frame(g, is, os);
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

}  // namespace nngraph
