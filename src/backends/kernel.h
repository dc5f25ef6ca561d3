#pragma once
// Kernels are registered per (op, device type): an op's file declares each of its kernels
// once, each backend's same-named file defines and registers its own, and the op runs the
// one registered for its backend's device. Where there is none, Unsupported names both.
//
//   struct PoolingKernel : KernelOf<void(Backend&, PoolingMode, const Tensor&, const Tensor&)> {
//     static constexpr const char* name = "pooling";
//   };
//   NNGRAPH_KERNEL(PoolingKernel, CPU, pooling);   // in src/backends/cpu/pool.cpp
//   dispatch<PoolingKernel>(backend, mode, x, y);  // in src/ops/pool.cpp
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/tensor.h"
#include "nngraph/error.h"

namespace nngraph {

template <class Signature>
struct KernelOf;
template <class R, class... A>
struct KernelOf<R(Backend&, A...)> {
  using Fn = R (*)(Backend&, A...);
};

template <class K>
typename K::Fn& kernel_slot(DeviceType device) {
  static std::array<typename K::Fn, kDeviceTypes> table{};
  return table[static_cast<size_t>(device)];
}

// Every registration, for listing: (kernel name, device type).
std::vector<std::pair<std::string, DeviceType>>& registered_kernels();
[[noreturn]] void no_kernel(const char* kernel, const Device& device);

template <class K>
bool has_kernel(DeviceType device) {
  return kernel_slot<K>(device) != nullptr;
}

template <class K, class... A>
decltype(auto) dispatch(Backend& backend, A&&... args) {
  const auto fn = kernel_slot<K>(backend.device().type());
  if (!fn) no_kernel(K::name, backend.device());
  return fn(backend, std::forward<A>(args)...);
}

template <class K>
struct KernelRegistration {
  KernelRegistration(DeviceType device, typename K::Fn fn) {
    kernel_slot<K>(device) = fn;
    registered_kernels().emplace_back(K::name, device);
  }
};

// Kernels a backend also runs on channels-last images (Tensor::dense_as), declared beside
// their registration; nodes ask before a channels-last graph hands them NHWC images.
template <class K>
bool& channels_last_slot(DeviceType device) {
  static std::array<bool, kDeviceTypes> table{};
  return table[static_cast<size_t>(device)];
}

template <class K>
bool reads_channels_last(DeviceType device) {
  return channels_last_slot<K>(device);
}

template <class K>
struct ChannelsLastRegistration {
  explicit ChannelsLastRegistration(DeviceType device) { channels_last_slot<K>(device) = true; }
};

#define NNGRAPH_CHANNELS_LAST(Kernel, device) \
  static const ::nngraph::ChannelsLastRegistration<Kernel> nngraph_last_##Kernel##_##device##_{::nngraph::DeviceType::device}

#define NNGRAPH_KERNEL(Kernel, device, fn)                                                          \
  static const ::nngraph::KernelRegistration<Kernel> nngraph_kernel_##Kernel##_##device##_{ \
      ::nngraph::DeviceType::device, fn}

}  // namespace nngraph
