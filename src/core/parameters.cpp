// The tensors each layer kind's data source supplies.
#include "nngraph/parameters.h"

#include <cmath>

#include "nngraph/error.h"

namespace nngraph {

size_t TensorSpec::count() const {
  size_t n = 1;
  for (int64_t s : shape) n *= static_cast<size_t>(s);
  return n;
}

void MatrixDescriptor::validate(const std::string& label) const {
  if (rows < 1 || columns < 1) fail("[", label, "] a matrix needs positive rows and columns, got ", rows, "×", columns);
  if (diagonal && rows != columns) fail("[", label, "] a diagonal matrix is square, got ", rows, "×", columns);
}

std::string MatrixDescriptor::str() const { return diagonal ? cat("diagonal ", rows) : cat(rows, "×", columns); }

void NormalizationDescriptor::validate(const std::string& label) const {
  if (feature_channels < 1) fail("[", label, "] feature channels must be positive, got ", feature_channels);
}

std::string NormalizationDescriptor::str() const {
  return cat(feature_channels, " channels", statistics ? "" : " without statistics");
}

std::vector<TensorSpec> tensor_specs(const ConvolutionDescriptor& d) {
  const int64_t o = d.output_feature_channels, i = d.input_feature_channels;
  TensorSpec weights{"weights", {d.transposed ? i : o, (d.transposed ? o : i) / d.groups, d.kernel_height, d.kernel_width}};
  weights.operand = true;
  return {weights, {"biases", {o}, true}};
}

std::vector<TensorSpec> tensor_specs(const MatrixDescriptor& d) {
  const std::vector<int64_t> w = d.diagonal ? std::vector<int64_t>{d.rows} : std::vector<int64_t>{d.rows, d.columns};
  return {{"weights", w}, {"biases", {d.rows}, true}};
}

std::vector<TensorSpec> tensor_specs(const NormalizationDescriptor& d) {
  const std::vector<int64_t> c{d.feature_channels};
  std::vector<TensorSpec> specs{{"gamma", c, false, true, 1.f}, {"beta", c, false, true, 0.f}};
  if (d.statistics) {
    specs.push_back({"mean", c, false, false, 0.f});
    specs.push_back({"variance", c, false, false, 1.f, true});
  }
  return specs;
}

std::vector<TensorSpec> tensor_specs(const ParameterDescriptor& d) {
  return std::visit([](const auto& k) { return tensor_specs(k); }, d);
}

size_t tensor_index(const ParameterDescriptor& d, const std::string& name, const std::string& label) {
  const auto specs = tensor_specs(d);
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].name == name) return i;
  fail("[", label, "] a ", kind_name(d), " source has no tensor '", name, "'");
}

const char* kind_name(const ParameterDescriptor& d) {
  static const char* const names[] = {"convolution", "matrix", "normalization"};
  static_assert(std::variant_size_v<ParameterDescriptor> == 3, "name every kind");
  return names[d.index()];
}

std::string describe(const ParameterDescriptor& d) {
  return std::visit([](const auto& k) { return k.str(); }, d);
}

void validate(const ParameterDescriptor& d, const std::string& label) {
  std::visit([&](const auto& k) { k.validate(label); }, d);
}

namespace {

std::vector<int64_t> without_trailing_ones(std::vector<int64_t> s) {
  while (s.size() > 1 && s.back() == 1) s.pop_back();
  return s;
}

}  // namespace

bool shape_fits(const std::vector<int64_t>& got, const TensorSpec& spec) {
  if (got.size() <= 1) return true;
  if (without_trailing_ones(got) == without_trailing_ones(spec.shape)) return true;
  size_t rest = 1;
  for (size_t k = 1; k < got.size(); ++k) rest *= static_cast<size_t>(got[k]);
  return got.size() == 2 && !spec.shape.empty() && got[0] == spec.shape[0] && got[0] * rest == spec.count();
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t k = 0; k < s.size(); ++k) out += cat(k ? ", " : "", s[k]);
  return out + (s.size() == 1 ? ",)" : ")");
}

void check_values(const TensorSpec& spec, const std::vector<float>& values, const std::string& who) {
  for (float v : values) {
    if (!std::isfinite(v)) fail(who, " ", spec.name, " hold NaN or inf");
    if (spec.non_negative && v < 0.f) fail(who, " ", spec.name, " hold ", v, ", below zero");
  }
}

}  // namespace nngraph
