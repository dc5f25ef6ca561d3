#include "nngraph/data_source.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/math.h"
#include "backends/optimizer_math.h"
#include "nngraph/error.h"

namespace nngraph {

size_t WeightsState::parameter_count() const {
  size_t n = 0;
  for (size_t c : counts) n += c;
  return n;
}

ArrayDataSource::ArrayDataSource(ParameterDescriptor descriptor, std::vector<std::vector<float>> tensors,
                                 std::string label)
    : descriptor_(std::move(descriptor)), specs_(tensor_specs(descriptor_)), values_(std::move(tensors)),
      frozen_(specs_.size(), false), label_(std::move(label)), default_label_(label_.empty()) {
  const std::string name = label_.empty() ? kind_name(descriptor_) : label_;
  validate(descriptor_, name);
  if (values_.size() != specs_.size())
    fail("[", name, "] a ", kind_name(descriptor_), " source holds ", specs_.size(), " tensors, got ", values_.size());
  for (size_t i = 0; i < specs_.size(); ++i) {
    const TensorSpec& t = specs_[i];
    if (values_[i].empty() && !t.optional) values_[i].assign(t.count(), t.fill);
    if (!values_[i].empty() && values_[i].size() != t.count())
      fail("[", name, "] ", t.name, " hold ", values_[i].size(), " values, expected ", t.count(), " (",
           describe(descriptor_), ")");
    check_values(t, values_[i], "[" + name + "]");
  }
}

namespace {

// fan_in, fan_out of a kind's weights.
std::pair<double, double> fans(const ParameterDescriptor& d) {
  if (const auto* c = std::get_if<ConvolutionDescriptor>(&d)) {
    const double area = static_cast<double>(c->kernel_height) * c->kernel_width;
    return {c->input_feature_channels / c->groups * area, c->output_feature_channels / c->groups * area};
  }
  if (const auto* m = std::get_if<MatrixDescriptor>(&d))
    return m->diagonal ? std::pair{1.0, 1.0} : std::pair{double(m->columns), double(m->rows)};
  fail("[", kind_name(d), "] has no weights to initialize");
}

}  // namespace

std::vector<float> ArrayDataSource::initial_weights(const ParameterDescriptor& d, Initializer init, uint64_t seed) {
  const auto [fan_in, fan_out] = fans(d);
  std::vector<float> w(tensor_specs(d)[0].count(), 0.f);
  if (init == Initializer::Zeros) return w;
  // Blocks of values, each from its own stream, drawn across the cpu's threads: the same values
  // for any thread count, and a large network's initialisation (a model's reset between runs)
  // is not one thread's million draws. The first block's stream is the seed's own, so tensors
  // of up to a block hold the values one stream always gave them; the others' are keyed by
  // (seed, block).
  constexpr size_t kBlock = 16384;
  const double he = std::sqrt(2.0 / fan_in), limit = std::sqrt(6.0 / (fan_in + fan_out));
  const size_t blocks = (w.size() + kBlock - 1) / kBlock;
  cpu_backend().pool().parallel_for(blocks, [&](size_t first, size_t end) {
    for (size_t k = first; k < end; ++k) {
      std::mt19937_64 rng(k == 0 ? seed : math::mix64(seed + k * 0x9e3779b97f4a7c15ull));
      std::normal_distribution<double> normal(0.0, he);
      std::uniform_real_distribution<double> uniform(-limit, limit);
      const size_t to = std::min(w.size(), (k + 1) * kBlock);
      for (size_t i = k * kBlock; i < to; ++i)
        w[i] = static_cast<float>(init == Initializer::He ? normal(rng) : uniform(rng));
    }
  });
  return w;
}

void ArrayDataSource::set_label(std::string label, bool is_default) {
  label_ = std::move(label);
  default_label_ = is_default;
}

WeightsView ArrayDataSource::tensor(const std::string& name) {
  const size_t i = tensor_index(descriptor_, name, label_);
  sync_host();
  return {values_[i].data(), values_[i].size(), DType::Float32, {}};
}

void ArrayDataSource::sync_host() {
  Copy* newest = nullptr;
  for (Copy& c : copies_)
    if (c.changes > host_changes_ && (!newest || c.changes > newest->changes)) newest = &c;
  if (!newest) return;
  Backend& b = backend_for(newest->device);
  for (size_t i = 0; i < values_.size(); ++i)
    if (has(i) && newest->values.tensors[i]->data() != values_[i].data())  // the cpu's copy is the host arrays
      b.copy_to_host(values_[i].data(), newest->values.tensors[i]->data(), values_[i].size() * sizeof(float));
  host_changes_ = newest->changes;
}

void ArrayDataSource::upload(Copy& c) {
  Backend& b = backend_for(c.device);
  for (size_t i = 0; i < values_.size(); ++i)
    if (has(i) && c.values.tensors[i]->data() != values_[i].data())
      b.copy_from_host(c.values.tensors[i]->data(), values_[i].data(), values_[i].size() * sizeof(float));
  c.changes = host_changes_;
}

ArrayDataSource::Copy* ArrayDataSource::copy_on(const Device& device) {
  for (Copy& c : copies_)
    if (c.device == device) return &c;
  return nullptr;
}

const WeightsState& ArrayDataSource::device_values(const Device& device, const std::string& node) {
  if (Copy* c = copy_on(device)) {
    if (c->changes != changes_) {  // changed elsewhere since
      sync_host();
      upload(*c);
    }
    return c->values;
  }
  if (device.type() != DeviceType::CPU) {
    // read_data_source checks the values and brings the host arrays up to date first.
    copies_.push_back({device, to_device(read_data_source(*this, descriptor_, node), device), host_changes_});
    return copies_.back().values;
  }
  // The cpu computes with the host arrays themselves (one copy of a model's weights, not two):
  // their storage stays where it is for the source's life (set_values writes into it).
  sync_host();
  WeightsState on_cpu;
  for (size_t i = 0; i < values_.size(); ++i) {
    if (has(i)) check_values(specs_[i], values_[i], cat("[", node, "] data source '", label_, "'"));
    on_cpu.tensors.push_back(!has(i) ? nullptr
                                     : std::make_shared<Buffer>(values_[i].data(), values_[i].size() * sizeof(float),
                                                                device, [](void*, size_t, const Device&) {}));
    on_cpu.counts.push_back(values_[i].size());
  }
  copies_.push_back({device, std::move(on_cpu), host_changes_});
  return copies_.back().values;
}

void ArrayDataSource::set_optimizer(std::shared_ptr<Optimizer> optimizer) {
  optimizer_ = std::move(optimizer);
  if (optimizer_) slot_count();  // a bad slot count fails here, not at the first step
  reset_optimizer_state();  // a new optimizer starts from fresh state
}

void ArrayDataSource::reset_optimizer_state() {
  state_ = OptimizerState{};
  pending_slots_.clear();
}

size_t ArrayDataSource::slot_count() const {
  const int k = optimizer_ ? optimizer_->slot_count() : 0;
  if (k < 0 || k > 16) fail("[", label_, "] the optimizer's slot_count() must be between 0 and 16, got ", k);
  return static_cast<size_t>(k);
}

void ArrayDataSource::set_values(std::vector<std::vector<float>> tensors) {
  if (tensors.size() != values_.size())
    fail("[", label_, "] a ", kind_name(descriptor_), " source holds ", values_.size(), " tensors, got ", tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].size() != values_[i].size())
      fail("[", label_, "] ", specs_[i].name, " hold ", tensors[i].size(), " values, expected ", values_[i].size());
    check_values(specs_[i], tensors[i], "[" + label_ + "]");
  }
  for (size_t i = 0; i < tensors.size(); ++i) std::copy(tensors[i].begin(), tensors[i].end(), values_[i].begin());
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
  for (const auto& t : w.tensors) {
    st.tensors.push_back(t.empty() ? nullptr : upload_values(device, t));
    st.counts.push_back(t.size());
  }
  return st;
}

