// The cuda copies that reorder values (windows' rows, pixels placed back, axes permuted)
// against host references, value for value (skipped without a GPU).
#ifdef NNGRAPH_HAVE_CUDA
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda_vs_cpu.h"

using namespace nngraph;

namespace {

class CudaCopies : public testing_cuda::OnGpu {};

// Windows gathered into rows, against a host gather: a thread per copy unit (16-, 4- and 2-byte
// pixels' parts) or, for narrow pixels and 16-byte rows, a row a thread; and a 1×1 window's rows
// placed back (zeros at the pixels it skips).
TEST_F(CudaCopies, WindowsGatheredAndPlaced) {
  struct Case {
    int c, kh, kw, s, d, pt, pl, ld;
  };
  for (const Case k : {Case{8, 1, 1, 2, 1, 0, 0, 8}, Case{6, 1, 1, 2, 1, 0, 0, 6}, Case{3, 1, 1, 2, 1, 0, 0, 3},
                       Case{3, 3, 3, 2, 1, 1, 1, 32}, Case{2, 2, 3, 1, 2, 0, 1, 16}}) {
    const int n = 2, h = 7, w = 6;
    const int oh = (h + 2 * k.pt - (k.kh - 1) * k.d - 1) / k.s + 1;
    const int ow = (w + 2 * k.pl - (k.kw - 1) * k.d - 1) / k.s + 1;
    const cuda::ConvShape g{n, k.c, h, w, 1, oh, ow, k.kh, k.kw, k.s, k.s, k.d, k.d, k.pt, k.pl};
    const size_t image = static_cast<size_t>(n) * h * w * k.c, count = static_cast<size_t>(n) * oh * ow * k.ld;
    std::vector<uint16_t> x(image), rows(count);
    for (size_t i = 0; i < image; ++i) x[i] = static_cast<uint16_t>(i * 7 + 1);
    auto xg = gpu().allocate(image * 2), rg = gpu().allocate(count * 2), back = gpu().allocate(image * 2);
    gpu().copy_from_host(xg->data(), x.data(), image * 2);
    cuda::windows(gpu().stream(), g, xg->data(), rg->data(), 2, k.ld);
    gpu().copy_to_host(rows.data(), rg->data(), count * 2);
    for (int i = 0; i < n; ++i)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox)
          for (int j = 0; j < k.ld; ++j) {
            const int tap = j / k.c, iy = oy * k.s - k.pt + tap / k.kw * k.d, ix = ox * k.s - k.pl + tap % k.kw * k.d;
            const bool inside = tap < k.kh * k.kw && iy >= 0 && iy < h && ix >= 0 && ix < w;
            const uint16_t want = inside ? x[((static_cast<size_t>(i) * h + iy) * w + ix) * k.c + j % k.c] : 0;
            ASSERT_EQ(rows[((static_cast<size_t>(i) * oh + oy) * ow + ox) * k.ld + j], want) << k.c << " " << k.kh;
          }
    if (k.kh * k.kw != 1) continue;
    cuda::place_pixels(gpu().stream(), g, rg->data(), back->data(), 2);
    std::vector<uint16_t> got(image);
    gpu().copy_to_host(got.data(), back->data(), image * 2);
    for (size_t at = 0; at < image; ++at) {
      const size_t p = at / k.c;
      const int y = static_cast<int>(p / w % h), x0 = static_cast<int>(p % w);
      const bool held = y % k.s == 0 && x0 % k.s == 0 && y / k.s < oh && x0 / k.s < ow;
      ASSERT_EQ(got[at], held ? x[at] : 0) << "at " << at;
    }
  }
}

// Axes (a, b, c) permuted to (a, c, b) (weights reordered to and from KRSC, an image made
// channels-last) and to (b, a, c), with and without a change of storage type: every value where
// the permutation puts it.
TEST_F(CudaCopies, AxesPermuted) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  for (const auto& dims : {std::array<int, 3>{3, 37, 70}, std::array<int, 3>{64, 9, 64}, std::array<int, 3>{5, 70, 9},
                           std::array<int, 3>{2, 1, 33}, std::array<int, 3>{4, 3, 1024}}) {
    for (const auto& perm : {std::array<int, 3>{0, 2, 1}, std::array<int, 3>{1, 0, 2}}) {
      const size_t count = static_cast<size_t>(dims[0]) * dims[1] * dims[2];
      std::vector<float> x(count);
      for (auto& v : x) v = d(rng);
      auto in = gpu().allocate(count * 4), same = gpu().allocate(count * 4), half = gpu().allocate(count * 2);
      gpu().copy_from_host(in->data(), x.data(), count * 4);
      cuda::permute(gpu().stream(), static_cast<const float*>(in->data()), static_cast<float*>(same->data()),
                    dims.data(), perm.data());
      cuda::permute(gpu().stream(), static_cast<const float*>(in->data()), static_cast<__nv_bfloat16*>(half->data()),
                    dims.data(), perm.data());
      std::vector<float> got(count);
      std::vector<__nv_bfloat16> got_half(count);
      gpu().copy_to_host(got.data(), same->data(), count * 4);
      gpu().copy_to_host(got_half.data(), half->data(), count * 2);
      const int e1 = dims[perm[1]], e2 = dims[perm[2]];
      for (size_t i = 0; i < count; ++i) {
        int at[3];
        at[perm[2]] = static_cast<int>(i % e2), at[perm[1]] = static_cast<int>(i / e2 % e1),
        at[perm[0]] = static_cast<int>(i / (static_cast<size_t>(e2) * e1));
        const float want = x[(static_cast<size_t>(at[0]) * dims[1] + at[1]) * dims[2] + at[2]];
        ASSERT_EQ(got[i], want) << i;
        ASSERT_EQ(__bfloat162float(got_half[i]), __bfloat162float(__float2bfloat16(want))) << i;
      }
    }
  }
}

}  // namespace
#endif
