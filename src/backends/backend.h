#pragma once
// The kernel interface every backend implements; ops in src/ops call it. A kernel a backend
// lacks raises Unsupported("[op] no <device> kernel"), never a wrong answer.
#include <memory>
#include <string>

#include "nngraph/descriptors.h"
#include "nngraph/image.h"

namespace nngraph {

struct ConvGeometry {
  int kh, kw, sy, sx, dy, dx, groups, pad_top, pad_left;
};
struct PoolGeometry {
  int kh, kw, sy, sx, pad_top, pad_left;
  bool count_include_pad;
};
enum class PoolingMode;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::shared_ptr<Buffer> allocate(size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;

  // out = in in another dtype (same shape).
  virtual void convert(const Image& in, const Image& out);
  // NCHW convolution, OIHW weights; bias (may be null) then neuron.
  virtual void convolution(const ConvGeometry& g, const Image& in, const float* weights,
                           const float* bias, const NeuronDescriptor& neuron, const Image& out);
  // out[n, o] = Σ_k in[n, k]·W[o, k] + b[o], then neuron; k runs over C·H·W of the source.
  virtual void fully_connected(const Image& in, const float* weights, const float* bias,
                               const NeuronDescriptor& neuron, const Image& out);
  virtual void pooling(PoolingMode mode, const PoolGeometry& g, const Image& in, const Image& out);
  virtual void neuron(const NeuronDescriptor& neuron, const Image& in, const Image& out);
  // Across feature channels at each pixel.
  virtual void softmax(bool log, const Image& in, const Image& out);
  virtual void add(const Image& a, const Image& b, const Image& out);
  // Writes `in` into channels [offset, offset + C_in) of `out`.
  virtual void copy_channels(const Image& in, const Image& out, int channel_offset);

 protected:
  [[noreturn]] void unsupported(const char* op) const;
};

// The backend serving a device; raises Unsupported when it is not built or present.
Backend& backend_for(const Device& device);

}  // namespace nngraph
