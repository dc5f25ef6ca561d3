#pragma once
// One exception hierarchy; Python maps each class to an nngraph.Error subclass.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace nngraph {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Bad arguments, shapes, dtypes, labels (Python: also ValueError).
class InvalidInput : public Error {
 public:
  using Error::Error;
};
// Execution or device failure (Python: also RuntimeError).
class DeviceError : public Error {
 public:
  using Error::Error;
};
// Device memory exhausted; whatever raised it stays usable (Python: also MemoryError).
class OutOfMemory : public DeviceError {
 public:
  using DeviceError::DeviceError;
};
// A feature or kernel this build or backend lacks (Python: also NotImplementedError).
class Unsupported : public Error {
 public:
  using Error::Error;
};

// Message building without iostreams: their inlined locale code has crashed where the
// compiler's headers and the loaded libstdc++ differ.
inline void append(std::string& s, const std::string& v) { s += v; }
inline void append(std::string& s, const char* v) { s += v; }
inline void append(std::string& s, char v) { s += v; }
template <class T>
std::enable_if_t<std::is_arithmetic_v<T>> append(std::string& s, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
    s += buf;
  } else {
    s += std::to_string(v);
  }
}

template <class... Args>
std::string cat(const Args&... args) {
  std::string s;
  (append(s, args), ...);
  return s;
}

template <class E = InvalidInput, class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw E(cat(args...));
}

}  // namespace nngraph
