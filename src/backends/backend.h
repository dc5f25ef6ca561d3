#pragma once
#include <cstddef>
#include <cstdint>
// The kernel interface every backend implements; ops in src/ops call it. A kernel a backend
// lacks raises Unsupported("[op] no <device> kernel"), never a wrong answer.
#include <functional>
#include <memory>
#include <string>

#include "nngraph/descriptors.h"
#include "nngraph/image.h"
#include "nngraph/optimizer.h"

namespace nngraph {

struct ConvGeometry {
  int kh, kw, sy, sx, dy, dx, groups, pad_top, pad_left;
  bool tf32 = false;  // cuda: tensor cores may round float32 inputs to tf32
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
  // Waits for the work queued so far (asynchronous backends).
  virtual void synchronize() {}
  // Bytes the engine holds on this device now, and the most since the last reset.
  struct MemoryStats {
    size_t current = 0, peak = 0;
  };
  virtual MemoryStats memory_stats() = 0;
  virtual void reset_peak_memory() = 0;

  // Whole-step capture (cuda graphs): capture() records what `work` enqueues without running
  // it; replay() runs the record. Backends that cannot capture run work eagerly instead.
  virtual bool can_capture() const { return false; }
  virtual std::shared_ptr<void> capture(const std::function<void()>& work);
  virtual void replay(const std::shared_ptr<void>& captured);
  // *counter = value in the order of queued work (counter in this backend's memory).
  virtual void store(uint64_t* counter, uint64_t value) { *counter = value; }

  // out = in in another dtype (same shape).
  virtual void convert(const Image& in, const Image& out);
  // NCHW convolution, OIHW weights; bias (may be null) then neuron.
  virtual void convolution(const ConvGeometry& g, const Image& in, const float* weights,
                           const float* bias, const NeuronDescriptor& neuron, const Image& out);
  // out[n, o] = Σ_k in[n, k]·W[o, k] + b[o], then neuron; k runs over C·H·W of the source.
  virtual void fully_connected(const Image& in, const float* weights, const float* bias,
                               const NeuronDescriptor& neuron, const Image& out, bool tf32);
  virtual void pooling(PoolingMode mode, const PoolGeometry& g, const Image& in, const Image& out);
  virtual void neuron(const NeuronDescriptor& neuron, const Image& in, const Image& out);
  // Across feature channels at each pixel.
  virtual void softmax(bool log, const Image& in, const Image& out);
  virtual void add(const Image& a, const Image& b, const Image& out);
  // Writes `in` into channels [offset, offset + C_in) of `out`.
  virtual void copy_channels(const Image& in, const Image& out, int channel_offset);
  // out = channels [offset, offset + C_out) of `in`.
  virtual void slice_channels(const Image& in, int channel_offset, const Image& out);
  // out = in · mask / keep, mask drawn from (seed, *step, element index): the same call with
  // the same seed and step reproduces the mask, so the gradient pass needs no stored state.
  // `step` lives in this backend's memory, so a captured step reads each encode's value.
  virtual void dropout(float keep, uint64_t seed, const uint64_t* step, const Image& in, const Image& out);

  // Gradients. dz = dy ⊙ neuron'(y) first when `neuron` is set (y given); dx may be null
  // (not needed); dw and db (null: no bias) are overwritten.
  virtual void convolution_gradient(const ConvGeometry& g, const Image& x, const float* weights,
                                    const Image& dy, const Image* y, const NeuronDescriptor& neuron,
                                    const Image* dx, float* dw, float* db);
  virtual void fully_connected_gradient(const Image& x, const float* weights, const Image& dy,
                                        const Image* y, const NeuronDescriptor& neuron,
                                        const Image* dx, float* dw, float* db, bool tf32);
  // Max routes each dy to the first maximum of its window in x; average spreads it evenly.
  virtual void pooling_gradient(PoolingMode mode, const PoolGeometry& g, const Image& x,
                                const Image& dy, const Image& dx);
  // dx = dy ⊙ neuron.derivative(v), v the forward output (or input for absolute).
  virtual void neuron_gradient(const NeuronDescriptor& neuron, const Image& v, const Image& dy,
                               const Image& dx);
  virtual void softmax_gradient(bool log, const Image& y, const Image& dy, const Image& dx);
  // Per-image losses (summed over the image, times its weight and the descriptor's) and
  // d(loss)/d(x) scaled by `scale` (the reduction's 1/divisor).
  virtual void loss(const LossDescriptor& d, double scale, const Image& x, const Image& labels,
                    const Image& weights, const Image& gradient, const Image& losses);
  virtual void optimizer_step(const OptimizerStep& s, float* values, const float* gradient,
                              const std::vector<float*>& slots, size_t count);
  // The same rule over several tensors, each with its own step count.
  virtual void optimizer_steps(const OptimizerStep& s, const std::vector<TensorUpdate>& tensors);
  virtual bool all_finite(const float* data, size_t count);

 protected:
  [[noreturn]] void unsupported(const char* op) const;
};

// The backend serving a device; raises Unsupported when it is not built or present.
Backend& backend_for(const Device& device);

}  // namespace nngraph
