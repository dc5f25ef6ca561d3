// The frame convolution kernels against direct loops, on pools of 1, 3 and 8 threads: every
// way the work is split (whole images per thread, several images per call, parts of one image).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "random_values.h"
#include "backends/cpu/conv_frame.h"
#include "backends/cpu/register_tiles.h"

using namespace nngraph;

namespace {

struct FrameCase {
  const char* name;
  int n, c, h, w, o, kh, kw, dy, dx, groups, pt, pl, ho, wo;
};

void PrintTo(const FrameCase& c, std::ostream* os) { *os << c.name; }

// Calls f(img, o, oy, ox, input index, weight index) for every in-bounds term of the convolution.
template <typename F>
void each_term(const FrameCase& k, F f) {
  const int cg = k.c / k.groups, og = k.o / k.groups;
  for (int n = 0; n < k.n; ++n)
    for (int o = 0; o < k.o; ++o)
      for (int oy = 0; oy < k.ho; ++oy)
        for (int ox = 0; ox < k.wo; ++ox)
          for (int c = 0; c < cg; ++c)
            for (int i = 0; i < k.kh; ++i)
              for (int j = 0; j < k.kw; ++j) {
                const int iy = oy - k.pt + i * k.dy, ix = ox - k.pl + j * k.dx;
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                const size_t xi = ((static_cast<size_t>(n) * k.c + o / og * cg + c) * k.h + iy) * k.w + ix;
                f(n, o, oy, ox, xi, ((static_cast<size_t>(o) * cg + c) * k.kh + i) * k.kw + j);
              }
}

class FrameConv : public ::testing::TestWithParam<FrameCase> {
 protected:
  ConvGeometry geometry() const {
    const auto& k = GetParam();
    return {k.kh, k.kw, 1, 1, k.dy, k.dx, k.groups, k.pt, k.pl};
  }
  size_t out_index(int n, int o, int oy, int ox) const {
    const auto& k = GetParam();
    return ((static_cast<size_t>(n) * k.o + o) * k.ho + oy) * k.wo + ox;
  }
};

TEST_P(FrameConv, ForwardMatchesDirectLoops) {
  const auto& k = GetParam();
  const auto x = random_values(static_cast<size_t>(k.n) * k.c * k.h * k.w, 1);
  const auto w = random_values(static_cast<size_t>(k.o) * (k.c / k.groups) * k.kh * k.kw, 2);
  const auto b = random_values(k.o, 3);
  std::vector<double> want(static_cast<size_t>(k.n) * k.o * k.ho * k.wo);
  for (int n = 0; n < k.n; ++n)
    for (int o = 0; o < k.o; ++o)
      for (int q = 0; q < k.ho * k.wo; ++q) want[out_index(n, o, 0, 0) + q] = b[o];
  each_term(k, [&](int n, int o, int oy, int ox, size_t xi, size_t wi) {
    want[out_index(n, o, oy, ox)] += static_cast<double>(x[xi]) * w[wi];
  });
  // And with a residual addend, added before the relu (in every epilogue: from the registers
  // whole or in pieces, and from the tile).
  const auto addend = random_values(want.size(), 8);
  // A sigmoid takes the sums through the tile's buffer, a relu straight from the registers.
  for (NeuronType type : {NeuronType::ReLU, NeuronType::Sigmoid})
    for (bool adds : {false, true})
      for (int threads : {1, 3, 8}) {
        ThreadPool pool(threads);
        std::vector<float> y(want.size(), NAN);
        frame_convolution(pool, geometry(), Tensor(x.data(), k.n, {k.c, k.h, k.w}),
                          Tensor::vector(w.data(), w.size()), Tensor::vector(b.data(), b.size()),
                          NeuronDescriptor::make(type), Tensor(y.data(), k.n, {k.o, k.ho, k.wo}),
                          adds ? Tensor(addend.data(), k.n, {k.o, k.ho, k.wo}) : Tensor());
        for (size_t i = 0; i < want.size(); ++i) {
          const double v = want[i] + (adds ? addend[i] : 0.0);
          ASSERT_NEAR(y[i], type == NeuronType::ReLU ? std::max(v, 0.0) : 1 / (1 + std::exp(-v)), 1e-4)
              << threads << " threads, neuron " << static_cast<int>(type) << ", "
              << (adds ? "with" : "without") << " an addend, " << i;
        }
      }
}

TEST_P(FrameConv, GradientsMatchDirectLoops) {
  const auto& k = GetParam();
  const size_t xs = static_cast<size_t>(k.n) * k.c * k.h * k.w, ys = static_cast<size_t>(k.n) * k.o * k.ho * k.wo;
  const size_t ws = static_cast<size_t>(k.o) * (k.c / k.groups) * k.kh * k.kw;
  const auto x = random_values(xs, 4), w = random_values(ws, 5), dy = random_values(ys, 6), y = random_values(ys, 7);
  // Through a ReLU whose output is y: dz = dy where y > 0.
  std::vector<double> dz(ys), dx(xs), dw(ws), db(k.o);
  for (size_t i = 0; i < ys; ++i) dz[i] = y[i] > 0.f ? dy[i] : 0.0;
  each_term(k, [&](int n, int o, int oy, int ox, size_t xi, size_t wi) {
    const double z = dz[out_index(n, o, oy, ox)];
    dx[xi] += z * w[wi];
    dw[wi] += z * x[xi];
  });
  for (int n = 0; n < k.n; ++n)
    for (int o = 0; o < k.o; ++o)
      for (int q = 0; q < k.ho * k.wo; ++q) db[o] += dz[out_index(n, o, 0, 0) + q];
  const Tensor xt(x.data(), k.n, {k.c, k.h, k.w}), yt(y.data(), k.n, {k.o, k.ho, k.wo}),
      dyt(dy.data(), k.n, {k.o, k.ho, k.wo}), wt = Tensor::vector(w.data(), ws);
  const auto relu = NeuronDescriptor::make(NeuronType::ReLU);
  for (int threads : {1, 3, 8}) {
    ThreadPool pool(threads);
    std::vector<float> gx(xs, NAN), gw(ws, NAN), gb(k.o, NAN);
    frame_convolution_gradient(pool, geometry(), xt, wt, dyt, yt, relu, Tensor(gx.data(), k.n, {k.c, k.h, k.w}),
                               Tensor::vector(gw.data(), ws), Tensor::vector(gb.data(), k.o));
    for (size_t i = 0; i < xs; ++i) ASSERT_NEAR(gx[i], dx[i], 1e-4) << threads << " threads, dx " << i;
    for (size_t i = 0; i < ws; ++i) ASSERT_NEAR(gw[i], dw[i], 1e-3) << threads << " threads, dw " << i;
    for (int i = 0; i < k.o; ++i) ASSERT_NEAR(gb[i], db[i], 1e-3) << threads << " threads, db " << i;
    // Each result alone, as a first layer (no dx) or frozen weights (no dw) ask for them.
    std::vector<float> only_x(xs, NAN), only_w(ws, NAN), only_b(k.o, NAN);
    frame_convolution_gradient(pool, geometry(), xt, wt, dyt, yt, relu, Tensor(only_x.data(), k.n, {k.c, k.h, k.w}),
                               Tensor(), Tensor());
    frame_convolution_gradient(pool, geometry(), xt, wt, dyt, yt, relu, Tensor(), Tensor::vector(only_w.data(), ws),
                               Tensor());
    frame_convolution_gradient(pool, geometry(), xt, wt, dyt, yt, relu, Tensor(), Tensor(),
                               Tensor::vector(only_b.data(), k.o));
    EXPECT_EQ(only_x, gx);
    EXPECT_EQ(only_w, gw);
    EXPECT_EQ(only_b, gb);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FrameConv,
    ::testing::Values(
        // name, n, c, h, w, o, kh, kw, dy, dx, groups, pt, pl, ho, wo
        FrameCase{"same_3x3_odd_channels", 4, 5, 9, 11, 7, 3, 3, 1, 1, 1, 1, 1, 9, 11},
        FrameCase{"wide_many_tiles", 5, 24, 14, 14, 40, 3, 3, 1, 1, 1, 1, 1, 14, 14},
        // A long sum (360 terms) over several blocks of outputs
        FrameCase{"long_sum", 2, 40, 9, 10, 44, 3, 3, 1, 1, 1, 1, 1, 9, 10},
        FrameCase{"small_images_together", 19, 6, 4, 3, 17, 3, 3, 1, 1, 1, 1, 1, 4, 3},
        FrameCase{"groups_dilation_even_kernel", 3, 4, 8, 9, 6, 2, 4, 2, 1, 2, 1, 1, 8, 9},
        FrameCase{"padding_past_the_kernel", 2, 3, 5, 4, 4, 3, 3, 1, 1, 1, 3, 2, 9, 6},
        FrameCase{"valid_5x5", 3, 2, 12, 10, 3, 5, 5, 1, 1, 1, 0, 0, 8, 6},
        FrameCase{"pointwise", 6, 9, 5, 7, 11, 1, 1, 1, 1, 1, 0, 0, 5, 7},
        FrameCase{"pointwise_in_place", 3, 9, 8, 8, 11, 1, 1, 1, 1, 1, 0, 0, 8, 8},
        FrameCase{"depthwise", 2, 6, 7, 7, 6, 3, 3, 1, 1, 6, 1, 1, 7, 7}),
    [](const ::testing::TestParamInfo<FrameCase>& info) { return std::string(info.param.name); });

}  // namespace

// A frame's row copies (whole vectors and a masked tail) for every length up to three vectors
// and more, from sources that end exactly where the last value read lies.
TEST(FrameRows, CopiedWholeAndEvenOnly) {
  for (int n = 1; n <= 3 * tiles::V + 1; ++n) {
    std::vector<float> from(2 * n - 1), to(n + 1, -1.f);
    for (size_t i = 0; i < from.size(); ++i) from[i] = 0.5f + static_cast<float>(i);
    tiles::copy_even(to.data(), from.data(), n);
    for (int v = 0; v < n; ++v) ASSERT_EQ(to[v], from[2 * v]) << n;
    ASSERT_EQ(to[n], -1.f) << n;
    tiles::copy_floats(to.data(), from.data() + n - 1, n);
    for (int v = 0; v < n; ++v) ASSERT_EQ(to[v], from[n - 1 + v]) << n;
    ASSERT_EQ(to[n], -1.f) << n;
  }
}
