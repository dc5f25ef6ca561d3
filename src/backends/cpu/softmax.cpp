#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "ops/softmax.h"

namespace nngraph {

// Channels are strided by H·W; each image keeps per-pixel max and sum in small arrays so
// the inner loops run along contiguous pixels.
namespace {

void softmax(Backend& backend, bool log, const Tensor& in, const Tensor& out) {
  const int c = in.shape().c;
  const size_t hw = static_cast<size_t>(in.shape().h) * in.shape().w;
  const float* src = in.data_as<float>();
  float* dst = out.data_as<float>();
  pool_of(backend).parallel_for(static_cast<size_t>(in.batch()), [&](size_t b, size_t e) {
    std::vector<float> mx(hw), sum(hw);
    for (size_t n = b; n < e; ++n) {
      const float* x = src + n * c * hw;
      float* y = dst + n * c * hw;
      std::fill(mx.begin(), mx.end(), -std::numeric_limits<float>::infinity());
      std::fill(sum.begin(), sum.end(), 0.f);
      for (int ch = 0; ch < c; ++ch)
        for (size_t p = 0; p < hw; ++p) mx[p] = std::max(mx[p], x[ch * hw + p]);
      for (int ch = 0; ch < c; ++ch)
        for (size_t p = 0; p < hw; ++p) {
          const float v = std::exp(x[ch * hw + p] - mx[p]);
          sum[p] += v;
          if (!log) y[ch * hw + p] = v;
        }
      if (log) {
        for (size_t p = 0; p < hw; ++p) sum[p] = mx[p] + std::log(sum[p]);
        for (int ch = 0; ch < c; ++ch)
          for (size_t p = 0; p < hw; ++p) y[ch * hw + p] = x[ch * hw + p] - sum[p];
      } else {
        for (size_t p = 0; p < hw; ++p) sum[p] = 1.f / sum[p];
        for (int ch = 0; ch < c; ++ch)
          for (size_t p = 0; p < hw; ++p) y[ch * hw + p] *= sum[p];
      }
    }
  });
}

void softmax_gradient(Backend& backend, bool log, const Tensor& y, const Tensor& dy, const Tensor& dx) {
  const int c = y.shape().c;
  const size_t hw = static_cast<size_t>(y.shape().h) * y.shape().w;
  pool_of(backend).parallel_for(static_cast<size_t>(y.batch()), [&](size_t b, size_t e) {
    std::vector<float> sum(hw);
    for (size_t n = b; n < e; ++n) {
      const float* yv = y.data_as<float>() + n * c * hw;
      const float* g = dy.data_as<float>() + n * c * hw;
      float* out = dx.data_as<float>() + n * c * hw;
      std::fill(sum.begin(), sum.end(), 0.f);
      // softmax: dx = y·(dy − Σ dy·y);  log-softmax: dx = dy − exp(y)·Σ dy
      for (int ch = 0; ch < c; ++ch)
        for (size_t p = 0; p < hw; ++p) sum[p] += log ? g[ch * hw + p] : g[ch * hw + p] * yv[ch * hw + p];
      for (int ch = 0; ch < c; ++ch)
        for (size_t p = 0; p < hw; ++p) {
          const size_t i = ch * hw + p;
          out[i] = log ? g[i] - std::exp(yv[i]) * sum[p] : yv[i] * (g[i] - sum[p]);
        }
    }
  });
}

NNGRAPH_KERNEL(SoftMaxKernel, CPU, softmax);
NNGRAPH_KERNEL(SoftMaxGradientKernel, CPU, softmax_gradient);

}  // namespace
}  // namespace nngraph
