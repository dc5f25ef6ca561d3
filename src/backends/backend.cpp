#include "backends/backend.h"

#include "backends/cpu/cpu_backend.h"
#ifdef NNGRAPH_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif
#include "nngraph/error.h"
#include "nngraph/nodes.h"
#include "nngraph/rnn.h"

namespace nngraph {

void Backend::fill_from_host(void* dst, size_t bytes, const std::function<void(void*)>& fill) {
  std::unique_ptr<char[]> host(new char[bytes]);  // uninitialized: fill writes every byte
  fill(host.get());
  copy_from_host(dst, host.get(), bytes);
}

std::shared_ptr<Buffer> Backend::upload(size_t bytes, const std::function<void(void*)>& fill) {
  auto buffer = allocate(bytes);
  fill_from_host(buffer->data(), bytes, fill);
  return buffer;
}

void Backend::unsupported(const char* op) const {
  fail<Unsupported>("[", op, "] no ", device().str(), " kernel");
}

void Backend::convert(const Image&, const Image&) { unsupported("convert"); }
void Backend::convolution(const ConvGeometry&, const Image&, const float*, const float*,
                          const NeuronDescriptor&, const Image&) {
  unsupported("convolution");
}
void Backend::fully_connected(const Image&, const float*, const float*, const NeuronDescriptor&,
                              const Image&, bool) {
  unsupported("fully_connected");
}
void Backend::pooling(PoolingMode, const PoolGeometry&, const Image&, const Image&) {
  unsupported("pooling");
}
void Backend::neuron(const NeuronDescriptor&, const Image&, const Image&) { unsupported("neuron"); }
void Backend::softmax(bool, const Image&, const Image&) { unsupported("softmax"); }
void Backend::add(const Image&, const Image&, const Image&) { unsupported("addition"); }
void Backend::copy_channels(const Image&, const Image&, int) { unsupported("concatenation"); }
void Backend::slice_channels(const Image&, int, const Image&) { unsupported("concatenation_gradient"); }
void Backend::dropout(float, uint64_t, const uint64_t*, const Image&, const Image&) { unsupported("dropout"); }
std::shared_ptr<void> Backend::capture(const std::function<void()>&) { unsupported("capture"); }
void Backend::replay(const std::shared_ptr<void>&, const std::function<void()>&) { unsupported("capture"); }
void Backend::convolution_gradient(const ConvGeometry&, const Image&, const float*, const Image&, const Image*,
                                   const NeuronDescriptor&, const Image*, float*, float*) {
  unsupported("convolution_gradient");
}
void Backend::fully_connected_gradient(const Image&, const float*, const Image&, const Image*,
                                       const NeuronDescriptor&, const Image*, float*, float*, bool) {
  unsupported("fully_connected_gradient");
}
void Backend::pooling_gradient(PoolingMode, const PoolGeometry&, const Image&, const Image&, const Image&,
                               const NeuronDescriptor&) {
  unsupported("pooling_gradient");
}
void Backend::neuron_gradient(const NeuronDescriptor&, const Image&, const Image&, const Image&) {
  unsupported("neuron_gradient");
}
void Backend::softmax_gradient(bool, const Image&, const Image&, const Image&) { unsupported("softmax_gradient"); }
void Backend::loss(const LossDescriptor&, double, const Image&, const Image&, const Image&, const Image&,
                   const Image&) {
  unsupported("loss");
}
void Backend::optimizer_step(const OptimizerStep&, float*, const float*, const std::vector<float*>&, size_t) {
  unsupported("optimizer");
}
bool Backend::all_finite(const float*, size_t) { unsupported("check_numerics"); }
void Backend::rnn_forward(const RNNLayerGeometry&, const RNNLayerWeights&, const RNNSequence&) { unsupported("rnn"); }
void Backend::rnn_gradient(const RNNLayerGeometry&, const RNNLayerWeights&, const RNNSequence&,
                           const RNNLayerGradients&) {
  unsupported("rnn_gradient");
}
void Backend::copy_rows(float*, int, const float*, int, int, int, bool) { unsupported("copy_rows"); }
void Backend::permute(const float*, float*, const int*, const int*) { unsupported("permute"); }

bool RNNLayerGeometry::cell_has_c() const { return cell == RNNCell::LSTM; }
bool RNNLayerGeometry::has_extra() const { return cell == RNNCell::GRU || cell == RNNCell::MGU; }
size_t RNNLayerGeometry::state_floats() const {
  const size_t step = size_t(batch) * hidden;
  return boundary() * (cell_has_c() ? 2 : 1) + steps * step * gates + (has_extra() ? steps * step : 0);
}

void Backend::optimizer_steps(const OptimizerStep& s, const std::vector<TensorUpdate>& tensors) {
  for (const TensorUpdate& t : tensors) {
    OptimizerStep one = s;
    one.step = t.step;
    std::vector<float*> slots;
    for (float* p : t.slots)
      if (p) slots.push_back(p);
    optimizer_step(one, t.values, t.gradient, slots, t.count);
  }
}

Backend& backend_for(const Device& device) {
  switch (device.type()) {
    case DeviceType::CPU: return cpu_backend();
    case DeviceType::CUDA:
#ifdef NNGRAPH_HAVE_CUDA
      return cuda_backend(device.index());
#else
      fail<Unsupported>("[device] ", device.str(),
                        ": this build of nngraph has no cuda backend (built: cpu)");
#endif
    case DeviceType::MPS:
      fail<Unsupported>("[device] mps: the Apple backend is not part of this build");
  }
  fail<Unsupported>("[device] unknown device");
}

}  // namespace nngraph
