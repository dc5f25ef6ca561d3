#include "nngraph/device.h"

#include "nngraph/error.h"
#ifdef NNGRAPH_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

namespace nngraph {

const char* device_type_name(DeviceType type) {
  constexpr const char* kNames[kDeviceTypes] = {"cpu", "cuda", "mps"};
  return kNames[static_cast<size_t>(type)];
}

Device::Device(DeviceType type, int index) : type_(type), index_(index) {
  if (index < 0) fail("[device] index must be >= 0, got ", index);
  if (type == DeviceType::CPU && index != 0) fail("[device] cpu has no index, got cpu:", index);
}

Device Device::parse(const std::string& spec) {
  const auto colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  int index = 0;
  if (colon != std::string::npos) {
    const std::string num = spec.substr(colon + 1);
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos)
      fail("[device] bad device index in '", spec, "'");
    index = std::stoi(num);
  }
  for (size_t t = 0; t < kDeviceTypes; ++t)
    if (name == device_type_name(static_cast<DeviceType>(t))) return Device(static_cast<DeviceType>(t), index);
  fail("[device] unknown device '", spec, "' (expected cpu, cuda, cuda:N or mps)");
}

std::string Device::str() const {
  const std::string name = device_type_name(type_);
  return type_ == DeviceType::CUDA ? name + ":" + std::to_string(index_) : name;
}

int device_count(DeviceType type) {
  switch (type) {
    case DeviceType::CPU: return 1;
    case DeviceType::CUDA:
#ifdef NNGRAPH_HAVE_CUDA
      return cuda_device_count();
#else
      return 0;
#endif
    case DeviceType::MPS: return 0;
  }
  return 0;
}

std::vector<std::string> built_backends() {
  std::vector<std::string> out{"cpu"};
#ifdef NNGRAPH_HAVE_CUDA
  out.push_back("cuda");
#endif
  return out;
}

}  // namespace nngraph
