// cpu kernels against direct loops on random data.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cmath>
#include <thread>
#include <vector>

#include "random_values.h"
#include "backends/cpu/cpu_backend.h"
#include "nngraph/nodes.h"
#include "ops/arithmetic.h"
#include "ops/cast.h"
#include "ops/optimizer.h"
#include "ops/concatenation.h"
#include "ops/conv.h"
#include "ops/dropout.h"
#include "ops/loss.h"
#include "ops/neuron.h"
#include "ops/pool.h"
#include "ops/softmax.h"

using namespace nngraph;

namespace {

Image image_of(int n, ImageShape s, const std::vector<float>& v) {
  Image img = Image::allocate({n, s, DType::Float32}, Device());
  img.copy_from_host(v.data());
  return img;
}

std::vector<float> host(const Image& img) {
  std::vector<float> v(img.descriptor().count());
  img.copy_to_host(v.data());
  return v;
}

struct ConvCase {
  int n, c, h, w, o, kh, kw, sy, sx, dy, dx, groups, pt, pl, ho, wo;
};

std::vector<float> direct_conv(const ConvCase& k, const std::vector<float>& x, const std::vector<float>& w,
                               const std::vector<float>& b) {
  const int cg = k.c / k.groups, og = k.o / k.groups;
  std::vector<float> y(static_cast<size_t>(k.n) * k.o * k.ho * k.wo);
  for (int n = 0; n < k.n; ++n)
    for (int o = 0; o < k.o; ++o)
      for (int oy = 0; oy < k.ho; ++oy)
        for (int ox = 0; ox < k.wo; ++ox) {
          double acc = b[o];
          const int g = o / og;
          for (int c = 0; c < cg; ++c)
            for (int i = 0; i < k.kh; ++i)
              for (int j = 0; j < k.kw; ++j) {
                const int iy = oy * k.sy - k.pt + i * k.dy, ix = ox * k.sx - k.pl + j * k.dx;
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                acc += static_cast<double>(x[((static_cast<size_t>(n) * k.c + g * cg + c) * k.h + iy) * k.w + ix]) *
                       w[((static_cast<size_t>(o) * cg + c) * k.kh + i) * k.kw + j];
              }
          y[((static_cast<size_t>(n) * k.o + o) * k.ho + oy) * k.wo + ox] = static_cast<float>(std::max(acc, 0.0));
        }
  return y;
}

}  // namespace

std::string conv_case_name(const ::testing::TestParamInfo<ConvCase>& info) {
  static const char* names[] = {"same", "stride2_groups", "dilation", "pointwise", "full", "tiled_rows"};
  return names[info.index];
}

class ConvKernel : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvKernel, MatchesDirectLoops) {
  const ConvCase k = GetParam();
  const auto x = random_values(static_cast<size_t>(k.n) * k.c * k.h * k.w, 1);
  const auto w = random_values(static_cast<size_t>(k.o) * (k.c / k.groups) * k.kh * k.kw, 2);
  const auto b = random_values(k.o, 3);
  Image in = image_of(k.n, {k.c, k.h, k.w}, x);
  Image out = Image::allocate({k.n, {k.o, k.ho, k.wo}, DType::Float32}, Device());
  dispatch<ConvolutionKernel>(cpu_backend(), ConvGeometry{k.kh, k.kw, k.sy, k.sx, k.dy, k.dx, k.groups, k.pt, k.pl},
                              in, Tensor::vector(w.data(), w.size()), Tensor::vector(b.data(), b.size()),
                              NeuronDescriptor::make(NeuronType::ReLU), out);
  const auto got = host(out), want = direct_conv(k, x, w, b);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << i;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvKernel,
    ::testing::Values(ConvCase{2, 1, 28, 28, 8, 5, 5, 1, 1, 1, 1, 1, 2, 2, 28, 28},   // same
                      ConvCase{3, 4, 9, 7, 6, 3, 3, 2, 2, 1, 1, 2, 1, 1, 5, 4},     // stride 2, groups
                      ConvCase{1, 3, 11, 10, 5, 3, 2, 1, 1, 2, 3, 1, 0, 0, 7, 7},   // dilation
                      ConvCase{5, 6, 4, 4, 6, 1, 1, 1, 1, 1, 1, 3, 0, 0, 4, 4},     // 1×1 direct
                      ConvCase{1, 2, 3, 3, 4, 3, 3, 1, 1, 1, 1, 1, 2, 2, 5, 5},     // full
                      ConvCase{3, 4, 2, 23, 6, 1, 5, 1, 5, 1, 1, 2, 0, 0, 2, 4}),   // windows tile rows
    conv_case_name);

