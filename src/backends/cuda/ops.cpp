// The cuda backend's calls into our own kernels (shaders/cuda).
#include "backends/cuda/cuda_backend.h"
#include "backends/math.h"
#include "kernels.cuh"
#include "nngraph/nodes.h"

namespace nngraph {

void CudaBackend::pooling(PoolingMode mode, const PoolGeometry& g, const Image& in, const Image& out) {
  auto lock = enter();
  const auto& is = in.shape();
  cuda::pooling(stream_, mode, g, in.data_as<float>(), out.data_as<float>(), in.batch() * is.c, is.h, is.w,
                out.shape().h, out.shape().w);
}

void CudaBackend::pooling_gradient(PoolingMode mode, const PoolGeometry& g, const Image& x, const Image& dy,
                                   const Image& dx, const NeuronDescriptor& neuron) {
  auto lock = enter();
  const auto& is = x.shape();
  cuda::pooling_gradient(stream_, mode, g, x.data_as<float>(), dy.data_as<float>(), dx.data_as<float>(),
                         x.batch() * is.c, is.h, is.w, dy.shape().h, dy.shape().w, neuron);
}

void CudaBackend::neuron(const NeuronDescriptor& nd, const Image& in, const Image& out) {
  auto lock = enter();
  cuda::neuron(stream_, in.data_as<float>(), out.data_as<float>(), in.descriptor().count(), nd);
}

void CudaBackend::neuron_gradient(const NeuronDescriptor& nd, const Image& v, const Image& dy, const Image& dx) {
  auto lock = enter();
  cuda::neuron_gradient(stream_, v.data_as<float>(), dy.data_as<float>(), dx.data_as<float>(),
                        dy.descriptor().count(), nd);
}

void CudaBackend::softmax(bool log, const Image& in, const Image& out) {
  auto lock = enter();
  const auto& s = in.shape();
  cuda::softmax(stream_, log, in.data_as<float>(), out.data_as<float>(), in.batch(), s.c, s.h * s.w);
}

void CudaBackend::softmax_gradient(bool log, const Image& y, const Image& dy, const Image& dx) {
  auto lock = enter();
  const auto& s = y.shape();
  cuda::softmax_gradient(stream_, log, y.data_as<float>(), dy.data_as<float>(), dx.data_as<float>(), y.batch(), s.c,
                         s.h * s.w);
}

void CudaBackend::add(const Image& a, const Image& b, const Image& out) {
  auto lock = enter();
  cuda::add(stream_, a.data_as<float>(), b.data_as<float>(), out.data_as<float>(), out.descriptor().count());
}

// Per image, a block of C_in·H·W floats moves to/from a channel offset: one 2-D copy.
void CudaBackend::copy_channels(const Image& in, const Image& out, int channel_offset) {
  auto lock = enter();
  const size_t block = in.shape().count() * sizeof(float), stride = out.shape().count() * sizeof(float);
  const size_t skip = static_cast<size_t>(channel_offset) * out.shape().h * out.shape().w;
  cuda_check(cudaMemcpy2DAsync(out.data_as<float>() + skip, stride, in.data(), block, block, in.batch(),
                               cudaMemcpyDeviceToDevice, stream_), "concatenation");
}

void CudaBackend::slice_channels(const Image& in, int channel_offset, const Image& out) {
  auto lock = enter();
  const size_t block = out.shape().count() * sizeof(float), stride = in.shape().count() * sizeof(float);
  const size_t skip = static_cast<size_t>(channel_offset) * in.shape().h * in.shape().w;
  cuda_check(cudaMemcpy2DAsync(out.data(), block, in.data_as<float>() + skip, stride, block, in.batch(),
                               cudaMemcpyDeviceToDevice, stream_), "concatenation_gradient");
}

void CudaBackend::dropout(float keep, uint64_t seed, const uint64_t* step, const Image& in, const Image& out) {
  auto lock = enter();
  cuda::dropout(stream_, in.data_as<float>(), out.data_as<float>(), in.descriptor().count(), keep, seed, step);
}

void CudaBackend::loss(const LossDescriptor& d, double scale, const Image& x, const Image& labels,
                       const Image& weights, const Image& gradient, const Image& losses) {
  auto lock = enter();
  const auto& s = x.shape();
  cuda::loss(stream_, d, scale, x.data_as<float>(), labels.data_as<float>(), weights.data_as<float>(),
             gradient.data_as<float>(), losses.data_as<float>(), x.batch(), s.c, s.h * s.w);
}

void CudaBackend::optimizer_step(const OptimizerStep& s, float* values, const float* gradient,
                                 const std::vector<float*>& slots, size_t count) {
  TensorUpdate t{values, gradient, {}, count, s.step};
  for (size_t i = 0; i < slots.size() && i < 3; ++i) t.slots[i] = slots[i];
  optimizer_steps(s, {t});  // one tensor: the batched kernel, so there is one kernel
}

void CudaBackend::optimizer_steps(const OptimizerStep& s, const std::vector<TensorUpdate>& tensors) {
  auto lock = enter();
  cuda::optimizer_steps(step_launch(), s, tensors.data(), tensors.size());
}

cuda::RNNDevice CudaBackend::rnn_device(std::vector<std::shared_ptr<Buffer>>& scratch) {
  return {stream_,
          [this](bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
                 float beta, float* c, int ldc) { gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, false, alpha, beta); },
          [this, &scratch](size_t floats) {
            return static_cast<float*>(scratch.emplace_back(allocate(floats * sizeof(float)))->data());
          }};
}

void CudaBackend::rnn_generic_forward(const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s) {
  std::vector<std::shared_ptr<Buffer>> scratch;
  cuda::rnn_forward(rnn_device(scratch), g, w, s);
}

void CudaBackend::rnn_generic_gradient(const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s,
                                       const RNNLayerGradients& dw) {
  std::vector<std::shared_ptr<Buffer>> scratch;
  cuda::rnn_gradient(rnn_device(scratch), g, w, s, dw);
}

void CudaBackend::copy_rows(float* dst, int dst_ld, const float* src, int src_ld, int rows, int columns, bool add) {
  auto lock = enter();
  if (add) return cuda::add_rows(stream_, dst, dst_ld, src, src_ld, rows, columns);
  cuda_check(cudaMemcpy2DAsync(dst, dst_ld * sizeof(float), src, src_ld * sizeof(float), columns * sizeof(float), rows,
                               cudaMemcpyDeviceToDevice, stream_),
             "copy_rows");
}

void CudaBackend::permute(const float* in, float* out, const int dims[3], const int perm[3]) {
  auto lock = enter();
  cuda::permute(stream_, in, out, dims, perm);
}

}  // namespace nngraph