std::function<void()> save_buffers(const WeightsState& w, const std::vector<std::shared_ptr<Buffer>>& more) {
  std::vector<std::pair<std::shared_ptr<Buffer>, std::shared_ptr<Buffer>>> saved;  // (live, copy)
  std::vector<std::shared_ptr<Buffer>> all = w.tensors;
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
  std::vector<std::shared_ptr<Buffer>> slots;
  for (const auto& per_tensor : state_.slots) slots.insert(slots.end(), per_tensor.begin(), per_tensor.end());
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
  count_skips(nullptr);
  const Device device = w.weights()->device();
  for (const TensorUpdate& t : prepare_update(gradient, w)) {
    std::vector<float*> slots;
    for (float* p : t.slots)
      if (p) slots.push_back(p);
    optimizer_->apply(device, t.values, static_cast<const float*>(t.gradient), slots, t.count, t.step);
  }
  return true;
}

void ArrayDataSource::prepare_slots(const WeightsState& w) {
  const Device device = w.tensors.at(0)->device();
  const size_t k = slot_count();
  bool current = state_.slots.size() == specs_.size();
  for (size_t i = 0; current && i < specs_.size(); ++i)
    current = !slotted(i) || (state_.slots[i].size() == k && (!k || state_.slots[i][0]->device() == device));
  if (current) return;
  // First update here: zero state, or the host copy a checkpoint restored.
  const auto host = optimizer_slots();
  std::vector<std::vector<std::shared_ptr<Buffer>>> slots(specs_.size());
  size_t at = 0;
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (!slotted(i)) continue;
    for (size_t j = 0; j < k; ++j, ++at)
      slots[i].push_back(upload_values(device, at < host.size() ? host[at] : std::vector<float>(values_[i].size(), 0.f)));
  }
  state_.slots = std::move(slots);
  pending_slots_.clear();
}

