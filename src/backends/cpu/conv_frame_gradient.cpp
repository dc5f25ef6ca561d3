// The gradient of a stride-1 convolution on frames (see conv_frame.h and frame.h): the weights'
// gradient as products over the input's frame, the input's as the forward product of dz's frame
// with the weights turned around.
#include <algorithm>
#include <vector>

#include "backends/cpu/conv_frame.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/frame.h"

namespace nngraph {

using namespace frames;

void frame_convolution_gradient(ThreadPool& pool, const ConvGeometry& g, const Tensor& x, const Tensor& w,
                                const Tensor& dy, const Tensor& y, const NeuronDescriptor& neuron, const Tensor& dx,
                                const Tensor& dwt, const Tensor& dbt) {
  const auto& is = x.shape();
  const auto& os = dy.shape();
  const int n = x.batch(), cg = is.c / g.groups, og = os.c / g.groups, taps = g.kh * g.kw, k = cg * taps;
  const size_t in_plane = static_cast<size_t>(is.h) * is.w, out_plane = static_cast<size_t>(os.h) * os.w;
  const bool act = y && neuron.type != NeuronType::None;
  float* dw = dwt.data_as<float>();
  float* db = dbt.data_as<float>();

  // dw[o][t] = Σ over positions q of the input's frame at off[t] + q times dz[o] at q, summed
  // as its transpose ct[t][o] with dz laid out position-major (zero at the dropped columns).
  const Frame xf{os.h + (g.kh - 1) * g.dy, os.w + (g.kw - 1) * g.dx, g.pad_top, g.pad_left};
  const GradientShape& gs = least_padded(kGradientShapes, k, og, &GradientShape::nk, &GradientShape::nvo);
  const int kpad = round_up(k, gs.nk), ldz = round_up(og, gs.nvo * V), positions = os.h * xf.w;
  std::vector<int> xoff(kpad, 0);
  tap_offsets(g, cg, xf, xoff.data());
  const size_t x_extent = *std::max_element(xoff.begin(), xoff.end()) + static_cast<size_t>(positions);
  const size_t z_floats = static_cast<size_t>(positions) * ldz;

  // dx is the forward product of dz's frame with the weights turned 180° and their input and
  // output channels swapped.
  const Frame zf{is.h + (g.kh - 1) * g.dy, is.w + (g.kw - 1) * g.dx, (g.kh - 1) * g.dy - g.pad_top,
                 (g.kw - 1) * g.dx - g.pad_left};
  FrameProduct back(g, cg, og, zf, is.h, is.w);
  if (dx) {
    const float* weights = w.data_as<const float>();
    back.pack(pool, [&](int grp, int c, int t) {
      const int o = t / taps, turned = taps - 1 - t % taps;
      return weights[((static_cast<size_t>(grp) * og + o) * cg + c) * taps + turned];
    });
  }
  const size_t z_extent = back.extent();

  // Units per group: weight-gradient blocks of terms, then blocks of input-gradient rows.
  const int kblocks = dw ? kpad / gs.nk : 0, xblocks = dx ? back.blocks() : 0;
  const int per_group = std::max(kblocks + xblocks, 1);  // one, to sum db, where there is nothing else
  const int units = g.groups * per_group, threads = pool.size();
  // With an image or more per thread, each chunk takes a range of images, several small ones
  // per call (to amortize the tile's final sums); otherwise each image's units are split.
  const int parts = n >= threads ? 1 : std::min(units, threads / n);
  const int chunks = n >= threads ? threads : n * parts;
  const int together = n >= threads ? std::clamp((256 + positions - 1) / positions, 1, (n + threads - 1) / threads) : 1;
  const size_t partial_floats = (dw ? static_cast<size_t>(g.groups) * kpad * ldz : 0) + os.c;
  std::vector<std::vector<float>> partial(chunks);  // each zeroed and filled by its own thread

  pool.parallel_for(static_cast<size_t>(chunks), [&](size_t c0, size_t c1) {
    for (size_t chunk = c0; chunk < c1; ++chunk) {
      std::vector<float>& sums = partial[chunk];
      sums.assign(dw || db ? partial_floats : 0, 0.f);
      std::vector<float> xbuf(dw ? together * x_extent : 0, 0.f), zt(dw ? together * z_floats : 0, 0.f);
      std::vector<float> zbuf(dx ? together * z_extent : 0, 0.f), dz(act ? og * out_plane : 0);
      std::vector<float> tile(back.tile_floats());
      const int part = static_cast<int>(chunk) % parts, u0 = units * part / parts, u1 = units * (part + 1) / parts;
      const int i0 = parts > 1 ? static_cast<int>(chunk) / parts : static_cast<int>(n * chunk / chunks);
      const int i1 = parts > 1 ? i0 + 1 : static_cast<int>(n * (chunk + 1) / chunks);
      for (int first = i0; first < i1; first += together) {
        const int count = std::min(together, i1 - first);
        int framed = -1;
        for (int u = u0; u < u1; ++u) {
          const int grp = u / per_group, unit = u % per_group;
          if (grp != framed) {
            // dz of each image, its position-major copy, its frame, and db's sums (by the part
            // holding the group's first unit).
            const bool bias_here = db && u0 <= grp * per_group;
            for (int i = 0; i < count; ++i) {
              const size_t at = (static_cast<size_t>(first + i) * os.c + static_cast<size_t>(grp) * og) * out_plane;
              const float* z = dy.data_as<const float>() + at;
              if (act) {
                neuron_derivative(z, y.data_as<const float>() + at, dz.data(), og * out_plane, neuron);
                z = dz.data();
              }
              if (dw) {
                xf.fill(x.data_as<const float>() + (static_cast<size_t>(first + i) * is.c + static_cast<size_t>(grp) * cg) * in_plane,
                        0, 1, cg, is.h, is.w, xbuf.data() + i * x_extent);
                float* to = zt.data() + i * z_floats;
                for (int oy = 0; oy < os.h; ++oy)
                  for (int ox = 0; ox < os.w; ++ox) {
                    float* row = to + static_cast<size_t>(oy * xf.w + ox) * ldz;
                    const float* from = z + oy * os.w + ox;
                    for (int o = 0; o < og; ++o) row[o] = from[o * out_plane];
                  }
              }
              if (dx) zf.fill(z, 0, 1, og, os.h, os.w, zbuf.data() + i * z_extent);
              for (int o = 0; bias_here && o < og; ++o) {
                double s = 0;
                for (size_t q = 0; q < out_plane; ++q) s += z[o * out_plane + q];
                sums[partial_floats - os.c + grp * og + o] += static_cast<float>(s);
              }
            }
            framed = grp;
          }
          if (unit < kblocks) {
            float* ct = sums.data() + (static_cast<size_t>(grp) * kpad + unit * gs.nk) * ldz;
            for (int o = 0; o < ldz; o += gs.nvo * V)
              gs.tile(count, positions, zt.data() + o, z_floats, ldz, xbuf.data(), x_extent, xoff.data() + unit * gs.nk,
                      ct + o, ldz);
          } else if (dx) {
            for (int i = 0; i < count; ++i)
              back.run(1, grp, unit - kblocks, zbuf.data() + i * z_extent,
                       dx.data_as<float>() + (static_cast<size_t>(first + i) * is.c + static_cast<size_t>(grp) * cg) * in_plane,
                       tile.data());
          }
        }
      }
    }
  });
  if (!dw && !db) return;
  pool.parallel_for(static_cast<size_t>(g.groups) * k + 1, [&](size_t first, size_t end) {
    for (size_t r = first; r < end; ++r) {
      if (r == static_cast<size_t>(g.groups) * k) {  // the bias row
        for (int o = 0; db && o < os.c; ++o) {
          float s = 0.f;
          for (const auto& part : partial) s += part[partial_floats - os.c + o];
          db[o] = s;
        }
        continue;
      }
      const size_t grp = r / k, t = r % k;
      for (int o = 0; dw && o < og; ++o) {
        float s = 0.f;
        for (const auto& part : partial) s += part[(grp * kpad + t) * ldz + o];
        dw[(grp * og + o) * k + t] = s;
      }
    }
  });
}

}  // namespace nngraph