TEST(FullyConnectedKernel, MatchesDirectLoops) {
  const int n = 7, k = 45, o = 13;
  const auto x = random_values(static_cast<size_t>(n) * k, 4), w = random_values(static_cast<size_t>(o) * k, 5),
             b = random_values(o, 6);
  Image in = image_of(n, {5, 3, 3}, x);
  Image out = Image::allocate({n, {o, 1, 1}, DType::Float32}, Device());
  dispatch<FullyConnectedKernel>(cpu_backend(), in, Tensor::vector(w.data(), w.size()),
                                 Tensor::vector(b.data(), b.size()), NeuronDescriptor::make(NeuronType::Sigmoid), out,
                                 false, false);
  const auto got = host(out);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < o; ++j) {
      double acc = b[j];
      for (int i = 0; i < k; ++i) acc += static_cast<double>(x[r * k + i]) * w[j * k + i];
      ASSERT_NEAR(got[r * o + j], 1.0 / (1.0 + std::exp(-acc)), 1e-5);
    }
}

TEST(PoolingKernel, MaxAndAverageWithPadding) {
  const int n = 2, c = 3, h = 5, w = 6;
  const auto x = random_values(static_cast<size_t>(n) * c * h * w, 7);
  Image in = image_of(n, {c, h, w}, x);
  // Overlapping padded windows, and the halving ones (their own path; an odd row left over).
  for (const PoolGeometry g : {PoolGeometry{3, 3, 2, 2, 1, 1, false}, PoolGeometry{2, 2, 2, 2, 0, 0, false}}) {
    const int ho = (h + 2 * g.pad_top - g.kh) / g.sy + 1, wo = (w + 2 * g.pad_left - g.kw) / g.sx + 1;
    // Max pooling's winners: a byte per output, each image's 16-byte blocks apart.
    const int image_floats = (c * ho * wo + 15) / 16 * 4;
    Image winners = Image::allocate({n, {image_floats, 1, 1}, DType::Float32}, Device());
    for (auto mode : {PoolingMode::Max, PoolingMode::Average}) {
      Image out = Image::allocate({n, {c, ho, wo}, DType::Float32}, Device());
      const bool max = mode == PoolingMode::Max;
      dispatch<PoolingKernel>(cpu_backend(), mode, g, in, out, max ? Tensor(winners) : Tensor());
      const auto got = host(out);
      const auto* won = static_cast<const uint8_t*>(winners.data());
      for (int p = 0; p < n * c; ++p)
        for (int oy = 0; oy < ho; ++oy)
          for (int ox = 0; ox < wo; ++ox) {
            double best = -1e30, sum = 0;
            int count = 0, tap = -1;
            for (int i = 0; i < g.kh; ++i)
              for (int j = 0; j < g.kw; ++j) {
                const int iy = oy * g.sy - g.pad_top + i, ix = ox * g.sx - g.pad_left + j;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                const float v = x[(static_cast<size_t>(p) * h + iy) * w + ix];
                if (v > best) tap = i * g.kw + j;  // the first maximum in scan order
                best = std::max(best, static_cast<double>(v));
                sum += v;
                ++count;
              }
            const double want = max ? best : sum / count;
            ASSERT_NEAR(got[(static_cast<size_t>(p) * ho + oy) * wo + ox], want, 1e-6);
            if (max) EXPECT_EQ(won[p / c * image_floats * 4 + (p % c * ho + oy) * wo + ox], tap);
          }
    }
  }
}

