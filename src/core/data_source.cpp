#include "nngraph/data_source.h"

#include <cmath>
#include <random>

#include "backends/backend.h"
#include "nngraph/error.h"

namespace nngraph {

ArrayDataSource::ArrayDataSource(ConvolutionDescriptor descriptor, std::vector<float> weights,
                                 std::vector<float> biases, std::string label)
    : descriptor_(descriptor), weights_(std::move(weights)), biases_(std::move(biases)),
      label_(std::move(label)), default_label_(label_.empty()) {
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

void ArrayDataSource::set_label(std::string label, bool is_default) {
  label_ = std::move(label);
  default_label_ = is_default;
}

WeightsView ArrayDataSource::weights() {
  sync_host();
  return {weights_.data(), weights_.size(), DType::Float32, {}};
}

WeightsView ArrayDataSource::biases() {
  sync_host();
  return {biases_.data(), biases_.size(), DType::Float32, {}};
}

void ArrayDataSource::sync_host() {
  Copy* newest = nullptr;
  for (Copy& c : copies_)
    if (c.changes > host_changes_ && (!newest || c.changes > newest->changes)) newest = &c;
  if (!newest) return;
  Backend& b = backend_for(newest->device);
  b.copy_to_host(weights_.data(), newest->values.weights->data(), weights_.size() * sizeof(float));
  if (!biases_.empty()) b.copy_to_host(biases_.data(), newest->values.biases->data(), biases_.size() * sizeof(float));
  host_changes_ = newest->changes;
}

void ArrayDataSource::upload(Copy& c) {
  Backend& b = backend_for(c.device);
  b.copy_from_host(c.values.weights->data(), weights_.data(), weights_.size() * sizeof(float));
  if (!biases_.empty()) b.copy_from_host(c.values.biases->data(), biases_.data(), biases_.size() * sizeof(float));
  c.changes = host_changes_;
}

ArrayDataSource::Copy* ArrayDataSource::copy_on(const Device& device) {
  for (Copy& c : copies_)
    if (c.device == device) return &c;
  return nullptr;
}

WeightsState ArrayDataSource::device_values(const Device& device, const std::string& node) {
  if (Copy* c = copy_on(device)) {
    if (c->changes != changes_) {  // changed elsewhere since
      sync_host();
      upload(*c);
    }
    return c->values;
  }
  // read_data_source checks the values and brings the host arrays up to date first.
  copies_.push_back({device, to_device(read_data_source(*this, descriptor_, node), device), host_changes_});
  return copies_.back().values;
}

void ArrayDataSource::set_optimizer(std::shared_ptr<Optimizer> optimizer) {
  optimizer_ = std::move(optimizer);
  if (optimizer_) slot_count();  // a bad slot count fails here, not at the first step
  state_ = OptimizerState{};  // a new optimizer starts from fresh state
}

size_t ArrayDataSource::slot_count() const {
  const int k = optimizer_ ? optimizer_->slot_count() : 0;
  if (k < 0 || k > 16) fail("[", label_, "] the optimizer's slot_count() must be between 0 and 16, got ", k);
  return static_cast<size_t>(k);
}

void ArrayDataSource::set_values(std::vector<float> weights, std::vector<float> biases) {
  if (weights.size() != weights_.size())
    fail("[", label_, "] weights hold ", weights.size(), " values, expected ", weights_.size());
  if (biases.size() != biases_.size())
    fail("[", label_, "] biases hold ", biases.size(), " values, expected ", biases_.size());
  for (const auto* values : {&weights, &biases})
    for (float v : *values)
      if (!std::isfinite(v)) fail("[", label_, "] ", values == &weights ? "weights" : "biases", " hold NaN or inf");
  weights_ = std::move(weights);
  biases_ = std::move(biases);
  host_changes_ = ++changes_;
  for (Copy& c : copies_) upload(c);
}

namespace {

std::shared_ptr<Buffer> upload_values(const Device& device, const std::vector<float>& values) {
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

WeightsState to_device(const LoadedWeights& w, const Device& device) {
  WeightsState st;
  st.weight_count = w.weights.size();
  st.weights = upload_values(device, w.weights);
  if (!w.biases.empty()) {
    st.bias_count = w.biases.size();
    st.biases = upload_values(device, w.biases);
  }
  return st;
}

std::function<void()> save_buffers(const WeightsState& w, const std::vector<std::shared_ptr<Buffer>>& more) {
  std::vector<std::pair<std::shared_ptr<Buffer>, std::shared_ptr<Buffer>>> saved;  // (live, copy)
  std::vector<std::shared_ptr<Buffer>> all{w.weights, w.biases};
  all.insert(all.end(), more.begin(), more.end());
  for (const auto& b : all) {
    if (!b) continue;
    auto copy = Buffer::allocate(b->bytes(), b->device());
    backend_for(b->device()).copy(copy->data(), b->data(), b->bytes());
    saved.emplace_back(b, copy);
  }
  return [saved] {
    for (const auto& [live, copy] : saved) backend_for(live->device()).copy(live->data(), copy->data(), live->bytes());
  };
}

BuiltinOptimizer* builtin_optimizer(DataSource* source) {
  auto* array = dynamic_cast<ArrayDataSource*>(source);
  return array ? dynamic_cast<BuiltinOptimizer*>(array->optimizer().get()) : nullptr;
}

std::function<void()> ArrayDataSource::snapshot(const WeightsState& w) {
  std::vector<std::shared_ptr<Buffer>> slots = state_.weight_slots;
  slots.insert(slots.end(), state_.bias_slots.begin(), state_.bias_slots.end());
  return [this, values = save_buffers(w, slots), state = state_, pending = pending_slots_, changes = changes_,
          copies = copies_] {
    values();
    state_ = state;
    pending_slots_ = pending;
    changes_ = changes;
    copies_ = copies;
  };
}

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

void ArrayDataSource::prepare_slots(const GradientState& gradient, const WeightsState& w) {
  const Device device = w.weights->device();
  const size_t k = slot_count();
  if (state_.weight_slots.size() == k && (!k || state_.weight_slots[0]->device() == device)) return;
  // First update here: zero state, or the host copy a checkpoint restored.
  const bool has_bias = w.biases && gradient.biases;
  const auto host = optimizer_slots();
  std::vector<std::shared_ptr<Buffer>> weight_slots, bias_slots;
  for (size_t i = 0; i < k; ++i) {
    weight_slots.push_back(upload_values(device, host.size() == 2 * k || host.size() == k
                                                     ? host[i]
                                                     : std::vector<float>(w.weight_count, 0.f)));
    if (has_bias)
      bias_slots.push_back(upload_values(device, host.size() == 2 * k ? host[k + i] : std::vector<float>(w.bias_count, 0.f)));
  }
  state_.weight_slots = std::move(weight_slots);
  state_.bias_slots = std::move(bias_slots);
  pending_slots_.clear();
}

std::vector<TensorUpdate> ArrayDataSource::prepare_update(const GradientState& gradient, WeightsState& w) {
  prepare_slots(gradient, w);
  const Device device = w.weights->device();
  const bool has_bias = w.biases && gradient.biases;
  ++state_.step;
  // The values change on this device: the other copies and the host arrays are older now.
  Copy* c = copy_on(device);
  if (c && c->values.weights == w.weights) c->changes = ++changes_;
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

void ArrayDataSource::check_optimizer_state(const std::vector<std::vector<float>>& slots, int64_t step) {
  if (!optimizer_) fail("[", label_, "] has no optimizer to restore state into");
  const size_t k = slot_count();
  const size_t want = biases_.empty() ? k : 2 * k;
  if (slots.size() != want)
    fail("[", label_, "] optimizer state has ", slots.size(), " vectors, expected ", want,
         " (a checkpoint of another optimizer?)");
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].size() != (i < k ? weights_.size() : biases_.size()))
      fail("[", label_, "] optimizer state vector ", i, " has ", slots[i].size(), " values, expected ",
           i < k ? weights_.size() : biases_.size());
    for (float v : slots[i])
      if (!std::isfinite(v)) fail("[", label_, "] optimizer state vector ", i, " holds NaN or inf");
  }
  if (step < 0) fail("[", label_, "] optimizer step must be >= 0, got ", step);
}

void ArrayDataSource::set_optimizer_state(const std::vector<std::vector<float>>& slots, int64_t step) {
  check_optimizer_state(slots, step);
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

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t k = 0; k < s.size(); ++k) out += cat(k ? ", " : "", s[k]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// A weights array's shape against the descriptor in the source's layout: that 4-D shape,
// (O, rest) or flat (whose count is checked apart).
void check_weights_shape(const std::vector<int64_t>& got, const ConvolutionDescriptor& d, WeightsLayout layout,
                         const std::string& node, const std::string& source) {
  const int64_t o = d.output_feature_channels, i = d.input_feature_channels / d.groups, kh = d.kernel_height,
                kw = d.kernel_width;
  const std::vector<int64_t> want =
      layout == WeightsLayout::OIHW ? std::vector<int64_t>{o, i, kh, kw} : std::vector<int64_t>{o, kh, kw, i};
  const bool fits = got.size() == 4 ? got == want : got.size() == 2 ? got[0] == o && got[1] == i * kh * kw
                                                                    : got.size() <= 1;
  if (!fits)
    fail("[", node, "] data source '", source, "' returned weights of shape ", shape_text(got), ", the descriptor needs ",
         shape_text(want), " in ", layout == WeightsLayout::OIHW ? "OIHW" : "OHWI",
         " order (weights_layout() declares the order)");
}

LoadedWeights read_loaded(DataSource& source, const ConvolutionDescriptor& d, const std::string& node) {
  LoadedWeights out;
  const WeightsView w = source.weights();
  if (!w.data && w.count) fail("[", node, "] data source returned no weights");
  if (!w.shape.empty()) check_weights_shape(w.shape, d, source.weights_layout(), node, source.label());
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
