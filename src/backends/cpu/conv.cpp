// Convolution as im2col + GEMM per image and group, fully connected as one GEMM.
#include <algorithm>
#include <vector>

#include "backends/cpu/cpu_backend.h"

namespace nngraph {
namespace {

int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Columns of one group of one image: row (c, i, j), column (oy, ox).
void im2col(const float* in, int channels, int h, int w, const ConvGeometry& g, int ho, int wo,
            float* col) {
  for (int c = 0; c < channels; ++c)
    for (int i = 0; i < g.kh; ++i)
      for (int j = 0; j < g.kw; ++j) {
        const int off_x = j * g.dx - g.pad_left;
        // ox range whose ix = ox*sx + off_x lies inside [0, w)
        const int lo = std::min(wo, std::max(0, -floor_div(off_x, g.sx)));
        const int hi = std::max(lo, std::min(wo, floor_div(w - 1 - off_x, g.sx) + 1));
        const float* plane = in + static_cast<size_t>(c) * h * w;
        for (int oy = 0; oy < ho; ++oy, col += wo) {
          const int iy = oy * g.sy - g.pad_top + i * g.dy;
          if (iy < 0 || iy >= h) {
            std::fill(col, col + wo, 0.f);
            continue;
          }
          const float* row = plane + static_cast<size_t>(iy) * w + off_x;
          std::fill(col, col + lo, 0.f);
          if (g.sx == 1) {
            std::copy(row + lo, row + hi, col + lo);
          } else {
            for (int ox = lo; ox < hi; ++ox) col[ox] = row[ox * g.sx];
          }
          std::fill(col + hi, col + wo, 0.f);
        }
      }
}

}  // namespace

void CpuBackend::convolution(const ConvGeometry& g, const Image& in, const float* weights,
                             const float* bias, const NeuronDescriptor& neuron, const Image& out) {
  const auto& is = in.shape();
  const auto& os = out.shape();
  const int n = in.batch(), cg = is.c / g.groups, og = os.c / g.groups;
  const int k = cg * g.kh * g.kw, p = os.h * os.w;
  const bool direct = g.kh == 1 && g.kw == 1 && g.sy == 1 && g.sx == 1 && g.pad_top == 0 &&
                      g.pad_left == 0 && os.h == is.h && os.w == is.w;
  const float* src = in.data_as<float>();
  float* dst = out.data_as<float>();
  // Enough images: one thread per image range; otherwise threads split each GEMM.
  const bool by_image = n >= pool_.size();
  auto run = [&](size_t b, size_t e) {
    std::vector<float> col(direct ? 0 : static_cast<size_t>(k) * p);
    for (size_t img = b; img < e; ++img)
      for (int grp = 0; grp < g.groups; ++grp) {
        const float* x = src + (img * is.c + static_cast<size_t>(grp) * cg) * is.h * is.w;
        float* y = dst + (img * os.c + static_cast<size_t>(grp) * og) * p;
        if (!direct) im2col(x, cg, is.h, is.w, g, os.h, os.w, col.data());
        gemm(by_image ? nullptr : &pool_, false, false, og, p, k, 1.f,
             weights + static_cast<size_t>(grp) * og * k, k, direct ? x : col.data(), p, 0.f, y, p);
        for (int o = 0; o < og; ++o)
          bias_neuron(y + static_cast<size_t>(o) * p, p, bias ? bias + grp * og + o : nullptr, neuron);
      }
  };
  if (by_image)
    pool_.parallel_for(static_cast<size_t>(n), run);
  else
    run(0, static_cast<size_t>(n));
}

void CpuBackend::fully_connected(const Image& in, const float* weights, const float* bias,
                                 const NeuronDescriptor& neuron, const Image& out) {
  const int n = in.batch(), k = static_cast<int>(in.shape().count()), o = out.shape().c;
  float* y = out.data_as<float>();
  gemm(&pool_, false, true, n, o, k, 1.f, in.data_as<float>(), k, weights, k, 0.f, y, o);
  if (!bias && neuron.type == NeuronType::None) return;
  pool_.parallel_for(static_cast<size_t>(n), [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) {
      float* row = y + r * o;
      if (bias)
        for (int j = 0; j < o; ++j) row[j] += bias[j];
      bias_neuron(row, o, nullptr, neuron);
    }
  });
}

}  // namespace nngraph
