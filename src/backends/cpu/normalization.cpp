// Batch normalization on the cpu: threads take channels; each channel's N rows of H·W values
// are summed in float lanes and accumulated in double.
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "ops/normalization.h"

namespace nngraph {
namespace {

// Σ (x[i] − shift)^power, power 1 or 2, in eight float lanes so the loop vectorizes.
template <int Power>
double lane_sum(const float* __restrict x, size_t n, float shift) {
  float lanes[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) {
      const float d = x[i + k] - shift;
      lanes[k] += Power == 1 ? d : d * d;
    }
  double s = 0;
  for (; i < n; ++i) {
    const double d = x[i] - shift;
    s += Power == 1 ? d : d * d;
  }
  for (float l : lanes) s += l;
  return s;
}

// Σ dy and Σ dy·(x − mean) over a row.
void gradient_sums(const float* __restrict x, const float* __restrict dy, size_t n, float mean, double& sdy,
                   double& sdyx) {
  float a[8] = {}, b[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) {
      a[k] += dy[i + k];
      b[k] += dy[i + k] * (x[i + k] - mean);
    }
  for (; i < n; ++i) {
    sdy += dy[i];
    sdyx += static_cast<double>(dy[i]) * (x[i] - mean);
  }
  for (int k = 0; k < 8; ++k) {
    sdy += a[k];
    sdyx += b[k];
  }
}

struct Layout {
  int n, c;
  size_t hw;
  explicit Layout(const Tensor& x) : n(x.batch()), c(x.shape().c), hw(static_cast<size_t>(x.shape().h) * x.shape().w) {}
  size_t row(int image, int channel) const { return row(image, channel, c); }
  // In an operand whose images (NCHW) or pixels (hw 1) lie `ld` channels apart.
  size_t row(int image, int channel, size_t ld) const { return (static_cast<size_t>(image) * ld + channel) * hw; }
};

// An operand's values and its images' distance in channels: rows of pixels (hw 1) may lie
// further apart than c (a view of a concatenation's part); NCHW planes are dense.
template <class T>
std::pair<T*, size_t> rows_of(const Tensor& t, const Layout& l) {
  if (l.hw == 1) return {t.rows_as<T>(), static_cast<size_t>(t.strides()[0])};
  return {t.data_as<T>(), static_cast<size_t>(l.c)};
}

void batch_normalization(Backend& backend, float epsilon, const Tensor& xt, const Tensor& gamma, const Tensor& beta,
                         const Tensor& mean, const Tensor& variance, const Tensor& batch, bool replay,
                         const Tensor& addend, const NeuronDescriptor& neuron, const Tensor& yt) {
  const Layout l(xt);
  const float* x = xt.data_as<const float>();
  const float* add = addend ? addend.data_as<const float>() : nullptr;
  const auto y_rows = rows_of<float>(yt, l);
  float* y = y_rows.first;
  const size_t y_ld = y_rows.second;
  const float* g = gamma.data_as<const float>();
  const float* b = beta.data_as<const float>();
  float* stats = batch ? batch.data_as<float>() : nullptr;
  const double m = static_cast<double>(l.n) * l.hw;
  pool_of(backend).parallel_for(l.c, [&](size_t c0, size_t c1) {
    for (int c = static_cast<int>(c0); c < static_cast<int>(c1); ++c) {
      // A replay's statistics are there already; inference reads the running ones.
      float mu = 0, var = 0;
      if (stats && replay) {
        mu = stats[c];
      } else if (stats) {
        double s = 0;
        for (int i = 0; i < l.n; ++i) s += lane_sum<1>(x + l.row(i, c), l.hw, 0.f);
        mu = static_cast<float>(s / m);
        double q = 0;  // two passes: no cancellation in E[x²] − E[x]²
        for (int i = 0; i < l.n; ++i) q += lane_sum<2>(x + l.row(i, c), l.hw, mu);
        var = static_cast<float>(q / m);
        stats[c] = mu;
        stats[l.c + c] = 1.f / std::sqrt(var + epsilon);
        stats[2 * l.c + c] = var;
      } else {
        mu = mean.data_as<const float>()[c];
        var = variance.data_as<const float>()[c];
      }
      // The gradient recomputes x·scale + shift from the batch's inverse deviation: the same floats.
      const float inv = stats ? stats[l.c + c] : 1.f / std::sqrt(var + epsilon);
      const float scale = g[c] * inv, shift = b[c] - mu * scale;
      for (int i = 0; i < l.n; ++i) {
        const float* xr = x + l.row(i, c);
        float* yr = y + l.row(i, c, y_ld);
        for (size_t k = 0; k < l.hw; ++k) yr[k] = xr[k] * scale + shift;
        if (add)
          for (size_t k = 0, r = l.row(i, c); k < l.hw; ++k) yr[k] += add[r + k];
        if (neuron.type != NeuronType::None) bias_neuron(yr, l.hw, nullptr, neuron);
      }
    }
  });
}

void batch_normalization_gradient(Backend& backend, const Tensor& xt, const Tensor& dyt, const Tensor& gamma,
                                  const Tensor& beta, const Tensor& batch, const NeuronDescriptor& neuron,
                                  const Tensor& dxt, const Tensor& dgamma, const Tensor& dbeta) {
  const Layout l(xt);
  const float* x = xt.data_as<const float>();
  const auto dy_rows = rows_of<const float>(dyt, l);
  const float* dy = dy_rows.first;
  const size_t dy_ld = dy_rows.second;
  const float* g = gamma.data_as<const float>();
  const float* b = beta.data_as<const float>();
  float* stats = batch.data_as<float>();
  float* dg = dgamma ? dgamma.data_as<float>() : stats + 3 * l.c;
  float* db = dbeta ? dbeta.data_as<float>() : stats + 4 * l.c;
  // dx may be a view of some channels of a wider image (a concatenation's part), as dy may.
  const auto [dx, dx_ld] = dxt ? rows_of<float>(dxt, l) : std::pair<float*, size_t>{nullptr, l.c};
  const double m = static_cast<double>(l.n) * l.hw;
  const bool through = neuron.type != NeuronType::None;
  pool_of(backend).parallel_for(l.c, [&](size_t c0, size_t c1) {
    std::vector<float> passed(through ? l.n * l.hw : 0);  // dy through the neuron, a channel's rows
    for (int c = static_cast<int>(c0); c < static_cast<int>(c1); ++c) {
      const float mu = stats[c], inv = stats[l.c + c];
      // dy ⊙ f'(x·scale + shift), from the forward pass's neuron output or input, recomputed.
      auto dy_row = [&](int i) { return through ? passed.data() + static_cast<size_t>(i) * l.hw : dy + l.row(i, c, dy_ld); };
      if (through) {
        const float scale = g[c] * inv, shift = b[c] - mu * scale;
        for (int i = 0; i < l.n; ++i) {
          const float* xr = x + l.row(i, c);
          float* pr = passed.data() + static_cast<size_t>(i) * l.hw;
          for (size_t k = 0; k < l.hw; ++k) pr[k] = xr[k] * scale + shift;
          if (neuron.derivative_from_output()) bias_neuron(pr, l.hw, nullptr, neuron);
          neuron_derivative(dy + l.row(i, c, dy_ld), pr, pr, l.hw, neuron);
        }
      }
      double sdy = 0, sdyx = 0;
      for (int i = 0; i < l.n; ++i) gradient_sums(x + l.row(i, c), dy_row(i), l.hw, mu, sdy, sdyx);
      dg[c] = static_cast<float>(sdyx * inv);
      db[c] = static_cast<float>(sdy);
      if (!dx) continue;
      // dx = k·dy + kx·(x − mean) + k0
      const float k = g[c] * inv;
      const float kx = static_cast<float>(-g[c] * inv * inv * inv * sdyx / m);
      const float k0 = static_cast<float>(-g[c] * inv * sdy / m);
      for (int i = 0; i < l.n; ++i) {
        const float* xr = x + l.row(i, c);
        const float* dr = dy_row(i);
        float* out = dx + l.row(i, c, dx_ld);
        for (size_t j = 0; j < l.hw; ++j) out[j] = k * dr[j] + kx * (xr[j] - mu) + k0;
      }
    }
  });
}

void batch_normalization_statistics(Backend&, const std::vector<RunningStatistics>& nodes) {
  for (const RunningStatistics& n : nodes) {
    const size_t c = n.mean.count();
    const float* stats = n.batch.data_as<const float>();
    float* rm = n.mean.data_as<float>();
    float* rv = n.variance.data_as<float>();
    for (size_t i = 0; i < c; ++i) {
      rm[i] += n.momentum * (stats[i] - rm[i]);
      if (n.unbias > 0.f) rv[i] += n.momentum * (stats[2 * c + i] * n.unbias - rv[i]);
    }
  }
}

void batch_normalization_fold(Backend& backend, float epsilon, const Tensor& weights, const Tensor& bias,
                              const Tensor& gamma, const Tensor& beta, const Tensor& mean, const Tensor& variance,
                              const Tensor& folded_weights, const Tensor& folded_bias) {
  const size_t c = gamma.count(), per = weights.count() / c;
  const float* w = weights.data_as<const float>();
  const float* b = bias ? bias.data_as<const float>() : nullptr;
  const float *g = gamma.data_as<const float>(), *be = beta.data_as<const float>();
  const float *mu = mean.data_as<const float>(), *var = variance.data_as<const float>();
  float* fw = folded_weights.data_as<float>();
  float* fb = folded_bias.data_as<float>();
  pool_of(backend).parallel_for(c, [&](size_t c0, size_t c1) {
    for (size_t o = c0; o < c1; ++o) {
      const float scale = g[o] / std::sqrt(var[o] + epsilon);
      for (size_t j = 0; j < per; ++j) fw[o * per + j] = w[o * per + j] * scale;
      fb[o] = ((b ? b[o] : 0.f) - mu[o]) * scale + be[o];
    }
  });
}

NNGRAPH_KERNEL(BatchNormalizationKernel, CPU, batch_normalization);
NNGRAPH_KERNEL(BatchNormalizationFoldKernel, CPU, batch_normalization_fold);
NNGRAPH_KERNEL(BatchNormalizationGradientKernel, CPU, batch_normalization_gradient);
NNGRAPH_KERNEL(BatchNormalizationStatisticsKernel, CPU, batch_normalization_statistics);

}  // namespace
}  // namespace nngraph
