#include "backends/backend.h"

#include "backends/cpu/cpu_backend.h"
#include "nngraph/error.h"
#include "nngraph/nodes.h"

namespace nngraph {

void Backend::unsupported(const char* op) const {
  fail<Unsupported>("[", op, "] no ", device().str(), " kernel");
}

void Backend::convert(const Image&, const Image&) { unsupported("convert"); }
void Backend::convolution(const ConvGeometry&, const Image&, const float*, const float*,
                          const NeuronDescriptor&, const Image&) {
  unsupported("convolution");
}
void Backend::fully_connected(const Image&, const float*, const float*, const NeuronDescriptor&,
                              const Image&) {
  unsupported("fully_connected");
}
void Backend::pooling(PoolingMode, const PoolGeometry&, const Image&, const Image&) {
  unsupported("pooling");
}
void Backend::neuron(const NeuronDescriptor&, const Image&, const Image&) { unsupported("neuron"); }
void Backend::softmax(bool, const Image&, const Image&) { unsupported("softmax"); }
void Backend::add(const Image&, const Image&, const Image&) { unsupported("addition"); }
void Backend::copy_channels(const Image&, const Image&, int) { unsupported("concatenation"); }

Backend& backend_for(const Device& device) {
  switch (device.type()) {
    case DeviceType::CPU: return cpu_backend();
    case DeviceType::CUDA:
      fail<Unsupported>("[device] ", device.str(),
                        ": this build of nngraph has no cuda backend (built: cpu)");
    case DeviceType::MPS:
      fail<Unsupported>("[device] mps: the Apple backend is not part of this build");
  }
  fail<Unsupported>("[device] unknown device");
}

}  // namespace nngraph
