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

// A point in a device's queued work (asynchronous backends).
struct Fence {
  virtual ~Fence() = default;
  // Whether the work before it has finished; DeviceError if it failed.
  virtual bool reached() = 0;
  // Sleeps until reached; DeviceError if the work failed.
  virtual void wait() = 0;
};

struct ConvGeometry {
  int kh, kw, sy, sx, dy, dx, groups, pad_top, pad_left;
  bool tf32 = false;  // cuda: tensor cores may round float32 inputs to tf32
  // 1×k windows that tile each row without overlap (stride k, no padding): a product over
  // the windows reads the input in place, with no im2col.
  bool tiles_rows(const ImageShape& in, const ImageShape& out) const {
    return kh == 1 && sy == 1 && kw == sx && dx == 1 && pad_top == 0 && pad_left == 0 && out.h == in.h &&
           out.w * kw <= in.w;
  }
};
struct PoolGeometry {
  int kh, kw, sy, sx, pad_top, pad_left;
  bool count_include_pad;
};
enum class PoolingMode;
enum class RNNCell;

// One recurrent layer running in one direction over `steps` steps of `batch` rows.
struct RNNLayerGeometry {
  RNNCell cell;
  int gates, input, hidden, steps, batch;
  bool reverse, unit_input, peephole, reset_after;
  NeuronDescriptor gate, act, out;  // gate neuron, cell (candidate) neuron, cell-to-output neuron
  // The training state one run leaves, in floats: states h (and c) at steps+1 boundaries,
  // activated gates per step, and per step the GRU's Uₙh₋+b_hn or the r⊙h₋ / f⊙h₋ product.
  size_t state_floats() const;
  float* h(float* state) const { return state; }
  float* c(float* state) const { return state + boundary(); }
  float* gate_values(float* state) const { return c(state) + (cell_has_c() ? boundary() : 0); }
  float* extra(float* state) const { return gate_values(state) + size_t(steps) * batch * gates * hidden; }
  // Where the outputs of steps 0..T-1 lie in h (contiguous) and the final state.
  float* outputs(float* states) const { return states + (reverse ? 0 : size_t(batch) * hidden); }
  float* final_state(float* states) const { return states + (reverse ? 0 : size_t(steps) * batch * hidden); }
  bool cell_has_c() const;
  bool has_extra() const;
  size_t boundary() const { return size_t(steps + 1) * batch * hidden; }
};

// A layer's tensors per gate: matrices with a row stride (from one layer source or one
// source per gate); null where absent. memory: LSTM peepholes, one value per channel every
// memory_stride floats (the g entry is unused; its gradient is written as zero).
template <class T>
struct RNNLayerTensors {
  T* input[4] = {};
  T* recurrent[4] = {};
  T* input_bias[4] = {};
  T* recurrent_bias[4] = {};
  T* memory[4] = {};
  int input_ld = 0, recurrent_ld = 0, memory_stride = 1;
};
using RNNLayerWeights = RNNLayerTensors<const float>;
using RNNLayerGradients = RNNLayerTensors<float>;

// Sequences are time-major rows: row t·batch + n. Null pointers: zeros / not wanted.
struct RNNSequence {
  const float* x = nullptr;
  int x_ld = 0;
  const float* h0 = nullptr;
  const float* c0 = nullptr;
  float* state = nullptr;  // RNNLayerGeometry::state_floats()
  bool for_gradient = true;  // forward: a gradient pass will follow (backends may keep more)
  // Gradient pass:
  const float* dy = nullptr;
  int dy_ld = 0;
  const float* dh_final = nullptr;
  const float* dc_final = nullptr;
  float* dx = nullptr;  // batch rows of `input`, contiguous
  bool accumulate_dx = false;
  float* dh0 = nullptr;
  float* dc0 = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::shared_ptr<Buffer> allocate(size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  // copy_from_host of what `fill` writes into `bytes` of host memory: the backend's own
  // staging memory where it has some, so the data is written once on the host.
  virtual void fill_from_host(void* dst, size_t bytes, const std::function<void(void*)>& fill);
  // A new buffer holding what `fill` writes into `bytes` of host memory.
  virtual std::shared_ptr<Buffer> upload(size_t bytes, const std::function<void(void*)>& fill);
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // Every copy, in one pass where the backend can (a replayed step's inputs and outputs).
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  virtual void copy_all(const std::vector<Copy>& copies) {
    for (const Copy& c : copies) copy(c.dst, c.src, c.bytes);
  }
  // Waits for the work queued so far (asynchronous backends).
  virtual void synchronize() {}
  // Whether work is only queued by the calls that encode it (it runs on a device later).
  virtual bool asynchronous() const { return false; }
  // The point the work queued so far will reach; null where that work is done already.
  virtual std::shared_ptr<Fence> fence() { return nullptr; }
  // Bytes the engine holds on this device now, and the most since the last reset.
  struct MemoryStats {
    size_t current = 0, peak = 0;
  };
  virtual MemoryStats memory_stats() = 0;
  virtual void reset_peak_memory() = 0;

  // Whole-step capture (cuda graphs): capture() records what `work` enqueues without running
  // it; replay() runs the record. Backends that cannot capture run work eagerly instead.
  // store, copy_all and optimizer_steps are a step's varying launches: their arguments change
  // from step to step. replay() first runs `varying` (when given), which makes the same such
  // calls in the same order as the captured work did; they set the record's arguments instead
  // of launching.
  virtual bool can_capture() const { return false; }
  virtual std::shared_ptr<void> capture(const std::function<void()>& work);
  virtual void replay(const std::shared_ptr<void>& captured, const std::function<void()>& varying);
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
  // Then dx ⊙ neuron'(x) when `neuron` is set: x is that neuron's output (a folded neuron gradient).
  virtual void pooling_gradient(PoolingMode mode, const PoolGeometry& g, const Image& x,
                                const Image& dy, const Image& dx, const NeuronDescriptor& neuron);
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

  // One recurrent layer over a sequence: fills the state (outputs, final states, what the
  // gradient reads). The gradient pass reads that state and overwrites every gradient given.
  virtual void rnn_forward(const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s);
  virtual void rnn_gradient(const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s,
                            const RNNLayerGradients& dw);
  // dst[r·dst_ld + c] = src[r·src_ld + c] for rows × columns floats; add: += instead.
  virtual void copy_rows(float* dst, int dst_ld, const float* src, int src_ld, int rows, int columns, bool add);
  // out = in with its three axes (d0, d1, d2) reordered: out axis k is in axis perm[k].
  virtual void permute(const float* in, float* out, const int dims[3], const int perm[3]);

 protected:
  [[noreturn]] void unsupported(const char* op) const;
};

// The backend serving a device; raises Unsupported when it is not built or present.
Backend& backend_for(const Device& device);

}  // namespace nngraph
