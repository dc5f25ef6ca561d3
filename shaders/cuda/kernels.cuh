#pragma once
// Launchers for our own CUDA kernels; each enqueues on `s` and checks the launch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "nngraph/descriptors.h"
#include "nngraph/image.h"
#include "nngraph/optimizer.h"

#include "ops/rnn.h"

namespace nngraph {
struct PoolGeometry;
enum class PoolingMode;

template <>
struct DTypeOf<__half> {
  static constexpr DType value = DType::Float16;
};
template <>
struct DTypeOf<__nv_bfloat16> {
  static constexpr DType value = DType::BFloat16;
};
}  // namespace nngraph

namespace nngraph::cuda {

// Throws DeviceError naming `what` if the last launch failed.
void check_launch(const char* what);

// Calls f(T{}) with the storage type T of `t`: kernels of images (T) compute in float and
// take their parameters, statistics and losses in float32 whatever T is.
template <class F>
void with_storage(DType t, F&& f) {
  if (t == DType::Float16)
    f(__half{});
  else if (t == DType::BFloat16)
    f(__nv_bfloat16{});
  else
    f(float{});
}
// Each launcher below that is a template is instantiated for the three storage types.

// out = in converted (any pair of storage types).
void cast(cudaStream_t s, const void* in, DType from, void* out, DType to, size_t count);
// x[i] = neuron(x[i] + bias[(i / hw) % channels]) (bias may be null).
template <class T>
void bias_neuron(cudaStream_t s, T* x, size_t count, int channels, int hw, const float* bias,
                 const NeuronDescriptor& neuron);
template <class T>
void neuron(cudaStream_t s, const T* in, T* out, size_t count, const NeuronDescriptor& neuron);
template <class T>
void neuron_gradient(cudaStream_t s, const T* v, const T* dy, T* dx, size_t count, const NeuronDescriptor& neuron);
// Batch normalization, NCHW planes or rows of channels (hw 1), whose y (forward) or dy and dx
// (gradient) rows may lie further apart than c (y_ld, dy_ld, dx_ld: a view of wider ones). With
// stats (kBatchNormStatistics·c floats: mean, inverse deviation, variance, two sums, then the
// coefficients the passes load) the batch's statistics are computed into it (in partial,
// batch_norm_partial_floats(n, c, hw) floats) and used; with partial null they are already
// there (a replay); without stats, mean and var.
size_t batch_norm_partial_floats(int n, int c, int hw);
template <class T>
void batch_norm_forward(cudaStream_t s, const T* x, const float* gamma, const float* beta, const float* mean,
                        const float* var, float* stats, float* partial, float epsilon, const T* addend,
                        const NeuronDescriptor& neuron, T* y, int y_ld, int n, int c, int hw);
// dgamma and dbeta are written; dx (may be null) from them. With a neuron (the forward pass's
// after the normalization) dy is taken as dy ⊙ f'(neuron(y)), y recomputed from x. Rows (hw
// 1) of dy and dx lie dy_ld and dx_ld values apart (more than c in a view of wider ones).
template <class T>
void batch_norm_gradient(cudaStream_t s, const T* x, const T* dy, const float* gamma, const float* beta,
                         float* stats, const NeuronDescriptor& neuron, float* partial, T* dx, float* dgamma,
                         float* dbeta, int dy_ld, int dx_ld, int n, int c, int hw);
// One node's running statistics moved toward its batch's (stats as above; unbias 0: the
// variance stays); batch_norm_statistics moves n nodes' in as few launches as their
// parameters fit.
struct StatisticsMove {
  const float* stats;
  float *mean, *var;
  int c;
  float momentum, unbias;
};
void batch_norm_statistics(cudaStream_t s, const StatisticsMove* moves, size_t n);
// The running statistics folded into the c output channels (`per` weights each) of a convolution.
void batch_norm_fold(cudaStream_t s, float epsilon, const float* w, const float* bias, const float* gamma,
                     const float* beta, const float* mean, const float* var, float* folded_w, float* folded_bias, int c,
                     size_t per);
// The mask comes from (seed, *step): step is read on the device, so captures see each encode's.
template <class T>
void dropout(cudaStream_t s, const T* in, T* out, size_t count, float keep, uint64_t seed, const uint64_t* step);
// Where a launch whose arguments change from step to step goes (the step counter, the copies
// into and out of a captured step's buffers, the optimizer update): onto the stream, or where
// `redirect` is given, to it (CudaBackend: while capturing, launched and its node kept; while
// a replay is prepared, that node's arguments set).
using Redirect = std::function<void(const void* kernel, dim3 grid, dim3 block, void** args)>;
struct StepLaunch {
  StepLaunch(cudaStream_t s, const Redirect* r = nullptr) : stream(s), redirect(r) {}
  cudaStream_t stream;
  const Redirect* redirect;
};
// *counter = value, in stream order.
void store(const StepLaunch& l, uint64_t* counter, uint64_t value);
// Keeps the stream busy for about `microseconds` (what is queued behind it then runs back to back).
void hold(cudaStream_t s, int microseconds);
// y (n × out) = x (n × in) padded by g (negative amounts crop) in `mode` (padding.cu).
template <class T>
void padding(cudaStream_t s, PadMode mode, const PadGeometry& g, float value, const T* x, int n,
             const ImageShape& in, T* y, const ImageShape& out);
// The non-overlapping 1×kw windows of x's rows (n × c × h × w) as a matrix with one window of
// every channel per row: p[((n·h + y)·wo + j)·c + ch)·kw + k] = x[n, ch, y, j·kw + k].
// scatter_windows fills x back from p, with zeros where no window reaches.
template <class T>
void gather_windows(cudaStream_t s, const T* x, T* p, int n, int c, int h, int w, int wo, int kw);
template <class T>
void scatter_windows(cudaStream_t s, const T* p, T* x, int n, int c, int h, int w, int wo, int kw);

// Images n × c × h × w, NCHW or (last) NHWC; NHWC output pixels lie ys values apart (c, or
// more for channels of a wider image). Max pooling writes its winners where given
// (PoolingKernel's: a byte per output value, each image's `winner_image` bytes apart).
template <class T>
void pooling(cudaStream_t s, PoolingMode mode, const PoolGeometry& g, const T* in, T* out, int n, int c, int h, int w,
             int oh, int ow, bool last, int ys, uint8_t* winners, size_t winner_image);
// dx ⊙ nd'(x) when nd is set (a folded neuron gradient; x that neuron's output). With winners
// (max pooling) x is not read: each dy ⊙ nd'(y) goes to its window's winner; NHWC dy and y
// pixels then lie gs and ys values apart (without winners, both must be c).
template <class T>
void pooling_gradient(cudaStream_t s, PoolingMode mode, const PoolGeometry& g, const T* in, const T* dy,
                      const uint8_t* winners, size_t winner_image, const T* y, T* dx, int n, int c, int h, int w,
                      int oh, int ow, bool last, int gs, int ys, const NeuronDescriptor& nd);

template <class T>
void softmax(cudaStream_t s, bool log, const T* in, T* out, int n, int c, int hw);
template <class T>
void softmax_gradient(cudaStream_t s, bool log, const T* y, const T* dy, T* dx, int n, int c, int hw);

// Scores x and their gradient in T; labels, label weights and losses in float32.
template <class T>
void loss(cudaStream_t s, const LossDescriptor& d, double scale, const float* loss_scale, const T* x, const float* labels,
          const float* weights, T* gradient, float* losses, int n, int c, int hw);

// Many tensors under one rule, each with its own step count: one launch per 16 tensors.
void optimizer_steps(const StepLaunch& l, const OptimizerStep& step, const TensorUpdate* tensors, size_t n);

// db[c] = Σ over n and the hw pixels of dz[n, c, pixel], dz = dy·f'(y) where y is given (else
// dy), also stored where dz is; `partial` holds c · bias_gradient_chunks(n, c, hw) floats.
// Each partial sum goes to a row of `partial` and column_totals adds the rows.
template <class T>
void bias_gradient(cudaStream_t s, const T* dy, const T* y, T* dz, const NeuronDescriptor& nd, float* db, int n, int c,
                   int hw, float* partial);
int bias_gradient_chunks(int n, int c, int hw);
// Σ over the rows of partial (rows × width), rows in a fixed order: columns [0, split) to a,
// the rest to b (skipped where b is null); a holds storage type T.
template <class T>
void column_totals(cudaStream_t s, const float* partial, int rows, int width, int split, T* a, float* b);
// A convolution of one group: x n × c × h × w, y n × oc × oh × ow, weights OIHW (the direct
// forward's KRSC where x_last); x, and y with its gradient, NCHW unless x_last or y_last
// (NHWC: the direct kernels alone).
struct ConvShape {
  int n, c, h, w, oc, oh, ow, kh, kw, sy, sx, dy, dx, pad_top, pad_left;
  bool x_last = false, y_last = false;
};
// Direct convolution kernels (direct_conv.cu) for at most kDirectMaxTaps taps (C·kh·kw) per
// output, any stride, dilation and padding.
constexpr int kDirectMaxTaps = 64;
bool direct_convolution_fits(const ConvShape& g);
// y = neuron(conv(x, w) + bias) (bias may be null), of storage type T (summed in float32);
// the weights are KRSC where x is channels-last (x_last), else OIHW.
template <class T>
void direct_convolution(cudaStream_t s, const ConvShape& g, const T* x, const T* w, const float* bias,
                        const NeuronDescriptor& nd, T* y);
// dw (and db where given) from dz = dy·nd'(y) (dz = dy where y is null), of storage type T
// (summed in float32) in either layout; `partial` holds
// direct_weight_gradient_rows(g) · (oc·taps + oc) floats.
template <class T>
void direct_weight_gradient(cudaStream_t s, const ConvShape& g, const T* x, const T* dy, const T* y,
                            const NeuronDescriptor& nd, T* dw, float* db, float* partial);
int direct_weight_gradient_rows(const ConvShape& g);
// db = Σ over pixels of dy·nd'(x ∗ w + bias), the convolution computed again as it is read
// (nd's derivative from its input); weights and layouts as direct_convolution's, `partial`
// holds direct_bias_gradient_rows(g) · oc floats.
template <class T>
void direct_bias_gradient(cudaStream_t s, const ConvShape& g, const T* x, const T* w, const float* bias, const T* dy,
                          const NeuronDescriptor& nd, float* db, float* partial);
int direct_bias_gradient_rows(const ConvShape& g);
// Convolution passes as products on tensor cores (tensor_conv.cu). Exact: each float32
// operand is split into a tf32 part and the rest as tf32, and three products are summed
// (float32's accuracy); else one tf32 product. NCHW images (g.x_last false) with OIHW weights:
// forward, channels a multiple of 16; input gradient, stride 1 and output channels a multiple
// of 16; weight gradient, output planes a multiple of 4 pixels and dz 16-byte aligned (read 4
// at a time). Channels-last images (g.x_last: both images) with KRSC weights and weight
// gradient: the channels a pass reads four at a time a multiple of 4 (x's forward, dz's for the
// input gradient, both for the weight gradient), those images and the forward pass's weights
// 16-byte aligned; input gradient at stride 1. `reordered` holds the weights' count of floats.
bool tensor_convolution_fits(const ConvShape& g, const float* x, const float* w);
bool tensor_input_gradient_fits(const ConvShape& g, const float* dz);
bool tensor_weight_gradient_fits(const ConvShape& g, const float* x, const float* dz);
// y = neuron(conv(x, w) + bias) (bias may be null).
void tensor_convolution(cudaStream_t s, const ConvShape& g, bool exact, const float* x, const float* w,
                        const float* bias, const NeuronDescriptor& nd, float* y, float* reordered);
void tensor_input_gradient(cudaStream_t s, const ConvShape& g, bool exact, const float* dz, const float* w,
                           float* dx, float* reordered);
// dw from dz; `partial` holds tensor_weight_gradient_partial(g) floats (none: may be null).
void tensor_weight_gradient(cudaStream_t s, const ConvShape& g, bool exact, const float* x, const float* dz,
                            float* dw, float* partial);
size_t tensor_weight_gradient_partial(const ConvShape& g);
// Row-major C (m × n, ldc = n) = op(A)·op(B) on tensor cores (tensor_product.cu), exact or
// one tf32 product as above; op(A) is m × k (ta: A stored k × m), op(B) k × n (tb: B stored
// n × k). Fits where the operands are 16-byte aligned, their leading dimensions and the
// extents they are read along multiples of 4. `partial` holds tensor_product_partial floats.
bool tensor_product_fits(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                         int ldc);
size_t tensor_product_partial(int m, int n, int k);
void tensor_product(cudaStream_t s, bool exact, bool ta, bool tb, int m, int n, int k, const float* a, int lda,
                    const float* b, int ldb, float* c, float* partial);
// The same products where m·n·k is small, C's rows ldc apart (thin_product.cu): op(B) not
// transposed, or A not transposed and B transposed.
bool thin_product_fits(bool ta, bool tb, int m, int n, int k);
void thin_product(cudaStream_t s, bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b,
                  int ldb, float* c, int ldc);
// Copies (copy.cu). dst[r·dst_ld + c] += src[r·src_ld + c] for rows × columns.
void add_rows(cudaStream_t s, float* dst, int dst_ld, const float* src, int src_ld, int rows, int columns);
// rows × `bytes` bytes from src (rows src_ld bytes apart) to dst (dst_ld apart), any alignment.
void copy_rows(cudaStream_t s, void* dst, size_t dst_ld, const void* src, size_t src_ld, size_t rows, size_t bytes);
// A channels-last convolution's windows as the rows of a matrix, values `value_bytes` each:
// row (image, oy, ox) holds tap by tap, in a KRSC filter's order, the c values of the image's
// pixel under the tap (zeros outside the image), then zeros to `ld` values.
void windows(cudaStream_t s, const ConvShape& g, const void* x, void* rows, size_t value_bytes, int ld);
// A 1×1 window's rows (c values each) placed back into the images, zeros at the pixels that
// no window reads: its input gradient.
void place_pixels(cudaStream_t s, const ConvShape& g, const void* rows, void* x, size_t value_bytes);
// out = in (d0 × d1 × d2) with its axes reordered: out axis k is in axis perm[k]; each value
// cast to out's storage type where it differs.
template <class From, class To>
void permute(cudaStream_t s, const From* in, To* out, const int dims[3], const int perm[3]);

// dst (rows × cols, row stride dst_ld) = src (row stride src_ld), or zeros where src is null.
struct Block {
  const float* src;
  int src_ld;
  float* dst;
  int dst_ld, rows, cols;
};
// Every block in one launch (at most 16).
void copy_blocks(const StepLaunch& l, const std::vector<Block>& blocks);

// The recurrent sequence algorithm (rnn_sequence.h) on the device: matrix products through
// `gemm` (row-major, C = alpha·op(A)·op(B) + beta·C), temporaries from `scratch` (valid until
// the call returns; freed in stream order).
struct RNNDevice {
  cudaStream_t stream;
  std::function<void(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int)> gemm;
  std::function<float*(size_t)> scratch;
};
void rnn_forward(const RNNDevice& d, const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s);
void rnn_gradient(const RNNDevice& d, const RNNLayerGeometry& g, const RNNLayerWeights& w, const RNNSequence& s,
                  const RNNLayerGradients& dw);

// *flag = 1 if any value is NaN or infinite (flag zeroed first).
void any_nonfinite(cudaStream_t s, const void* data, DType dtype, size_t count, int* flag);
// *flag = 1 if any value of the tensors is NaN or infinite (flag left as it is otherwise),
// in one launch per 32 tensors.
struct Checked {
  const void* data;
  DType dtype;
  size_t count;
};
void mark_nonfinite(cudaStream_t s, const std::vector<Checked>& tensors, int* flag);
// math::advance_loss_scale on the device.
void advance_loss_scale(cudaStream_t s, math::LossScaleState* state, const LossScaling& rule);

}  // namespace nngraph::cuda
