// Recurrent layers on cuda: cuDNN's RNN API for the cells it implements (single gate with
// relu or tanh, LSTM without peepholes, GRU with the reset gate after the product, standard
// neurons, forward direction); the shared sequence algorithm (shaders/cuda/rnn.cu) for the
// rest. Our weights are gathered into cuDNN's weight space on each call (one kernel) and its
// weight gradients scattered back, so data sources keep their own layout.
#include <array>
#include <map>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/rnn_math.h"
#include "kernels.cuh"
#include "nngraph/error.h"
#include "ops/convert.h"
#include "ops/rnn.h"

namespace nngraph {

namespace {

using math::is_plain;

// The cuDNN cell for a layer, or -1 when cuDNN cannot run it.
int cudnn_mode(const RNNLayerGeometry& g) {
  if (g.reverse || g.unit_input || g.peephole) return -1;
  const bool sigmoid = is_plain(g.gate, NeuronType::Sigmoid), tanh = is_plain(g.act, NeuronType::TanH);
  switch (g.cell) {
    case RNNCell::SingleGate:
      return tanh ? CUDNN_RNN_TANH : is_plain(g.act, NeuronType::ReLU) ? CUDNN_RNN_RELU : -1;
    case RNNCell::LSTM:
      return sigmoid && tanh && is_plain(g.out, NeuronType::TanH) ? CUDNN_LSTM : -1;
    case RNNCell::GRU:
      return sigmoid && tanh && g.reset_after ? CUDNN_GRU : -1;
    case RNNCell::MGU:
      return -1;
  }
  return -1;
}

const char* kWhat = "rnn";

// cuDNN descriptors and weight-space buffers for one recurrent layer shape; matrix and bias
// addresses (per cuDNN linear layer: inputs first, then recurrents) lie in `weights` and `gradients`.
struct RNNPlan {
  cuda::RNNDescriptor rnn;
  cuda::RNNDataDescriptor x, y;
  cuda::TensorDescriptor h, m, b;
  size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  std::shared_ptr<Buffer> weights, gradients, lengths;
  std::array<float*, 8> matrix{}, bias{}, d_matrix{}, d_bias{};
};

// cuDNN's reserve space for a training state, kept from the forward pass to the gradient
// pass and freed with the state's buffer; consumed once a gradient pass has used it.
struct RNNReserve {
  std::shared_ptr<Buffer> buffer;
  bool consumed = false;
};

// Per GPU: a plan per layer shape, and the reserve of each training state.
struct RNNState : CudaBackend::OpState {
  std::map<std::vector<int>, std::unique_ptr<RNNPlan>> plans;
  std::map<const void*, RNNReserve> reserves;
  // Reserve spaces kept for training states inside a freed buffer go with it.
  void released(const char* begin, const char* end) override {
    const auto first = reserves.lower_bound(begin), last = reserves.lower_bound(end);
    std::vector<std::shared_ptr<Buffer>> gone;  // freed after the map is settled (their release comes here)
    for (auto i = first; i != last; ++i) gone.push_back(std::move(i->second.buffer));
    reserves.erase(first, last);
  }
};

// cuDNN's plan for a layer shape, or null where cuDNN does not implement the cell.
RNNPlan* rnn_plan(CudaBackend& b, const RNNLayerGeometry& g) {
  const int mode = cudnn_mode(g);
  if (mode < 0) return nullptr;
  const std::vector<int> key{mode, g.input, g.hidden, g.steps, g.batch};
  auto& slot = b.op_state<RNNState>().plans[key];
  if (slot) return slot.get();
  auto p = std::make_unique<RNNPlan>();
  const int T = g.steps, N = g.batch, H = g.hidden;
  cudnn_check(cudnnCreateRNNDescriptor(p->rnn.out()), kWhat);
  const std::vector<int> lengths(N, T);
  cudnn_check(cudnnCreateRNNDataDescriptor(p->x.out()), kWhat);
  cudnn_check(cudnnCreateRNNDataDescriptor(p->y.out()), kWhat);
  cudnn_check(cudnnSetRNNDataDescriptor(p->x, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, T, N, g.input,
                                        lengths.data(), nullptr), kWhat);
  cudnn_check(cudnnSetRNNDataDescriptor(p->y, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, T, N, H,
                                        lengths.data(), nullptr), kWhat);
  const int dims[3] = {1, N, H}, strides[3] = {N * H, H, 1};
  cudnn_check(cudnnCreateTensorDescriptor(p->h.out()), kWhat);
  cudnn_check(cudnnSetTensorNdDescriptor(p->h, CUDNN_DATA_FLOAT, 3, dims, strides), kWhat);
  // Small hidden states run the whole sequence in registers (one kernel per pass); the
  // standard algorithm (a product and an element kernel per step) takes any size.
  cudnnStatus_t status = CUDNN_STATUS_NOT_SUPPORTED;
  for (auto algo : {CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H, CUDNN_RNN_ALGO_STANDARD}) {
    cudnn_check(cudnnSetRNNDescriptor_v8(p->rnn, algo, static_cast<cudnnRNNMode_t>(mode), CUDNN_RNN_DOUBLE_BIAS,
                                         CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT,
                                         CUDNN_FMA_MATH, g.input, H, H, 1, nullptr, CUDNN_RNN_PADDED_IO_DISABLED),
                kWhat);
    status = cudnnGetRNNTempSpaceSizes(b.cudnn(), p->rnn, CUDNN_FWD_MODE_TRAINING, p->x, &p->work_bytes,
                                       &p->reserve_bytes);
    if (status == CUDNN_STATUS_SUCCESS) break;
  }
  cudnn_check(status, kWhat);
  cudnn_check(cudnnGetRNNWeightSpaceSize(b.cudnn(), p->rnn, &p->weight_bytes), kWhat);
  p->weights = b.allocate(p->weight_bytes);
  p->gradients = b.allocate(p->weight_bytes);
  p->lengths = b.allocate(N * sizeof(int));
  b.copy_from_host(p->lengths->data(), lengths.data(), N * sizeof(int));
  cudnn_check(cudnnCreateTensorDescriptor(p->m.out()), kWhat);
  cudnn_check(cudnnCreateTensorDescriptor(p->b.out()), kWhat);
  for (int id = 0; id < 2 * g.gates; ++id)
    for (int grad = 0; grad < 2; ++grad) {
      void *m = nullptr, *bias = nullptr;
      auto& space = grad ? p->gradients : p->weights;
      cudnn_check(cudnnGetRNNWeightParams(b.cudnn(), p->rnn, 0, p->weight_bytes, space->data(), id, p->m, &m, p->b,
                                          &bias),
                  kWhat);
      (grad ? p->d_matrix : p->matrix)[id] = static_cast<float*>(m);
      (grad ? p->d_bias : p->bias)[id] = static_cast<float*>(bias);
    }
  slot = std::move(p);
  return slot.get();
}

// Our per-gate tensors ↔ cuDNN's weight space: one block per matrix and bias (absent
// biases read as zeros; gradients nobody wants are skipped).
template <class W>
std::vector<cuda::Block> weight_blocks(const RNNLayerGeometry& g, const RNNLayerTensors<W>& t,
                                              const std::array<float*, 8>& matrix, const std::array<float*, 8>& bias,
                                              bool to_space) {
  std::vector<cuda::Block> blocks;
  const int G = g.gates, H = g.hidden;
  auto add = [&](W* ours, int ld, float* space, int rows, int cols) {
    if (to_space)
      blocks.push_back({ours, ld, space, cols, rows, cols});
    else if (ours)
      blocks.push_back({space, cols, const_cast<float*>(ours), ld, rows, cols});
  };
  for (int q = 0; q < G; ++q) {
    add(t.input[q], t.input_ld, matrix[q], H, g.input);
    add(t.recurrent[q], t.recurrent_ld, matrix[G + q], H, H);
    add(t.input_bias[q], H, bias[q], 1, H);
    add(t.recurrent_bias[q], H, bias[G + q], 1, H);
  }
  return blocks;
}

RNNReserve& rnn_reserve(CudaBackend& b, const RNNPlan& p, const float* state, bool create) {
  auto& reserves = b.op_state<RNNState>().reserves;
  auto it = reserves.find(state);
  if (create && (it == reserves.end() || it->second.buffer->bytes() != p.reserve_bytes))
    it = reserves.insert_or_assign(state, RNNReserve{b.allocate(p.reserve_bytes)}).first;
  if (it == reserves.end())
    fail<InvalidInput>("[", kWhat, "] this training state has not been through a forward pass on ",
                       b.device().str());
  return it->second;
}

void cudnn_rnn_forward(CudaBackend& b, const RNNLayerGeometry& g, const RNNPlan& p, const float* x, float* state,
                       float* reserve) {
  // Without a reserve space nothing is kept for a gradient pass: inference mode.
  const size_t NH = size_t(g.batch) * g.hidden;
  const bool lstm = g.cell == RNNCell::LSTM;
  const auto work = b.workspace(p.work_bytes);
  const auto mode = reserve ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE;
  cudnn_check(cudnnRNNForward(b.cudnn(), p.rnn, mode, static_cast<int*>(p.lengths->data()), p.x, x, p.y,
                              g.h(state) + NH, p.h, g.h(state), nullptr, p.h, lstm ? g.c(state) : nullptr,
                              lstm ? g.c(state) + g.steps * NH : nullptr, p.weight_bytes, p.weights->data(),
                              p.work_bytes, work->data(), reserve ? p.reserve_bytes : 0, reserve),
              kWhat);
}

// The shared sequence algorithm (rnn_sequence.h) with products and scratch from the backend.
cuda::RNNDevice rnn_device(CudaBackend& b, std::vector<std::shared_ptr<Buffer>>& scratch) {
  return {b.stream(),
          [&b](bool ta, bool tb, int m, int n, int k, float alpha, const float* x, int lda, const float* y, int ldb,
               float beta, float* c, int ldc) { b.gemm(ta, tb, m, n, k, x, lda, y, ldb, c, ldc, false, alpha, beta); },
          [&b, &scratch](size_t floats) {
            return static_cast<float*>(scratch.emplace_back(b.allocate(floats * sizeof(float)))->data());
          }};
}

// What both passes start with: the GPU entered, float32 checked, and cuDNN's plan where the
// input rows are packed (null: the shared sequence algorithm runs, on device()).
struct RNNCall {
  CudaBackend& b;
  std::unique_lock<std::recursive_mutex> lock;
  RNNPlan* plan = nullptr;
  std::vector<std::shared_ptr<Buffer>> scratch;  // the shared algorithm's, freed after the call
  RNNCall(Backend& backend, const RNNLayerGeometry& g, const RNNSequence& s) : b(cuda_of(backend)), lock(b.enter()) {
    g.require_float32();
    if (s.x_ld == g.input) plan = rnn_plan(b, g);
  }
  cuda::RNNDevice device() { return rnn_device(b, scratch); }
};

void rnn_forward(Backend& backend, const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s) {
  RNNCall call(backend, g, s);
  if (!call.plan) return cuda::rnn_forward(call.device(), g, w, s);
  CudaBackend& b = call.b;
  RNNPlan* p = call.plan;
  const size_t NH = size_t(g.batch) * g.hidden, bytes = NH * sizeof(float);
  float* state = s.state;
  // h₀ (and c₀) at the first boundary, as the gradient pass reads them; outputs after it.
  if (s.h0) b.copy(g.h(state), s.h0, bytes); else cuda_check(cudaMemsetAsync(g.h(state), 0, bytes, b.stream()), kWhat);
  const bool lstm = g.cell == RNNCell::LSTM;
  if (lstm) {
    if (s.c0) b.copy(g.c(state), s.c0, bytes); else cuda_check(cudaMemsetAsync(g.c(state), 0, bytes, b.stream()), kWhat);
  }
  cuda::copy_blocks(b.stream(), weight_blocks(g, w, p->matrix, p->bias, true));
  float* reserve = nullptr;
  if (s.for_gradient) {
    RNNReserve& r = rnn_reserve(b, *p, state, true);
    r.consumed = false;
    reserve = static_cast<float*>(r.buffer->data());
  } else if (auto it = b.op_state<RNNState>().reserves.find(state); it != b.op_state<RNNState>().reserves.end()) {
    // A gradient pass over this state must find no reserve rather than a stale one.
    const auto gone = std::move(it->second.buffer);  // freed once the map is settled
    b.op_state<RNNState>().reserves.erase(it);
  }
  cudnn_rnn_forward(b, g, *p, s.x, state, reserve);
}

void rnn_gradient(Backend& backend, const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s,
                  const RNNLayerGradients& dw) {
  RNNCall call(backend, g, s);
  if (!call.plan) return cuda::rnn_gradient(call.device(), g, w, s, dw);
  CudaBackend& b = call.b;
  RNNPlan* p = call.plan;
  const int T = g.steps, N = g.batch, H = g.hidden;
  const size_t NH = size_t(N) * H;
  float* state = s.state;
  const bool lstm = g.cell == RNNCell::LSTM;
  std::vector<std::shared_ptr<Buffer>> scratch;
  auto temp = [&](size_t floats) {
    return static_cast<float*>(scratch.emplace_back(b.allocate(floats * sizeof(float)))->data());
  };
  // cuDNN reads dy packed and always writes dx (never adds to it).
  const float* dy = s.dy;
  if (!dy || s.dy_ld != H) {
    float* packed = temp(size_t(T) * NH);
    if (dy)
      copy_float_rows(b, packed, H, dy, s.dy_ld, T * N, H, false);
    else
      cuda_check(cudaMemsetAsync(packed, 0, size_t(T) * NH * sizeof(float), b.stream()), kWhat);
    dy = packed;
  }
  float* dx = s.dx && !s.accumulate_dx ? s.dx : temp(size_t(T) * N * g.input);
  // Again: layers of one shape share a plan, so another layer's weights may be there now.
  cuda::copy_blocks(b.stream(), weight_blocks(g, w, p->matrix, p->bias, true));
  // The backward pass overwrites part of the reserve space: a second gradient pass over the
  // same forward pass first runs it again (same outputs, fresh reserve).
  RNNReserve& r = rnn_reserve(b, *p, state, false);
  float* reserve = static_cast<float*>(r.buffer->data());
  if (r.consumed) cudnn_rnn_forward(b, g, *p, s.x, state, reserve);
  r.consumed = true;
  const auto work = b.workspace(p->work_bytes);
  const float* y = g.h(state) + NH;
  cudnn_check(cudnnRNNBackwardData_v8(b.cudnn(), p->rnn, static_cast<int*>(p->lengths->data()), p->y, y, dy, p->x, dx,
                                      p->h, g.h(state), s.dh_final, s.dh0, p->h, lstm ? g.c(state) : nullptr,
                                      lstm ? s.dc_final : nullptr, lstm ? s.dc0 : nullptr, p->weight_bytes,
                                      p->weights->data(), p->work_bytes, work->data(), p->reserve_bytes, reserve),
              kWhat);
  if (s.dx && s.accumulate_dx) copy_float_rows(b, s.dx, g.input, dx, g.input, T * N, g.input, true);
  cuda_check(cudaMemsetAsync(p->gradients->data(), 0, p->weight_bytes, b.stream()), kWhat);
  cudnn_check(cudnnRNNBackwardWeights_v8(b.cudnn(), p->rnn, CUDNN_WGRAD_MODE_ADD, static_cast<int*>(p->lengths->data()),
                                         p->x, s.x, p->h, g.h(state), p->y, y, p->weight_bytes, p->gradients->data(),
                                         p->work_bytes, work->data(), p->reserve_bytes, reserve),
              kWhat);
  cuda::copy_blocks(b.stream(), weight_blocks(g, dw, p->d_matrix, p->d_bias, false));
}

NNGRAPH_KERNEL(RNNForwardKernel, CUDA, rnn_forward);
NNGRAPH_KERNEL(RNNGradientKernel, CUDA, rnn_gradient);

}  // namespace
}  // namespace nngraph
