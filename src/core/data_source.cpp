#include "nngraph/data_source.h"

#include <cmath>
#include <random>

#include "backends/backend.h"
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

WeightsView ArrayDataSource::weights() {
  sync_from_device();
  return {weights_.data(), weights_.size(), DType::Float32};
}

WeightsView ArrayDataSource::biases() {
  sync_from_device();
  return {biases_.data(), biases_.size(), DType::Float32};
}

void ArrayDataSource::sync_from_device() {
  if (!trained_.weights) return;
  Backend& b = backend_for(trained_.weights->device());
  b.copy_to_host(weights_.data(), trained_.weights->data(), weights_.size() * sizeof(float));
  if (trained_.biases) b.copy_to_host(biases_.data(), trained_.biases->data(), biases_.size() * sizeof(float));
}

void ArrayDataSource::set_optimizer(std::shared_ptr<Optimizer> optimizer) {
  optimizer_ = std::move(optimizer);
  state_ = OptimizerState{};  // a new optimizer starts from fresh state
}

void ArrayDataSource::set_values(std::vector<float> weights, std::vector<float> biases) {
  if (weights.size() != weights_.size())
    fail("[", label_, "] weights hold ", weights.size(), " values, expected ", weights_.size());
  if (biases.size() != biases_.size())
    fail("[", label_, "] biases hold ", biases.size(), " values, expected ", biases_.size());
  weights_ = std::move(weights);
  biases_ = std::move(biases);
  if (!trained_.weights) return;
  Backend& b = backend_for(trained_.weights->device());
  b.copy_from_host(trained_.weights->data(), weights_.data(), weights_.size() * sizeof(float));
  if (trained_.biases) b.copy_from_host(trained_.biases->data(), biases_.data(), biases_.size() * sizeof(float));
}

namespace {

std::shared_ptr<Buffer> upload(const Device& device, const std::vector<float>& values) {
  auto buf = Buffer::allocate(values.size() * sizeof(float), device);
  backend_for(device).copy_from_host(buf->data(), values.data(), buf->bytes());
  return buf;
}

std::vector<float> download(const Buffer& buf) {
  std::vector<float> v(buf.bytes() / sizeof(float));
  backend_for(buf.device()).copy_to_host(v.data(), buf.data(), buf.bytes());
  return v;
}

}  // namespace

bool ArrayDataSource::update(const GradientState& gradient, WeightsState& w) {
  if (!optimizer_) return false;
  const Device device = w.weights->device();
  for (const TensorUpdate& t : prepare_update(gradient, w)) {
    std::vector<float*> slots;
    for (float* p : t.slots)
      if (p) slots.push_back(p);
    optimizer_->apply(device, t.values, t.gradient, slots, t.count, t.step);
  }
  return true;
}

std::vector<TensorUpdate> ArrayDataSource::prepare_update(const GradientState& gradient, WeightsState& w) {
  const Device device = w.weights->device();
  const size_t k = optimizer_->slot_count();
  const bool has_bias = w.biases && gradient.biases;
  if (state_.weight_slots.size() != k || (k && state_.weight_slots[0]->device() != device)) {
    // First update here: zero state, or the host copy a checkpoint restored.
    auto host = optimizer_slots();
    state_.weight_slots.clear();
    state_.bias_slots.clear();
    for (size_t i = 0; i < k; ++i) {
      state_.weight_slots.push_back(upload(device, host.size() == 2 * k || host.size() == k
                                                       ? host[i]
                                                       : std::vector<float>(w.weight_count, 0.f)));
      if (has_bias)
        state_.bias_slots.push_back(upload(device, host.size() == 2 * k ? host[k + i] : std::vector<float>(w.bias_count, 0.f)));
    }
    pending_slots_.clear();
  }
  ++state_.step;
  trained_ = w;
  auto tensor = [&](const std::shared_ptr<Buffer>& values, const std::shared_ptr<Buffer>& grad,
                    const std::vector<std::shared_ptr<Buffer>>& slots, size_t count) {
    TensorUpdate t{static_cast<float*>(values->data()), static_cast<const float*>(grad->data()), {}, count, state_.step};
    for (size_t i = 0; i < slots.size() && i < 3; ++i) t.slots[i] = static_cast<float*>(slots[i]->data());
    return t;
  };
  std::vector<TensorUpdate> out{tensor(w.weights, gradient.weights, state_.weight_slots, w.weight_count)};
  if (has_bias) out.push_back(tensor(w.biases, gradient.biases, state_.bias_slots, w.bias_count));
  return out;
}

std::vector<std::vector<float>> ArrayDataSource::optimizer_slots() {
  if (!pending_slots_.empty()) return pending_slots_;
  std::vector<std::vector<float>> out;
  for (auto& b : state_.weight_slots) out.push_back(download(*b));
  for (auto& b : state_.bias_slots) out.push_back(download(*b));
  return out;
}

void ArrayDataSource::set_optimizer_state(const std::vector<std::vector<float>>& slots, int64_t step) {
  if (!optimizer_) fail("[", label_, "] has no optimizer to restore state into");
  const size_t k = optimizer_->slot_count();
  const size_t want = biases_.empty() ? k : 2 * k;
  if (slots.size() != want)
    fail("[", label_, "] optimizer state has ", slots.size(), " vectors, expected ", want);
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i].size() != (i < k ? weights_.size() : biases_.size()))
      fail("[", label_, "] optimizer state vector ", i, " has ", slots[i].size(), " values, expected ",
           i < k ? weights_.size() : biases_.size());
  if (step < 0) fail("[", label_, "] optimizer step must be >= 0");
  state_ = OptimizerState{};
  state_.step = step;
  pending_slots_ = slots;
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

LoadedWeights read_loaded(DataSource& source, const ConvolutionDescriptor& d, const std::string& node) {
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

}  // namespace

LoadedWeights read_data_source(DataSource& source, const ConvolutionDescriptor& d, const std::string& node) {
  if (!source.load()) fail<DeviceError>("[", node, "] data source '", source.label(), "' failed to load");
  LoadedWeights out;
  try {
    out = read_loaded(source, d, node);
  } catch (...) {
    source.purge();
    throw;
  }
  source.purge();  // one source's host weights at a time
  return out;
}

}  // namespace nngraph
