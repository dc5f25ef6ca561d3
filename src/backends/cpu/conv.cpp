// Convolutions forward on frames (conv_frame.cpp) or in Winograd's form (conv_winograd.cpp), but
// for windows that tile rows; gradients of strided convolutions as im2col + GEMM per group of a
// few images (so a small image still makes a wide product); fully connected layers as one GEMM.
#include <algorithm>
#include <vector>

#include "backends/cpu/conv_frame.h"
#include "backends/cpu/conv_lanes.h"
#include "backends/cpu/conv_winograd.h"
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

// Columns of one group of one image: row (c, i, j) `ld` values after the one before, column
// (oy, ox). Stride-1 rows are short contiguous runs, so plain loops (which vectorize and
// inline) beat memmove calls.
void im2col(const float* __restrict in, int channels, int h, int w, const ConvGeometry& g, int ho, int wo,
            float* __restrict cols, size_t ld) {
  for (int c = 0; c < channels; ++c)
    for (int i = 0; i < g.kh; ++i)
      for (int j = 0; j < g.kw; ++j) {
        const int off_x = j * g.dx - g.pad_left;
        const auto [lo, hi] = inside(off_x, g.sx, w, wo);
        const float* plane = in + static_cast<size_t>(c) * h * w;
        float* col = cols + ((static_cast<size_t>(c) * g.kh + i) * g.kw + j) * ld;
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
void col2im(const float* __restrict cols, int channels, int h, int w, const ConvGeometry& g, int ho, int wo,
            float* __restrict out, size_t ld) {
  for (int c = 0; c < channels; ++c)
    for (int i = 0; i < g.kh; ++i)
      for (int j = 0; j < g.kw; ++j) {
        const int off_x = j * g.dx - g.pad_left;
        const auto [lo, hi] = inside(off_x, g.sx, w, wo);
        float* plane = out + static_cast<size_t>(c) * h * w;
        const float* col = cols + ((static_cast<size_t>(c) * g.kh + i) * g.kw + j) * ld;
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

// Images per product, of a thread's n: enough columns for an efficient GEMM where images are small.
int images_per_product(int n, int p) {
  constexpr int kColumns = 512;
  return std::max(1, std::min((kColumns + p - 1) / p, n));
}

// y = neuron(x ⊛ w + bias + addend); addend may be empty.
void convolution_add(Backend& b, const ConvGeometry& g, const Tensor& in, const Tensor& w, const Tensor& bs,
                     const Tensor& addend, const NeuronDescriptor& neuron, const Tensor& out) {
  ThreadPool& pool = pool_of(b);
  const auto& is = in.shape();
  const auto& os = out.shape();
  if (winograd_fits(g, is, os, in.batch())) return winograd_convolution(pool, g, in, w, bs, neuron, out, addend);
  if (g.kw == 1 || !g.tiles_rows(is, os)) return frame_convolution(pool, g, in, w, bs, neuron, out, addend);
  // Windows that tile each row (1 × k, stride k): a channel's row is already a wo × kw matrix,
  // so one product per channel and row reads the image in place.
  const float* weights = w.data_as<const float>();
  const float* bias = bs.data_as<const float>();
  const int n = in.batch(), cg = is.c / g.groups, og = os.c / g.groups;
  const int k = cg * g.kh * g.kw, p = os.h * os.w;
  auto x_of = [&](int img, int grp) {
    return in.data_as<const float>() + (static_cast<size_t>(img) * is.c + static_cast<size_t>(grp) * cg) * is.h * is.w;
  };
  auto y_of = [&](int img, int grp) {
    return out.data_as<float>() + (static_cast<size_t>(img) * os.c + static_cast<size_t>(grp) * og) * p;
  };
  // An equal range of images per thread where there are enough; otherwise threads split each GEMM.
  const int chunks = n >= pool.size() ? pool.size() : 1;
  ThreadPool* threads = chunks > 1 ? nullptr : &pool;
  pool.parallel_for(static_cast<size_t>(chunks), [&](size_t c0, size_t c1) {
    for (size_t chunk = c0; chunk < c1; ++chunk) {
      const int first = static_cast<int>(n * chunk / chunks), end = static_cast<int>(n * (chunk + 1) / chunks);
      for (int img = first; img < end; ++img)
        for (int grp = 0; grp < g.groups; ++grp) {
          const float* wg = weights + static_cast<size_t>(grp) * og * k;
          for (int c = 0; c < cg; ++c)
            for (int oy = 0; oy < os.h; ++oy)
              gemm(threads, false, true, og, os.w, g.kw, 1.f, wg + c * g.kw, k,
                   x_of(img, grp) + (static_cast<size_t>(c) * is.h + oy) * is.w, g.kw, c ? 1.f : 0.f,
                   y_of(img, grp) + oy * os.w, p);
          for (int o = 0; o < og; ++o) {
            float* row = y_of(img, grp) + static_cast<size_t>(o) * p;
            bias_neuron(row, p, bias ? bias + grp * og + o : nullptr, neuron,
                        addend ? addend.data_as<const float>() + (row - out.data_as<float>()) : nullptr);
          }
        }
    }
  });
}

void convolution(Backend& b, const ConvGeometry& g, const Tensor& in, const Tensor& w, const Tensor& bs,
                 const NeuronDescriptor& neuron, const Tensor& out) {
  convolution_add(b, g, in, w, bs, Tensor(), neuron, out);
}

void fully_connected(Backend& b, const Tensor& in, const Tensor& w, const Tensor& bs, const NeuronDescriptor& neuron,
                     const Tensor& out, bool, bool) {
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
  if (frame_gradient_fits(g)) return frame_convolution_gradient(pool, g, x, w, dy, y, neuron, dx, dwt, dbt);
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
  auto in_of = [&](const Tensor& t, int img, int grp) {
    return t.data_as<float>() + (static_cast<size_t>(img) * is.c + static_cast<size_t>(grp) * cg) * is.h * is.w;
  };
  auto out_offset = [&](int img, int grp) { return (static_cast<size_t>(img) * os.c + static_cast<size_t>(grp) * og) * p; };
  // Image ranges run in parallel, each into its own weight-gradient partial sums.
  const int chunks = std::min(n, pool.size());
  ThreadPool* inner = chunks > 1 ? nullptr : &pool;
  std::vector<std::vector<float>> partial(chunks);  // each filled by the thread that sums into it
  pool.parallel_for(static_cast<size_t>(chunks), [&](size_t c0, size_t c1) {
    for (size_t chunk = c0; chunk < c1; ++chunk) {
      if (dw || db) partial[chunk].assign(wcount + os.c, 0.f);
      const int first = static_cast<int>(n * chunk / chunks), end = static_cast<int>(n * (chunk + 1) / chunks);
      const int per = tiled ? 1 : images_per_product(end - first, p);
      const size_t ld = static_cast<size_t>(per) * p;  // the columns of one product
      std::vector<float> col(tiled ? 0 : static_cast<size_t>(k) * ld), dz(act || per > 1 ? og * ld : 0);
      float* sums = dw || db ? partial[chunk].data() : nullptr;  // dw's, then db's
      for (int i0 = first; i0 < end; i0 += per) {
        const int count = std::min(per, end - i0);
        if (dx) std::fill_n(in_of(dx, i0, 0), static_cast<size_t>(count) * is.count(), 0.f);
        for (int grp = 0; grp < g.groups; ++grp) {
          // dz of the images side by side: og rows of count·p columns, ld apart.
          const float* z = dy.data_as<float>() + out_offset(i0, grp);
          if (!dz.empty()) {
            for (int i = 0; i < count; ++i)
              for (int o = 0; o < og; ++o) {
                const size_t at = out_offset(i0 + i, grp) + static_cast<size_t>(o) * p;
                float* to = dz.data() + o * ld + static_cast<size_t>(i) * p;
                if (act)
                  neuron_derivative(dy.data_as<float>() + at, y.data_as<float>() + at, to, p, neuron);
                else
                  std::copy_n(dy.data_as<float>() + at, p, to);
              }
            z = dz.data();
          }
          const float* wg = weights + static_cast<size_t>(grp) * og * k;
          if (dw) {
            float* dwg = sums + static_cast<size_t>(grp) * og * k;
            if (tiled) {
              for (int c = 0; c < cg; ++c)
                for (int oy = 0; oy < os.h; ++oy)
                  gemm(inner, false, false, og, g.kw, os.w, 1.f, z + oy * os.w, p,
                       in_of(x, i0, grp) + (static_cast<size_t>(c) * is.h + oy) * is.w, g.kw, 1.f, dwg + c * g.kw, k);
            } else {
              for (int i = 0; i < count; ++i)
                im2col(in_of(x, i0 + i, grp), cg, is.h, is.w, g, os.h, os.w, col.data() + static_cast<size_t>(i) * p, ld);
              gemm(inner, false, true, og, k, count * p, 1.f, z, static_cast<int>(ld), col.data(), static_cast<int>(ld),
                   1.f, dwg, k);
            }
          }
          for (int o = 0; db && o < og; ++o) {
            double sum = 0;
            for (int q = 0; q < count * p; ++q) sum += z[o * ld + q];
            sums[wcount + grp * og + o] += static_cast<float>(sum);
          }
          if (dx && tiled) {
            for (int c = 0; c < cg; ++c)
              for (int oy = 0; oy < os.h; ++oy)
                gemm(inner, true, false, os.w, g.kw, og, 1.f, z + oy * os.w, p, wg + c * g.kw, k, 0.f,
                     in_of(dx, i0, grp) + (static_cast<size_t>(c) * is.h + oy) * is.w, g.kw);
          } else if (dx) {
            gemm(inner, true, false, k, count * p, og, 1.f, wg, k, z, static_cast<int>(ld), 0.f, col.data(),
                 static_cast<int>(ld));
            for (int i = 0; i < count; ++i)
              col2im(col.data() + static_cast<size_t>(i) * p, cg, is.h, is.w, g, os.h, os.w, in_of(dx, i0 + i, grp), ld);
          }
        }
      }
    }
  });
  if (!dw && !db) return;
  pool.parallel_for(wcount + os.c, [&](size_t first, size_t end) {
    for (size_t i = first; i < end; ++i) {
      float* to = i < wcount ? (dw ? dw + i : nullptr) : (db ? db + i - wcount : nullptr);
      if (!to) continue;
      float sum = 0.f;
      for (const auto& part : partial) sum += part[i];
      *to = sum;
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
                              bool, bool) {
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

// Inference: the filter packed for the lane kernel where that pays (conv_lanes.h).
size_t prepare_filter(Backend& b, const ConvGeometry& g, const ImageShape& in, const ImageShape& out, const Tensor& w,
                      float* prepared) {
  if (!lanes_pay(g, in, out)) return 0;
  const int terms = in.c * g.kh * g.kw;
  if (prepared) pack_lanes(pool_of(b), w.data_as<const float>(), out.c, terms, prepared);
  return lanes_floats(out.c, terms);
}

// Winograd's form where it takes the batch (it beat the lanes at 14², batch 64), else the lanes.
void prepared_convolution(Backend& b, const ConvGeometry& g, const Tensor& in, const Tensor& w, const float* prepared,
                          const Tensor& bs, const Tensor& addend, const NeuronDescriptor& neuron, const Tensor& out) {
  if (winograd_fits(g, in.shape(), out.shape(), in.batch())) return convolution_add(b, g, in, w, bs, addend, neuron, out);
  lane_convolution(pool_of(b), g, in, prepared, bs, neuron, out, addend);
}

NNGRAPH_KERNEL(BiasNeuronKernel, CPU, bias_neuron_pass);
NNGRAPH_KERNEL(BiasNeuronGradientKernel, CPU, bias_neuron_gradient);
NNGRAPH_KERNEL(ConvolutionKernel, CPU, convolution);
NNGRAPH_KERNEL(ConvolutionAddKernel, CPU, convolution_add);
NNGRAPH_KERNEL(PrepareFilterKernel, CPU, prepare_filter);
NNGRAPH_KERNEL(PreparedConvolutionKernel, CPU, prepared_convolution);
NNGRAPH_KERNEL(ConvolutionGradientKernel, CPU, convolution_gradient);
NNGRAPH_KERNEL(FullyConnectedKernel, CPU, fully_connected);
NNGRAPH_KERNEL(FullyConnectedGradientKernel, CPU, fully_connected_gradient);

}  // namespace
}  // namespace nngraph
