// The lane convolution kernel (outputs in vector lanes, conv_lanes.h) against direct loops, on
// pools of 1, 3 and 8 threads: strides, padding, dilation, output counts that fill part of a
// block, positions that fill part of a tile, the neurons' epilogues and a residual addend.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "random_values.h"
#include "backends/cpu/conv_lanes.h"
#include "ops/conv.h"

using namespace nngraph;

namespace {

struct LaneCase {
  const char* name;
  int n, c, h, w, o, kh, kw, sy, sx, dy, dx, pt, pl, ho, wo;
};

void PrintTo(const LaneCase& c, std::ostream* os) { *os << c.name; }

class LaneConv : public ::testing::TestWithParam<LaneCase> {};

TEST_P(LaneConv, ForwardMatchesDirectLoops) {
  const auto& k = GetParam();
  const int terms = k.c * k.kh * k.kw;
  const auto x = random_values(static_cast<size_t>(k.n) * k.c * k.h * k.w, 1);
  const auto w = random_values(static_cast<size_t>(k.o) * terms, 2);
  const auto b = random_values(k.o, 3);
  const size_t plane = static_cast<size_t>(k.ho) * k.wo;
  std::vector<double> want(k.n * k.o * plane);
  for (int n = 0; n < k.n; ++n)
    for (int o = 0; o < k.o; ++o)
      for (int oy = 0; oy < k.ho; ++oy)
        for (int ox = 0; ox < k.wo; ++ox) {
          double s = b[o];
          for (int c = 0; c < k.c; ++c)
            for (int i = 0; i < k.kh; ++i)
              for (int j = 0; j < k.kw; ++j) {
                const int iy = oy * k.sy - k.pt + i * k.dy, ix = ox * k.sx - k.pl + j * k.dx;
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                s += static_cast<double>(x[((static_cast<size_t>(n) * k.c + c) * k.h + iy) * k.w + ix]) *
                     w[(static_cast<size_t>(o) * k.c + c) * k.kh * k.kw + i * k.kw + j];
              }
          want[(n * k.o + o) * plane + oy * k.wo + ox] = s;
        }
  const auto addend = random_values(want.size(), 8);
  const ConvGeometry g{k.kh, k.kw, k.sy, k.sx, k.dy, k.dx, 1, k.pt, k.pl};
  for (NeuronType type : {NeuronType::None, NeuronType::ReLU, NeuronType::Sigmoid})
    for (bool adds : {false, true})
      for (int threads : {1, 3, 8}) {
        ThreadPool pool(threads);
        std::vector<float> packed(lanes_floats(k.o, terms), NAN), y(want.size(), NAN);
        pack_lanes(pool, w.data(), k.o, terms, packed.data());
        lane_convolution(pool, g, Tensor(x.data(), k.n, {k.c, k.h, k.w}), packed.data(),
                         Tensor::vector(b.data(), b.size()), NeuronDescriptor::make(type),
                         Tensor(y.data(), k.n, {k.o, k.ho, k.wo}),
                         adds ? Tensor(addend.data(), k.n, {k.o, k.ho, k.wo}) : Tensor());
        for (size_t i = 0; i < want.size(); ++i) {
          const double v = want[i] + (adds ? addend[i] : 0.0);
          const double e = type == NeuronType::ReLU ? std::max(v, 0.0) : type == NeuronType::Sigmoid ? 1 / (1 + std::exp(-v)) : v;
          ASSERT_NEAR(y[i], e, 1e-4) << threads << " threads, neuron " << static_cast<int>(type) << ", "
                                     << (adds ? "with" : "without") << " an addend, " << i;
        }
      }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LaneConv,
    ::testing::Values(
        // name, n, c, h, w, o, kh, kw, sy, sx, dy, dx, pt, pl, ho, wo
        LaneCase{"same_3x3_part_block", 2, 5, 9, 11, 7, 3, 3, 1, 1, 1, 1, 1, 1, 9, 11},
        LaneCase{"deep_7x7_two_blocks", 1, 40, 7, 7, 48, 3, 3, 1, 1, 1, 1, 1, 1, 7, 7},
        // 300 terms in three chunks, the units tile by tile (the image outweighs the filter)
        LaneCase{"long_sum_tile_by_tile", 2, 300, 12, 12, 70, 1, 1, 1, 1, 1, 1, 0, 0, 12, 12},
        LaneCase{"strided_3x3", 3, 6, 14, 13, 20, 3, 3, 2, 2, 1, 1, 1, 1, 7, 7},
        LaneCase{"strided_pointwise", 2, 9, 8, 8, 33, 1, 1, 2, 2, 1, 1, 0, 0, 4, 4},
        LaneCase{"pointwise_in_place", 5, 9, 5, 7, 17, 1, 1, 1, 1, 1, 1, 0, 0, 5, 7},
        LaneCase{"stem_7x7_stride_2", 1, 3, 20, 18, 16, 7, 7, 2, 2, 1, 1, 3, 3, 10, 9},
        LaneCase{"dilated_even_kernel", 2, 4, 8, 9, 6, 2, 4, 1, 1, 2, 1, 1, 1, 8, 9},
        LaneCase{"padding_past_the_kernel", 2, 3, 5, 4, 4, 3, 3, 1, 1, 1, 1, 3, 2, 9, 6},
        LaneCase{"one_position", 4, 8, 1, 1, 35, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1}),
    [](const ::testing::TestParamInfo<LaneCase>& info) { return std::string(info.param.name); });

}  // namespace