TEST(SoftMaxKernel, AcrossChannelsPerPixel) {
  const int n = 2, c = 4, h = 3, w = 2;
  auto x = random_values(static_cast<size_t>(n) * c * h * w, 8);
  x[0] = 80.f;  // large logits must not overflow
  Image in = image_of(n, {c, h, w}, x);
  Image out = Image::allocate(in.descriptor(), Device()), lout = Image::allocate(in.descriptor(), Device());
  dispatch<SoftMaxKernel>(cpu_backend(), false, in, out);
  dispatch<SoftMaxKernel>(cpu_backend(), true, in, lout);
  const auto s = host(out), l = host(lout);
  for (int img = 0; img < n; ++img)
    for (int p = 0; p < h * w; ++p) {
      double z = 0, mx = -1e30;
      for (int ch = 0; ch < c; ++ch) mx = std::max(mx, static_cast<double>(x[(img * c + ch) * h * w + p]));
      for (int ch = 0; ch < c; ++ch) z += std::exp(x[(img * c + ch) * h * w + p] - mx);
      for (int ch = 0; ch < c; ++ch) {
        const size_t i = (static_cast<size_t>(img) * c + ch) * h * w + p;
        ASSERT_NEAR(s[i], std::exp(x[i] - mx) / z, 1e-6);
        ASSERT_NEAR(l[i], x[i] - mx - std::log(z), 1e-5);
      }
    }
}

TEST(ThreadPoolTest, CoversRangeOnceAndPropagatesErrors) {
  ThreadPool pool(3);
  std::vector<int> hits(1000, 0);
  pool.parallel_for(hits.size(), [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) ++hits[i];
  });
  for (int h : hits) ASSERT_EQ(h, 1);
  EXPECT_THROW(pool.parallel_for(10, [](size_t b, size_t) {
                 if (b == 0) throw std::runtime_error("boom");
               }),
               std::runtime_error);
}

// Jobs of changing sizes from two threads at once: a worker late from one job must not take
// a chunk of the next (it ran twice, and the caller waited for a count it had passed).
TEST(ThreadPoolTest, BackToBackJobsOfChangingSizeFromTwoThreads) {
  ThreadPool pool(16);
  auto hammer = [&pool](size_t seed) {
    for (size_t round = 0; round < 200000; ++round) {
      const size_t n = 1 + (round * 7 + seed) % 23;
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    }
  };
  std::thread other(hammer, 5);
  hammer(0);
  other.join();
}

// Large freed blocks are kept for the next allocation of the same size (not faulted in again),
// counted as freed, and held to a bound; small ones go back to the system.
TEST(CpuMemory, LargeFreedBlocksKeptForTheSameSize) {
  CpuBackend& b = cpu_backend();
  const size_t large = (size_t{8} << 20) + 5, kept = b.kept_bytes(), current = b.memory_stats().current;
  auto block = b.allocate(large);
  static_cast<char*>(block->data())[large - 1] = 7;
  EXPECT_EQ(b.memory_stats().current, current + large);
  void* first = block->data();
  block.reset();
  EXPECT_EQ(b.memory_stats().current, current);
  EXPECT_EQ(b.kept_bytes(), kept + (size_t{8} << 20) + 64);
  block = b.allocate(large);
  EXPECT_EQ(block->data(), first);
  EXPECT_EQ(b.kept_bytes(), kept);
  block.reset();
  auto other = b.allocate(large + 64);  // another size: a fresh block
  EXPECT_NE(other->data(), first);
  other.reset();
  auto small = b.allocate(size_t{1} << 20);
  small.reset();
  EXPECT_EQ(b.kept_bytes(), kept + 2 * ((size_t{8} << 20) + 64) + 64);
  // Beyond the bound the oldest go (untouched pages: nothing is faulted in).
  auto huge1 = b.allocate(size_t{600} << 20), huge2 = b.allocate(size_t{600} << 20);
  huge1.reset();
  huge2.reset();
  EXPECT_LE(b.kept_bytes(), size_t{1} << 30);
  EXPECT_GE(b.kept_bytes(), size_t{600} << 20);
}

// An op whose kernel a device lacks raises, naming both.
struct UnregisteredKernel : KernelOf<void(Backend&, int)> {
  static constexpr const char* name = "unregistered";
};

TEST(KernelRegistry, AMissingKernelNamesTheOpAndTheDevice) {
  EXPECT_FALSE(has_kernel<UnregisteredKernel>(DeviceType::CPU));
  try {
    dispatch<UnregisteredKernel>(cpu_backend(), 1);
    FAIL() << "no exception";
  } catch (const Unsupported& e) {
    EXPECT_STREQ(e.what(), "[unregistered] no cpu kernel");
  }
  EXPECT_TRUE(has_kernel<PoolingKernel>(DeviceType::CPU));
}
