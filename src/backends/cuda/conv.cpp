// Convolution forward through cuDNN (algorithms found once per shape and cached), our direct
// kernels (few taps per output) or tensor-core products where they beat cuDNN's best on the
// shape, or, for windows that tile rows and channels-last 1×1 or few-tap windows, cuBLAS over
// the windows' rows (conv_rows.h), or one of cuDNN's graph-API plans (conv_engines.h); the bias
// and neuron epilogue is ours (epilogue.h). The gradients are in conv_gradient.cpp.
#include "backends/cuda/conv_common.h"

namespace nngraph {
namespace {

using namespace conv_common;

// y = neuron(cuDNN's forward by algorithm a of plan q + bias).
template <class T>
void cudnn_forward(CudaBackend& b, const ConvPlan& q, const cudnnConvolutionFwdAlgoPerf_t& a, const T* x,
                   const T* w, const float* bias, const NeuronDescriptor& neuron, const Tensor& out) {
  const float one = 1.f, zero = 0.f;
  const auto ws = b.workspace(a.memory);
  cudnn_check(cudnnConvolutionForward(b.cudnn(), &one, q.x, x, q.w, w, q.conv, a.algo, ws->data(), a.memory, &zero,
                                      q.y, out.dense_as<T>()),
              "convolution");
  add_bias_neuron<T>(b, out, bias, neuron);
}

// Images and weights of storage type T.
template <class T>
void convolution_of(CudaBackend& b, const ConvGeometry& g, const Tensor& in, const Tensor& w, const Tensor& bs,
                    const NeuronDescriptor& neuron, const Tensor& out) {
  constexpr DType dt = DTypeOf<T>::value;
  const float* bias = bs.data_as<const float>();
  const int n = in.batch();
  const auto& os = out.shape();
  const bool last = channels_last({&in, &out});
  std::shared_ptr<Buffer> reordered_w;
  const T* weights = filters_in<T>(b, w, last, os.c, in.shape().c / g.groups, g.kh * g.kw, &reordered_w);
  if (last && windowed_in_place(g, in.shape(), os)) {  // y (windows × o) = windows (windows × kw·c) · Wᵀ
    const int ck = in.shape().c * g.kw, windows = n * os.h * os.w;
    b.gemm(dt, false, true, windows, os.c, ck, in.dense_as<const T>(), ck, weights, ck, out.dense_as<T>(), os.c,
           g.tf32, 1.f, 0.f, {}, g.half);
    add_bias_neuron<T>(b, out, bias, neuron);
    return;
  }
  if (!last && windowed(g, in.shape(), os)) {
    // y[image] (channels × windows) = W (channels × c·kw) · windows[image]ᵀ
    const int ck = in.shape().c * g.kw, p = os.h * os.w;
    const auto win = gather_windows<T>(b, g, in, os);
    b.gemm(dt, false, true, os.c, p, ck, weights, ck, win->data(), ck, out.data_as<T>(), p, g.tf32, 1.f, 0.f,
           {n, 0, static_cast<long long>(p) * ck, static_cast<long long>(os.c) * p}, g.half);
    add_bias_neuron<T>(b, out, bias, neuron);
    return;
  }
  ConvPlan& p = conv_plan(b, g, n, in.shape(), out.shape(), dt, last);
  cuda::ConvShape shape = conv_shape(g, n, in.shape(), os);
  shape.x_last = shape.y_last = last;
  // The direct kernel runs one group of any storage and layout (both images the same, so the
  // weights are KRSC where they are channels-last); the tensor-core one float32 in either layout.
  const bool direct_fits = g.groups == 1 && in.layout() == out.layout() && cuda::direct_convolution_fits(shape);
  const bool ours = g.groups == 1 && dt == DType::Float32;
  auto cudnn = [&](const cudnnConvolutionFwdAlgoPerf_t& a) {
    std::shared_ptr<Buffer> padded;
    cudnn_forward(b, p, a, cudnn_input<T>(b, p, in, &padded), weights, bias, neuron, out);
  };
  auto engine = [&](int i) {  // cuDNN's best algorithm instead where a pointer is misaligned
    std::shared_ptr<Buffer> padded;
    if (!p.run_engine(b, ConvEngines::kForward, i, cudnn_input<T>(b, p, in, &padded), weights, out.dense_as<T>()))
      return cudnn(p.fwd(b)[0]);
    add_bias_neuron<T>(b, out, bias, neuron);
  };
  auto direct = [&] {
    cuda::direct_convolution(b.stream(), shape, in.dense_as<const T>(), weights, bias, neuron, out.dense_as<T>());
  };
  const int ld = row_values(g, in.shape()), taps = g.kh * g.kw * in.shape().c;
  auto product = [&] {  // y (rows × o) = the windows' rows · Wᵀ
    std::shared_ptr<Buffer> rows, padded;
    b.gemm(dt, false, true, n * os.h * os.w, os.c, ld, window_rows<T>(b, shape, in, ld, &rows), ld,
           padded_filters<T>(b, weights, os.c, taps, ld, &padded), ld, out.dense_as<T>(), os.c, g.tf32, 1.f, 0.f, {},
           g.half);
    add_bias_neuron<T>(b, out, bias, neuron);
  };
  ConvPlan* widened_plan = widened_plan_of(b, g, n, in.shape(), os, dt, last, {p.forward});
  const int wide = widened_channels(g, in.shape());
  auto widened = [&] {
    std::shared_ptr<Buffer> rows, filters;
    cudnn_forward(b, *widened_plan, widened_plan->fwd(b)[0], widened_pixels<T>(b, in, wide, &rows),
                  padded_filters<T>(b, weights, os.c * g.kh * g.kw, in.shape().c, wide, &filters), bias, neuron, out);
  };
  // Checked every call, as pointers' alignment is the call's.
  const bool tensor_fits =
      ours && cuda::tensor_convolution_fits(shape, as_float(in.dense_as<const T>()), as_float(weights));
  auto tensor = [&] {  // channels-last reads the KRSC weights as they are
    const auto reordered =
        last ? nullptr : b.allocate(static_cast<size_t>(os.c) * in.shape().c * g.kh * g.kw * sizeof(float));
    cuda::tensor_convolution(b.stream(), shape, !g.tf32, as_float(in.dense_as<const T>()), as_float(weights), bias,
                             neuron, reinterpret_cast<float*>(out.dense_as<T>()),
                             reordered ? static_cast<float*>(reordered->data()) : nullptr);
  };
  if (p.forward == ConvPlan::kUndecided && !b.capturing()) {
    Candidates c = algorithms(p.fwd(b), cudnn);
    if (direct_fits) c.push_back({ConvPlan::kDirect, direct});
    if (tensor_fits) c.push_back({ConvPlan::kTensor, tensor});
    if (last && (pointwise(g, in.shape(), os) || few_taps(g, in.shape())))
      c.push_back({ConvPlan::kProduct, product});
    if (widened_plan) c.push_back({ConvPlan::kWidened, widened});
    for (int i = 0; i < p.engines(b, ConvEngines::kForward).size(); ++i)
      c.push_back({ConvPlan::engine(i), [&engine, i] { engine(i); }});
    p.forward = b.quickest(c, tuning_what("forward", g, n, in.shape(), os, dt, last), choice_names(p.fwd(b)));
  }
  if (ConvPlan::is_engine(p.forward)) return engine(ConvPlan::engine_of(p.forward));
  if (p.forward == ConvPlan::kWidened) return widened();
  if (p.forward == ConvPlan::kDirect) return direct();
  if (p.forward == ConvPlan::kProduct) return product();
  if (p.forward == ConvPlan::kTensor && tensor_fits) return tensor();
  cudnn(p.fwd(b)[std::max(p.forward, 0)]);
}

void convolution(Backend& backend, const ConvGeometry& g, const Tensor& in, const Tensor& w, const Tensor& bs,
                 const NeuronDescriptor& neuron, const Tensor& out) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::with_storage(in.dtype(), [&](auto z) { convolution_of<decltype(z)>(b, g, in, w, bs, neuron, out); });
}

NNGRAPH_KERNEL(ConvolutionKernel, CUDA, convolution);
NNGRAPH_CHANNELS_LAST(ConvolutionKernel, CUDA);

}  // namespace
}  // namespace nngraph
