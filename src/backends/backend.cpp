#include "backends/backend.h"

#include "backends/cpu/cpu_backend.h"
#ifdef NNGRAPH_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif
#include "backends/kernel.h"
#include "nngraph/error.h"

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

std::shared_ptr<void> Backend::capture(const std::function<void()>&) {
  fail<Unsupported>("[capture] ", device().str(), " cannot capture");
}
void Backend::replay(const std::shared_ptr<void>&, const std::function<void()>&) {
  fail<Unsupported>("[capture] ", device().str(), " cannot capture");
}

std::vector<std::pair<std::string, DeviceType>>& registered_kernels() {
  static std::vector<std::pair<std::string, DeviceType>> all;
  return all;
}

void no_kernel(const char* kernel, const Device& device) {
  fail<Unsupported>("[", kernel, "] no ", device_type_name(device.type()), " kernel");
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
