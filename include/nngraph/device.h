#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nngraph {

enum class DeviceType : uint8_t { CPU, CUDA, MPS };
constexpr size_t kDeviceTypes = 3;
// "cpu", "cuda" or "mps".
const char* device_type_name(DeviceType type);

// Where a graph runs and its memory lives: "cpu", "cuda", "cuda:1" ("mps" is reserved).
class Device {
 public:
  Device() = default;
  explicit Device(DeviceType type, int index = 0);
  static Device parse(const std::string& spec);

  DeviceType type() const { return type_; }
  int index() const { return index_; }
  std::string str() const;
  bool operator==(const Device& o) const { return type_ == o.type_ && index_ == o.index_; }
  bool operator!=(const Device& o) const { return !(*this == o); }

 private:
  DeviceType type_ = DeviceType::CPU;
  int index_ = 0;
};

// Backends compiled into this build ("cpu" always).
std::vector<std::string> built_backends();
// Devices of a type this build can use now (cpu: 1; cuda: GPUs present, 0 if not built).
int device_count(DeviceType type);

}  // namespace nngraph
