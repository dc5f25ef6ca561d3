// RNN matrix layers: sequences of matrices through the shared stack runner.
#include "nngraph/error.h"
#include "ops/convert.h"
#include "ops/rnn.h"
#include "ops/rnn_stack.h"

namespace nngraph {
namespace {

void no_free(void*, size_t, const Device&) {}

// A Buffer over a matrix's dense storage, for the duration of one call.
std::shared_ptr<Buffer> view(const Matrix& m) {
  return std::make_shared<Buffer>(m.data(), size_t(m.rows()) * m.columns() * sizeof(float), m.device(), no_free);
}

float* floats(const std::shared_ptr<Buffer>& b) { return static_cast<float*>(b->data()); }

}  // namespace

RNNMatrixLayer::RNNMatrixLayer(RNNStack stack, Device device, std::string label)
    : stack_(std::move(stack)), device_(device), label_(std::move(label)) {
  stack_.validate(label_);
  backend_for(device_);  // raises now when the device has no backend
  for (const WeightSource& w : stack_.weight_sources()) {
    if (!w.source->load()) fail<DeviceError>("[", label_, "] data source '", w.source->label(), "' failed to load");
    has_bias_.push_back(w.source->tensor("biases").count > 0);
    w.source->purge();
  }
}

std::vector<std::pair<int, int>> RNNMatrixLayer::weight_shapes() const {
  std::vector<std::pair<int, int>> out;
  const auto sources = stack_.weight_sources();
  for (size_t i = 0; i < sources.size(); ++i) {
    const auto& d = std::get<MatrixDescriptor>(sources[i].descriptor);
    out.emplace_back(d.rows, d.diagonal ? 1 : d.columns);
    if (has_bias_[i]) out.emplace_back(1, d.rows);
  }
  return out;
}

std::vector<Matrix> RNNMatrixLayer::create_weight_matrices() const {
  std::vector<Matrix> out;
  const auto sources = stack_.weight_sources();
  const auto shapes = weight_shapes();
  for (size_t i = 0, k = 0; i < sources.size(); ++i) {
    const LoadedWeights w = read_data_source(*sources[i].source, sources[i].descriptor, label_);
    if (w.tensors[1].empty() == has_bias_[i])
      fail("[", label_, "] data source '", sources[i].source->label(), "' changed whether it has biases");
    for (size_t t = 0; t < (has_bias_[i] ? 2u : 1u); ++t, ++k) {
      out.push_back(Matrix::allocate(shapes[k].first, shapes[k].second, DType::Float32, device_));
      out.back().copy_from_host(w.tensors[t].data());
    }
  }
  return out;
}

std::vector<Matrix> RNNMatrixLayer::create_weight_gradient_matrices() const {
  std::vector<Matrix> out;
  for (const auto& [r, c] : weight_shapes()) {
    out.push_back(Matrix::allocate(r, c, DType::Float32, device_));
    std::vector<float> zeros(size_t(r) * c, 0.f);
    out.back().copy_from_host(zeros.data());
  }
  return out;
}

std::vector<WeightsState> RNNMatrixLayer::views(const std::vector<Matrix>& m, const char* what) const {
  const auto shapes = weight_shapes();
  if (m.size() != shapes.size()) fail("[", label_, "] expected ", shapes.size(), " ", what, " matrices, got ", m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    if (m[i].rows() != shapes[i].first || m[i].columns() != shapes[i].second || m[i].dtype() != DType::Float32 ||
        m[i].row_stride() != m[i].columns() || m[i].device() != device_)
      fail("[", label_, "] ", what, " matrix ", i, " must be a dense float32 ", shapes[i].first, "×", shapes[i].second,
           " matrix on ", device_.str(), ", got ", m[i].rows(), "×", m[i].columns());
  }
  std::vector<WeightsState> out;
  size_t k = 0;
  for (bool bias : has_bias_) {
    WeightsState w{{view(m[k]), nullptr}, {size_t(m[k].rows()) * m[k].columns(), 0}, {}};
    ++k;
    if (bias) {
      w.tensors[1] = view(m[k]);
      w.counts[1] = m[k].columns();
      ++k;
    }
    out.push_back(w);
  }
  return out;
}

namespace {

// Per-layer state matrices (N × H), or none.
std::vector<const float*> state_pointers(const std::vector<Matrix>& m, const std::vector<const RNNDescriptor*>& layers,
                                         int n, bool cell, const std::string& label, const char* what) {
  std::vector<const float*> out;
  if (m.empty()) return out;
  if (m.size() != layers.size()) fail("[", label, "] expected ", layers.size(), " ", what, " matrices, got ", m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    const int h = layers[i]->output_feature_channels;
    const bool used = !cell || layers[i]->cell == RNNCell::LSTM;
    if (used && (m[i].rows() != n || m[i].columns() != h || m[i].row_stride() != h || m[i].dtype() != DType::Float32))
      fail("[", label, "] ", what, " ", i, " must be a dense float32 ", n, "×", h, " matrix, got ", m[i].rows(), "×",
           m[i].columns());
    out.push_back(used ? m[i].data_as<float>() : nullptr);
  }
  return out;
}

// New per-layer N × H matrices (cell: LSTM layers only, empty for the others) and their data.
std::vector<float*> state_outputs(const std::vector<const RNNDescriptor*>& layers, int n, bool cell,
                                  const Device& device, std::vector<Matrix>& out) {
  std::vector<float*> data;
  for (const RNNDescriptor* d : layers) {
    const bool used = !cell || d->cell == RNNCell::LSTM;
    out.push_back(used ? Matrix::allocate(n, d->output_feature_channels, DType::Float32, device) : Matrix());
    data.push_back(used ? out.back().data_as<float>() : nullptr);
  }
  return data;
}

// Steps of N × columns matrices into one time-major buffer.
std::shared_ptr<Buffer> pack(Backend& b, const std::vector<Matrix>& steps, int n, int columns, const Device& device,
                             const std::string& label, const char* what) {
  if (steps.empty()) fail("[", label, "] the ", what, " sequence is empty");
  auto out = b.allocate(steps.size() * n * columns * sizeof(float));
  for (size_t t = 0; t < steps.size(); ++t) {
    const Matrix& m = steps[t];
    if (m.dtype() != DType::Float32 || m.device() != device)
      fail("[", label, "] ", what, " ", t, " must be a float32 matrix on ", device.str());
    if (m.rows() != n)
      fail("[", label, "] ", what, " ", t, " has ", m.rows(), " rows, step 0 has ", n, ": every step holds the same sequences");
    if (m.columns() != columns)
      fail("[", label, "] ", what, " ", t, " has ", m.columns(), " feature channels, expected ", columns);
    copy_float_rows(b, floats(out) + t * n * columns, columns, m.data_as<float>(), m.row_stride(), n, columns, false);
  }
  return out;
}

// One matrix per step, each a view of the time-major buffer.
std::vector<Matrix> steps_of(const std::shared_ptr<Buffer>& seq, int steps, int n, int columns) {
  std::vector<Matrix> out;
  for (int t = 0; t < steps; ++t)
    out.emplace_back(n, columns, columns, DType::Float32, seq, size_t(t) * n * columns * sizeof(float));
  return out;
}

}  // namespace

RNNMatrixLayer::Forward RNNMatrixLayer::forward(const std::vector<Matrix>& sources, const std::vector<Matrix>& weights,
                                                const std::vector<Matrix>& h0, const std::vector<Matrix>& c0,
                                                bool training) const {
  Backend& b = backend_for(device_);
  if (sources.empty()) fail("[", label_, "] the source sequence is empty");
  const int n = sources[0].rows(), steps = static_cast<int>(sources.size());
  auto x = pack(b, sources, n, stack_.input_channels(), device_, label_, "source");
  const auto w = views(weights, "weight");
  const auto layers = stack_.layers();
  const auto l = rnn_stack::layout(stack_, steps, n);
  auto state = b.allocate(l.total * sizeof(float));
  auto y = b.allocate(size_t(steps) * n * stack_.output_channels() * sizeof(float));
  rnn_stack::IO io;
  io.x = floats(x);
  io.h0 = state_pointers(h0, layers, n, false, label_, "initial state");
  io.c0 = state_pointers(c0, layers, n, true, label_, "initial cell state");
  io.y = floats(y);
  io.for_gradient = training;
  Forward out;
  io.h_final = state_outputs(layers, n, false, device_, out.h_final);
  io.c_final = state_outputs(layers, n, true, device_, out.c_final);
  rnn_stack::forward(b, stack_, l, w.data(), floats(state), io);
  out.outputs = steps_of(y, steps, n, stack_.output_channels());
  if (training) out.training_state = std::make_shared<TrainingState>(TrainingState{steps, n, x, state});
  b.synchronize();
  return out;
}

RNNMatrixLayer::Gradients RNNMatrixLayer::gradient(const std::vector<Matrix>& output_gradients,
                                                   const TrainingState& ts, const std::vector<Matrix>& weights,
                                                   const std::vector<Matrix>& weight_gradients, bool accumulate,
                                                   const std::vector<Matrix>& dh_final,
                                                   const std::vector<Matrix>& dc_final) const {
  Backend& b = backend_for(device_);
  if (!ts.state) fail("[", label_, "] the training state is empty: run forward with training first");
  const int n = ts.batch, steps = ts.steps;
  std::shared_ptr<Buffer> dy;
  if (!output_gradients.empty()) {
    if (static_cast<int>(output_gradients.size()) != steps)
      fail("[", label_, "] expected ", steps, " output gradients (one per step), got ", output_gradients.size());
    dy = pack(b, output_gradients, n, stack_.output_channels(), device_, label_, "output gradient");
  }
  const auto w = views(weights, "weight");
  std::vector<WeightsState> dw;
  std::vector<std::shared_ptr<Buffer>> fresh;  // accumulate: this pass's gradients, added afterwards
  if (!weight_gradients.empty()) {
    dw = views(weight_gradients, "weight gradient");
    if (accumulate)
      for (auto& g : dw)
        for (size_t t = 0; t < g.tensors.size(); ++t)
          if (g.tensors[t]) {
            fresh.push_back(g.tensors[t]);
            g.tensors[t] = b.allocate(g.counts[t] * sizeof(float));
          }
  }
  const auto layers = stack_.layers();
  const auto l = rnn_stack::layout(stack_, steps, n);
  auto dx = b.allocate(size_t(steps) * n * stack_.input_channels() * sizeof(float));
  rnn_stack::IO io;
  io.x = floats(ts.x);
  io.dy = dy ? floats(dy) : nullptr;
  io.dh_final = state_pointers(dh_final, layers, n, false, label_, "final state gradient");
  io.dc_final = state_pointers(dc_final, layers, n, true, label_, "final cell state gradient");
  io.dx = floats(dx);
  Gradients out;
  io.dh0 = state_outputs(layers, n, false, device_, out.h0);
  io.dc0 = state_outputs(layers, n, true, device_, out.c0);
  rnn_stack::gradient(b, stack_, l, w.data(), floats(ts.state), io, dw.empty() ? nullptr : dw.data());
  if (accumulate) {
    size_t k = 0;
    for (const auto& g : dw)
      for (const auto& part : g.tensors) {
        if (!part) continue;
        const int count = static_cast<int>(part->bytes() / sizeof(float));
        copy_float_rows(b, floats(fresh[k++]), count, floats(part), count, 1, count, true);
      }
  }
  out.sources = steps_of(dx, steps, n, stack_.input_channels());
  b.synchronize();
  return out;
}

}  // namespace nngraph
