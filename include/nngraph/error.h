#pragma once
// One exception hierarchy; Python maps each class to an nngraph.Error subclass.
#include <sstream>
#include <stdexcept>
#include <string>

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

template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream s;
  (s << ... << args);
  return s.str();
}

template <class E = InvalidInput, class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw E(cat(args...));
}

}  // namespace nngraph
