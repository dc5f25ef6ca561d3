// Convolution as im2col + GEMM per image and group, fully connected as one GEMM.
#include <algorithm>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "ops/conv.h"

namespace nngraph {
namespace {

int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Columns [lo, hi) of an output row whose input column ox·sx + off_x lies inside [0, w).
std::pair<int, int> inside(int off_x, int sx, int w, int wo) {
  const int lo = std::min(wo, std::max(0, -floor_div(off_x, sx)));
  return {lo, std::max(lo, std::min(wo, floor_div(w - 1 - off_x, sx) + 1))};
}

// Columns of one group of one image: row (c, i, j), column (oy, ox). Stride-1 rows are
// short contiguous runs, so plain loops (which vectorize and inline) beat memmove calls.
void im2col(const float* __restrict in, int channels, int h, int w, const ConvGeometry& g, int ho, int wo,
            float* __restrict col) {
  for (int c = 0; c < channels; ++c)
    for (int i = 0; i < g.kh; ++i)
      for (int j = 0; j < g.kw; ++j) {
        const int off_x = j * g.dx - g.pad_left;
        const auto [lo, hi] = inside(off_x, g.sx, w, wo);
        const float* plane = in + static_cast<size_t>(c) * h * w;
        for (int oy = 0; oy < ho; ++oy, col += wo) {
          const int iy = oy * g.sy - g.pad_top + i * g.dy;
          if (iy < 0 || iy >= h) {
            for (int ox = 0; ox < wo; ++ox) col[ox] = 0.f;
            continue;
          }
          const float* row = plane + static_cast<ptrdiff_t>(iy) * w + off_x;
          for (int ox = 0; ox < lo; ++ox) col[ox] = 0.f;
          if (g.sx == 1) {
            for (int ox = lo; ox < hi; ++ox) col[ox] = row[ox];
          } else {
            for (int ox = lo; ox < hi; ++ox) col[ox] = row[ox * g.sx];
          }
          for (int ox = hi; ox < wo; ++ox) col[ox] = 0.f;
        }
      }
}

// Adds each column back to the pixel it was read from (im2col's transpose).
void col2im(const float* __restrict col, int channels, int h, int w, const ConvGeometry& g, int ho, int wo,
            float* __restrict out) {
  for (int c = 0; c < channels; ++c)
    for (int i = 0; i < g.kh; ++i)
      for (int j = 0; j < g.kw; ++j) {
        const int off_x = j * g.dx - g.pad_left;
        const auto [lo, hi] = inside(off_x, g.sx, w, wo);
        float* plane = out + static_cast<size_t>(c) * h * w;
        for (int oy = 0; oy < ho; ++oy, col += wo) {
          const int iy = oy * g.sy - g.pad_top + i * g.dy;
          if (iy < 0 || iy >= h) continue;
          float* row = plane + static_cast<ptrdiff_t>(iy) * w + off_x;
          if (g.sx == 1) {
            for (int ox = lo; ox < hi; ++ox) row[ox] += col[ox];
          } else {
            for (int ox = lo; ox < hi; ++ox) row[ox * g.sx] += col[ox];
          }
        }
      }
}

void convolution(Backend& b, const ConvGeometry& g, const Tensor& in, const Tensor& w, const Tensor& bs,
                 const NeuronDescriptor& neuron, const Tensor& out) {
  ThreadPool& pool = pool_of(b);
  const float* weights = w.data_as<const float>();
  const float* bias = bs.data_as<const float>();
  const auto& is = in.shape();
  const auto& os = out.shape();
  const int n = in.batch(), cg = is.c / g.groups, og = os.c / g.groups;
  const int k = cg * g.kh * g.kw, p = os.h * os.w;
  const bool direct = g.kh == 1 && g.kw == 1 && g.sy == 1 && g.sx == 1 && g.pad_top == 0 &&
                      g.pad_left == 0 && os.h == is.h && os.w == is.w;
  // One channel's row is already a wo × kw matrix: one product per channel and row.
  const bool tiled = !direct && g.tiles_rows(is, os);
  const float* src = in.data_as<float>();
  float* dst = out.data_as<float>();
  // Enough images: one thread per image range; otherwise threads split each GEMM.
  const bool by_image = n >= pool.size();
  auto work = [&](size_t first, size_t end) {
    ThreadPool* threads = by_image ? nullptr : &pool;
    std::vector<float> col(direct || tiled ? 0 : static_cast<size_t>(k) * p);
    for (size_t img = first; img < end; ++img)
      for (int grp = 0; grp < g.groups; ++grp) {
        const float* x = src + (img * is.c + static_cast<size_t>(grp) * cg) * is.h * is.w;
        float* y = dst + (img * os.c + static_cast<size_t>(grp) * og) * p;
        const float* wg = weights + static_cast<size_t>(grp) * og * k;
        if (tiled) {
          for (int c = 0; c < cg; ++c)
            for (int oy = 0; oy < os.h; ++oy)
              gemm(threads, false, true, og, os.w, g.kw, 1.f, wg + c * g.kw, k,
                   x + (static_cast<size_t>(c) * is.h + oy) * is.w, g.kw, c ? 1.f : 0.f, y + oy * os.w, p);
        } else {
          if (!direct) im2col(x, cg, is.h, is.w, g, os.h, os.w, col.data());
          gemm(threads, false, false, og, p, k, 1.f, wg, k, direct ? x : col.data(), p, 0.f, y, p);
        }
        for (int o = 0; o < og; ++o)
          bias_neuron(y + static_cast<size_t>(o) * p, p, bias ? bias + grp * og + o : nullptr, neuron);
      }
  };
  if (by_image)
    pool.parallel_for(static_cast<size_t>(n), work);
  else
    work(0, static_cast<size_t>(n));
}

void fully_connected(Backend& b, const Tensor& in, const Tensor& w, const Tensor& bs, const NeuronDescriptor& neuron,
                     const Tensor& out, bool) {
  ThreadPool& pool = pool_of(b);
  const float* weights = w.data_as<const float>();
  const float* bias = bs.data_as<const float>();
  const int n = in.batch(), k = static_cast<int>(in.shape().count()), o = out.shape().c;
  float* y = out.data_as<float>();
  gemm(&pool, false, true, n, o, k, 1.f, in.data_as<float>(), k, weights, k, 0.f, y, o);
  if (!bias && neuron.type == NeuronType::None) return;
  pool.parallel_for(static_cast<size_t>(n), [&](size_t first, size_t end) {
    for (size_t r = first; r < end; ++r) {
      float* row = y + r * o;
      if (bias)
        for (int j = 0; j < o; ++j) row[j] += bias[j];
      bias_neuron(row, o, nullptr, neuron);
    }
  });
}

void convolution_gradient(Backend& b, const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor& dy,
                          const Tensor& y, const NeuronDescriptor& neuron, const Tensor& dx, const Tensor& dwt,
                          const Tensor& dbt) {
  ThreadPool& pool = pool_of(b);
  const float* weights = w.data_as<const float>();
  float* dw = dwt.data_as<float>();
  float* db = dbt.data_as<float>();
  const auto& is = x.shape();
  const auto& os = dy.shape();
  const int n = x.batch(), cg = is.c / g.groups, og = os.c / g.groups;
  const int k = cg * g.kh * g.kw, p = os.h * os.w;
  const size_t wcount = static_cast<size_t>(os.c) * k;
  const bool act = y && neuron.type != NeuronType::None;
  const bool tiled = g.tiles_rows(is, os);
  // Image ranges run in parallel, each into its own weight-gradient partial sums.
  const int chunks = std::min(n, pool.size());
  ThreadPool* inner = chunks > 1 ? nullptr : &pool;
  std::vector<std::vector<float>> partial(chunks, std::vector<float>(dw ? wcount + os.c : 0, 0.f));
  pool.parallel_for(static_cast<size_t>(chunks), [&](size_t c0, size_t c1) {
    std::vector<float> col(tiled ? 0 : static_cast<size_t>(k) * p), dz(act ? static_cast<size_t>(og) * p : 0);
    for (size_t chunk = c0; chunk < c1; ++chunk) {
      float* pdw = dw ? partial[chunk].data() : nullptr;
      for (size_t img = n * chunk / chunks; img < n * (chunk + 1) / chunks; ++img) {
        if (dx) std::fill_n(dx.data_as<float>() + img * is.count(), is.count(), 0.f);
        for (int grp = 0; grp < g.groups; ++grp) {
          const size_t out_off = (img * os.c + static_cast<size_t>(grp) * og) * p;
          const float* z = dy.data_as<float>() + out_off;
          if (act) {
            neuron_derivative(z, y.data_as<float>() + out_off, dz.data(), dz.size(), neuron);
            z = dz.data();
          }
          const float* xi = x.data_as<float>() + (img * is.c + static_cast<size_t>(grp) * cg) * is.h * is.w;
          float* dxi = dx ? dx.data_as<float>() + (img * is.c + static_cast<size_t>(grp) * cg) * is.h * is.w : nullptr;
          const float* wg = weights + static_cast<size_t>(grp) * og * k;
          if (pdw) {
            float* dwg = pdw + static_cast<size_t>(grp) * og * k;
            if (tiled) {
              for (int c = 0; c < cg; ++c)
                for (int oy = 0; oy < os.h; ++oy)
                  gemm(inner, false, false, og, g.kw, os.w, 1.f, z + oy * os.w, p,
                       xi + (static_cast<size_t>(c) * is.h + oy) * is.w, g.kw, 1.f, dwg + c * g.kw, k);
            } else {
              im2col(xi, cg, is.h, is.w, g, os.h, os.w, col.data());
              gemm(inner, false, true, og, k, p, 1.f, z, p, col.data(), p, 1.f, dwg, k);
            }
            for (int o = 0; o < og; ++o) {
              double sum = 0;
              for (int q = 0; q < p; ++q) sum += z[static_cast<size_t>(o) * p + q];
              pdw[wcount + grp * og + o] += static_cast<float>(sum);
            }
          }
          if (dx && tiled) {
            for (int c = 0; c < cg; ++c)
              for (int oy = 0; oy < os.h; ++oy)
                gemm(inner, true, false, os.w, g.kw, og, 1.f, z + oy * os.w, p, wg + c * g.kw, k, 0.f,
                     dxi + (static_cast<size_t>(c) * is.h + oy) * is.w, g.kw);
          } else if (dx) {
            gemm(inner, true, false, k, p, og, 1.f, wg, k, z, p, 0.f, col.data(), p);
            col2im(col.data(), cg, is.h, is.w, g, os.h, os.w, dxi);
          }
        }
      }
    }
  });
  if (!dw) return;
  pool.parallel_for(wcount + os.c, [&](size_t first, size_t end) {
    for (size_t i = first; i < end; ++i) {
      float sum = 0.f;
      for (const auto& part : partial) sum += part[i];
      if (i < wcount)
        dw[i] = sum;
      else if (db)
        db[i - wcount] = sum;
    }
  });
}

void bias_neuron_pass(Backend& b, const Tensor& bias, const NeuronDescriptor& neuron, const Tensor& y) {
  const int c = y.shape().c;
  const size_t hw = static_cast<size_t>(y.shape().h) * y.shape().w;
  const float* bs = bias.data_as<const float>();
  float* v = y.data_as<float>();
  pool_of(b).parallel_for(static_cast<size_t>(y.batch()) * c, [&](size_t first, size_t end) {
    for (size_t p = first; p < end; ++p) bias_neuron(v + p * hw, hw, bs ? bs + p % c : nullptr, neuron);
  });
}

void bias_neuron_gradient(Backend& b, const Tensor& dy, const Tensor& y, const NeuronDescriptor& neuron,
                          const Tensor& dz, const Tensor& db) {
  const int n = dy.batch(), c = dy.shape().c;
  const size_t hw = static_cast<size_t>(dy.shape().h) * dy.shape().w;
  const float* g = dy.data_as<const float>();
  float* z = dz.data_as<float>();
  float* sums = db.data_as<float>();
  pool_of(b).parallel_for(static_cast<size_t>(c), [&](size_t first, size_t end) {
    for (size_t ch = first; ch < end; ++ch) {
      double sum = 0;
      for (int i = 0; i < n; ++i) {
        const size_t off = (static_cast<size_t>(i) * c + ch) * hw;
        if (z) neuron_derivative(g + off, y.data_as<const float>() + off, z + off, hw, neuron);
        const float* v = z ? z + off : g + off;
        for (size_t q = 0; q < hw; ++q) sum += v[q];
      }
      if (sums) sums[ch] = static_cast<float>(sum);
    }
  });
}

void fully_connected_gradient(Backend& b, const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& y,
                              const NeuronDescriptor& neuron, const Tensor& dx, const Tensor& dwt, const Tensor& dbt,
                              bool) {
  ThreadPool& pool = pool_of(b);
  const float* weights = w.data_as<const float>();
  float* dw = dwt.data_as<float>();
  float* db = dbt.data_as<float>();
  const int n = x.batch(), k = static_cast<int>(x.shape().count()), o = dy.shape().c;
  const float* z = dy.data_as<float>();
  std::vector<float> dz;
  if (y && neuron.type != NeuronType::None) dz.resize(static_cast<size_t>(n) * o);
  const Tensor dzt = dz.empty() ? Tensor() : Tensor(dz.data(), n, dy.shape());
  if (dzt || db) bias_neuron_gradient(b, dy, y, neuron, dzt, dbt);
  if (dzt) z = dz.data();
  if (dw) gemm(&pool, true, false, o, k, n, 1.f, z, o, x.data_as<float>(), k, 0.f, dw, k);
  if (dx) gemm(&pool, false, false, n, k, o, 1.f, z, o, weights, k, 0.f, dx.data_as<float>(), k);
}

NNGRAPH_KERNEL(BiasNeuronKernel, CPU, bias_neuron_pass);
NNGRAPH_KERNEL(BiasNeuronGradientKernel, CPU, bias_neuron_gradient);
NNGRAPH_KERNEL(ConvolutionKernel, CPU, convolution);
NNGRAPH_KERNEL(ConvolutionGradientKernel, CPU, convolution_gradient);
NNGRAPH_KERNEL(FullyConnectedKernel, CPU, fully_connected);
NNGRAPH_KERNEL(FullyConnectedGradientKernel, CPU, fully_connected_gradient);

}  // namespace
}  // namespace nngraph