void ArrayDataSource::set_frozen(const std::vector<std::string>& names) {
  std::vector<bool> frozen(specs_.size(), false);
  for (const std::string& name : names) {
    const size_t i = tensor_index(descriptor_, name, label_);
    if (!specs_[i].trained) fail("[", label_, "] ", name, " is a statistic, which no optimizer trains");
    frozen[i] = true;
  }
  if (frozen == frozen_) return;
  frozen_ = std::move(frozen);
  state_.slots.clear();
  pending_slots_.clear();
}

std::vector<std::string> ArrayDataSource::frozen() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < specs_.size(); ++i)
    if (frozen_[i]) out.push_back(specs_[i].name);
  return out;
}

void ArrayDataSource::changed_on_device(const WeightsState& w) {
  Copy* c = copy_on(w.tensors.at(0)->device());
  if (c && c->values.tensors == w.tensors) c->changes = ++changes_;
}

namespace {

int64_t skipped_steps(const Buffer& scaling) {
  int64_t skipped = 0;
  backend_for(scaling.device())
      .copy_to_host(&skipped, static_cast<const char*>(scaling.data()) + offsetof(math::LossScaleState, skipped),
                    sizeof skipped);
  return skipped;
}

}  // namespace

int64_t ArrayDataSource::optimizer_step() const {
  return state_.scaling ? state_.step - (skipped_steps(*state_.scaling) - state_.skips_from) : state_.step;
}

void ArrayDataSource::count_skips(const std::shared_ptr<const Buffer>& scaling) {
  if (scaling == state_.scaling) return;
  const int64_t step = optimizer_step(), from = scaling ? skipped_steps(*scaling) : 0;
  state_.step = step;
  state_.scaling = scaling;
  state_.skips_from = from;
}

std::vector<TensorUpdate> ArrayDataSource::prepare_update(const GradientState& gradient, WeightsState& w) {
  prepare_slots(w);
  ++state_.step;
  changed_on_device(w);
  std::vector<TensorUpdate> out;
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (!slotted(i) || i >= gradient.tensors.size() || !gradient.tensors[i]) continue;
    // With scaling, the update subtracts the steps skipped so far (a count on the device).
    TensorUpdate t{static_cast<float*>(w.tensors[i]->data()), gradient.tensors[i]->data(), {}, w.counts[i],
                   state_.step + state_.skips_from, gradient.dtype(i)};
    t.gradient_in_copy_order = gradient.layout(i) == Layout::NHWC;
    for (size_t j = 0; j < state_.slots[i].size() && j < kMaxSlots; ++j)
      t.slots[j] = static_cast<float*>(state_.slots[i][j]->data());
    out.push_back(t);
  }
  return out;
}

std::vector<std::vector<float>> ArrayDataSource::optimizer_slots() {
  if (!pending_slots_.empty()) return pending_slots_;
  std::vector<std::vector<float>> out;
  for (const auto& per_tensor : state_.slots)
    for (const auto& b : per_tensor) out.push_back(download(*b));
  return out;
}

