// Patch moments on the cpu: per image, its patches as D rows (one shifted plane each) and
// their product D×D in float32, summed over images in float64 per thread, then across threads.
#include "backends/cpu/cpu_backend.h"
#include "ops/patch_moments.h"

namespace nngraph {
namespace {

std::vector<double> patch_moments(Backend& backend, const Tensor& images, int kh, int kw) {
  ThreadPool& pool = pool_of(backend);
  const ImageShape& s = images.shape();
  const int d = s.c * kh * kw, oh = s.h - kh + 1, ow = s.w - kw + 1, p = oh * ow;
  const int chunks = std::min(images.batch(), pool.size());
  std::vector<std::vector<double>> sums(chunks, std::vector<double>(static_cast<size_t>(d) * d, 0.0));
  pool.parallel_for(static_cast<size_t>(chunks), [&](size_t c0, size_t c1) {
    std::vector<float> rows(static_cast<size_t>(d) * p), product(static_cast<size_t>(d) * d);
    for (size_t chunk = c0; chunk < c1; ++chunk) {
      const int first = static_cast<int>(images.batch() * chunk / chunks);
      const int end = static_cast<int>(images.batch() * (chunk + 1) / chunks);
      for (int n = first; n < end; ++n) {
        const float* x = images.data_as<const float>() + static_cast<size_t>(n) * s.count();
        for (int c = 0, row = 0; c < s.c; ++c)
          for (int dy = 0; dy < kh; ++dy)
            for (int dx = 0; dx < kw; ++dx, ++row)
              for (int y = 0; y < oh; ++y)
                for (int xx = 0; xx < ow; ++xx)
                  rows[static_cast<size_t>(row) * p + y * ow + xx] = x[(static_cast<size_t>(c) * s.h + y + dy) * s.w + xx + dx];
        gemm(nullptr, false, true, d, d, p, 1.f, rows.data(), p, rows.data(), p, 0.f, product.data(), d);
        for (size_t i = 0; i < product.size(); ++i) sums[chunk][i] += product[i];
      }
    }
  });
  for (int chunk = 1; chunk < chunks; ++chunk)
    for (size_t i = 0; i < sums[0].size(); ++i) sums[0][i] += sums[chunk][i];
  return sums[0];
}

NNGRAPH_KERNEL(PatchMomentsKernel, CPU, patch_moments);

}  // namespace
}  // namespace nngraph
