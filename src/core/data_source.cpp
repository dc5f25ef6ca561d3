#include "nngraph/data_source.h"

#include <cmath>
#include <random>

#include "nngraph/error.h"

namespace nngraph {

ArrayDataSource::ArrayDataSource(ConvolutionDescriptor descriptor, std::vector<float> weights,
                                 std::vector<float> biases, std::string label)
    : descriptor_(descriptor), weights_(std::move(weights)), biases_(std::move(biases)),
      label_(std::move(label)) {
  descriptor_.validate(label_);
  if (weights_.size() != descriptor_.weight_count())
    fail("[", label_, "] weights hold ", weights_.size(), " values, expected ",
         descriptor_.weight_count(), " (", descriptor_.str(), ")");
  if (!biases_.empty() && biases_.size() != static_cast<size_t>(descriptor_.output_feature_channels))
    fail("[", label_, "] biases hold ", biases_.size(), " values, expected ",
         descriptor_.output_feature_channels);
}

std::vector<float> ArrayDataSource::initial_weights(const ConvolutionDescriptor& d,
                                                    Initializer init, uint64_t seed) {
  std::vector<float> w(d.weight_count(), 0.f);
  const double area = static_cast<double>(d.kernel_height) * d.kernel_width;
  const double fan_in = d.input_feature_channels / d.groups * area;
  const double fan_out = d.output_feature_channels / d.groups * area;
  std::mt19937_64 rng(seed);
  if (init == Initializer::He) {
    std::normal_distribution<double> dist(0.0, std::sqrt(2.0 / fan_in));
    for (auto& v : w) v = static_cast<float>(dist(rng));
  } else if (init == Initializer::Glorot) {
    const double limit = std::sqrt(6.0 / (fan_in + fan_out));
    std::uniform_real_distribution<double> dist(-limit, limit);
    for (auto& v : w) v = static_cast<float>(dist(rng));
  }
  return w;
}

namespace {

std::vector<float> to_float(const WeightsView& v) {
  std::vector<float> out(v.count);
  if (v.count) convert_host(v.data, v.dtype, out.data(), DType::Float32, v.count);
  return out;
}

std::vector<float> ohwi_to_oihw(const std::vector<float>& src, const ConvolutionDescriptor& d) {
  const int o_n = d.output_feature_channels, i_n = d.input_feature_channels / d.groups;
  const int kh = d.kernel_height, kw = d.kernel_width;
  std::vector<float> out(src.size());
  for (int o = 0; o < o_n; ++o)
    for (int y = 0; y < kh; ++y)
      for (int x = 0; x < kw; ++x)
        for (int i = 0; i < i_n; ++i)
          out[((static_cast<size_t>(o) * i_n + i) * kh + y) * kw + x] =
              src[((static_cast<size_t>(o) * kh + y) * kw + x) * i_n + i];
  return out;
}

}  // namespace

LoadedWeights read_data_source(DataSource& source, const ConvolutionDescriptor& d,
                               const std::string& node) {
  LoadedWeights out;
  const WeightsView w = source.weights();
  if (!w.data && w.count) fail("[", node, "] data source returned no weights");
  if (w.count != d.weight_count())
    fail("[", node, "] data source '", source.label(), "' returned ", w.count,
         " weights, expected ", d.weight_count(), " (", d.str(), ")");
  out.weights = to_float(w);
  if (source.weights_layout() == WeightsLayout::OHWI) out.weights = ohwi_to_oihw(out.weights, d);
  const WeightsView b = source.biases();
  if (b.count && b.count != static_cast<size_t>(d.output_feature_channels))
    fail("[", node, "] data source '", source.label(), "' returned ", b.count,
         " biases, expected ", d.output_feature_channels);
  out.biases = to_float(b);
  for (float v : out.weights)
    if (!std::isfinite(v)) fail("[", node, "] data source '", source.label(), "' weights hold NaN or inf");
  return out;
}

}  // namespace nngraph