void ArrayDataSource::check_optimizer_state(const std::vector<std::vector<float>>& slots, int64_t step) {
  if (!optimizer_) fail("[", label_, "] has no optimizer to restore state into");
  const size_t k = slot_count();
  std::vector<size_t> sizes;  // of each vector the state must have
  for (size_t i = 0; i < specs_.size(); ++i)
    if (slotted(i)) sizes.insert(sizes.end(), k, values_[i].size());
  if (slots.size() != sizes.size())
    fail("[", label_, "] optimizer state has ", slots.size(), " vectors, expected ", sizes.size(),
         " (a checkpoint of another optimizer?)");
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].size() != sizes[i])
      fail("[", label_, "] optimizer state vector ", i, " has ", slots[i].size(), " values, expected ", sizes[i]);
    for (float v : slots[i])
      if (!std::isfinite(v)) fail("[", label_, "] optimizer state vector ", i, " holds NaN or inf");
  }
  if (step < 0) fail("[", label_, "] optimizer step must be >= 0, got ", step);
}

void ArrayDataSource::swap_average() {
  BuiltinOptimizer* builtin = builtin_optimizer(this);
  if (!builtin || builtin->descriptor.ema_decay <= 0.f)
    fail("[", label_, "] its optimizer keeps no average of the weights (ema_decay)");
  std::vector<std::vector<float>> slots = optimizer_slots();
  if (slots.empty()) return;  // no update yet
  sync_host();
  const int64_t step = optimizer_step();
  OptimizerStep now = builtin->params();
  now.d = builtin->descriptor;
  const size_t k = slot_count(), average = static_cast<size_t>(average_slot(now));
  std::vector<std::vector<float>> values = values_;
  size_t at = 0;
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (!slotted(i)) continue;
    std::vector<float>& d = slots[at * k + average];  // the average less the values
    for (size_t j = 0; j < d.size(); ++j) {
      const float w = values[i][j];
      values[i][j] = w + d[j];
      d[j] = w - values[i][j];  // exact where the two are within a factor of 2: swapping back restores w
    }
    ++at;
  }
  check_optimizer_state(slots, step);
  set_values(std::move(values));  // checked before it changes anything
  set_optimizer_state(slots, step);
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

// The shape an array of a source must fit: convolution weights in the source's axis order.
TensorSpec as_supplied(TensorSpec t, const ParameterDescriptor& d, WeightsLayout layout) {
  if (std::holds_alternative<ConvolutionDescriptor>(d) && t.name == "weights" && layout == WeightsLayout::OHWI)
    t.shape = {t.shape[0], t.shape[2], t.shape[3], t.shape[1]};
  return t;
}

std::vector<float> read_tensor(DataSource& source, const TensorSpec& spec, const ParameterDescriptor& d,
                               const std::string& node) {
  const WeightsView v = source.tensor(spec.name);
  if (!v.count) {
    if (spec.optional) return {};
    fail("[", node, "] data source '", source.label(), "' returned no ", spec.name);
  }
  if (!v.data) fail("[", node, "] data source '", source.label(), "' returned no ", spec.name, " data");
  const WeightsLayout layout = source.weights_layout();
  const TensorSpec want = as_supplied(spec, d, layout);
  if (!shape_fits(v.shape, want))
    fail("[", node, "] data source '", source.label(), "' returned ", spec.name, " of shape ", shape_text(v.shape),
         ", the descriptor needs ", shape_text(want.shape),
         std::holds_alternative<ConvolutionDescriptor>(d) && spec.name == "weights"
             ? cat(" in ", layout == WeightsLayout::OIHW ? "OIHW" : "OHWI", " order (weights_layout() declares the order)")
             : std::string());
  if (v.count != spec.count())
    fail("[", node, "] data source '", source.label(), "' returned ", v.count, " ", spec.name, ", expected ",
         spec.count(), " (", describe(d), ")");
  std::vector<float> out = to_float(v);
  check_values(spec, out, cat("[", node, "] data source '", source.label(), "'"));
  if (want.shape != spec.shape) out = ohwi_to_oihw(out, std::get<ConvolutionDescriptor>(d));
  return out;
}

LoadedWeights read_loaded(DataSource& source, const ParameterDescriptor& d, const std::string& node) {
  LoadedWeights out;
  for (const TensorSpec& spec : tensor_specs(d)) out.tensors.push_back(read_tensor(source, spec, d, node));
  return out;
}

}  // namespace

LoadedWeights read_data_source(DataSource& source, const ParameterDescriptor& d, const std::string& node) {
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
