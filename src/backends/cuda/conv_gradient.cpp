// Convolution gradients on the cuda backend, each pass by the quickest of cuDNN's algorithms,
// its graph-API plans, our direct and tensor-core kernels and products over the windows' rows
// (as the forward pass in conv.cpp chooses); dz = dy ⊙ f'(y) and the bias gradient in our pass
// (epilogue.h), or in one pass with the convolution computed again (few taps, bias alone).
#include "backends/cuda/conv_common.h"
#include "nngraph/error.h"

namespace nngraph {
namespace {

using namespace conv_common;

template <class T>
void convolution_gradient_of(CudaBackend& b, const ConvGeometry& g, const Tensor& xi, const Tensor& w,
                             const Tensor& dy, const Tensor& y, const NeuronDescriptor& neuron, const Tensor& dx,
                             const Tensor& dwt, const Tensor& dbt) {
  constexpr DType dt = DTypeOf<T>::value;
  T* dw = dwt.dense_as<T>();
  float* db = dbt.data_as<float>();
  const int n = xi.batch();
  const auto& is = xi.shape();
  const auto& os = dy.shape();
  const bool last = channels_last({&xi, &dy, &dx});
  const int taps = g.kh * g.kw, per_group = is.c / g.groups;
  std::shared_ptr<Buffer> scratch, padded_x, padded_dx, partial, tensor_partial, reordered_w, dw_scratch, rows;
  // dW as a pass computes it, KRSC or OIHW: into dw where that is dw's order (KRSC for a
  // channels-last filter's, as its copy is, which the optimizer reads), else into a scratch
  // that dw_placed reorders into dw.
  const bool dw_krsc = dwt.layout() == Layout::NHWC;
  auto dw_target = [&](bool krsc) {
    if (krsc == dw_krsc) return dw;
    if (!dw_scratch) dw_scratch = b.allocate(dwt.bytes());
    return static_cast<T*>(dw_scratch->data());
  };
  auto dw_placed = [&](bool krsc, T* target) {
    if (target != dw) reorder_filter(b, static_cast<const T*>(target), dw, os.c, per_group, taps, krsc);
  };
  if (!dx && !dw) {  // the bias alone (frozen weights, no input gradient): dz is not stored
    if (db) derivative_and_bias<T>(b, dy, y, neuron, nullptr, db);
    return;
  }
  const T* weights = dx ? filters_in<T>(b, w, last, os.c, per_group, taps, &reordered_w) : nullptr;
  if (last && windowed_in_place(g, is, os)) {
    const T* dz = output_gradient<T>(b, dy, y, neuron, db, &scratch);
    const int ck = is.c * g.kw, windows = n * os.h * os.w;
    if (dw) {  // dW (o × kw·c, KRSC) = dzᵀ · windows
      T* target = dw_target(true);
      b.gemm(dt, true, false, os.c, ck, windows, dz, os.c, xi.dense_as<const T>(), ck, target, ck, g.tf32, 1.f, 0.f,
             {}, g.half);
      dw_placed(true, target);
    }
    if (dx)  // the windows' gradient (windows × kw·c) = dz · W is dx itself
      b.gemm(dt, false, false, windows, ck, os.c, dz, os.c, weights, ck, dx.dense_as<T>(), ck, g.tf32, 1.f, 0.f, {},
             g.half);
    return;
  }
  if (!last && windowed(g, is, os)) {
    const T* dz = output_gradient<T>(b, dy, y, neuron, db, &scratch);
    const int ck = is.c * g.kw, p = os.h * os.w;
    if (dw) {  // dW (channels × c·kw) = dz laid out channels × (image, window) · windows
      const auto win = gather_windows<T>(b, g, xi, os);
      auto dzt = b.allocate(dy.bytes());
      const int dims[3] = {n, os.c, p}, perm[3] = {1, 0, 2};
      cuda::permute(b.stream(), dz, static_cast<T*>(dzt->data()), dims, perm);
      T* target = dw_target(false);
      b.gemm(dt, false, false, os.c, ck, n * p, dzt->data(), n * p, win->data(), ck, target, ck, g.tf32, 1.f, 0.f,
             {}, g.half);
      dw_placed(false, target);
    }
    if (dx) {  // windows' gradient[image] (windows × c·kw) = dz[image]ᵀ · W, scattered back
      auto dwin = b.allocate(static_cast<size_t>(n) * p * ck * sizeof(T));
      b.gemm(dt, true, false, p, ck, os.c, dz, p, weights, ck, dwin->data(), ck, g.tf32, 1.f, 0.f,
             {n, static_cast<long long>(os.c) * p, 0, static_cast<long long>(p) * ck}, g.half);
      cuda::scatter_windows(b.stream(), static_cast<const T*>(dwin->data()), dx.data_as<T>(), n, is.c, is.h, is.w,
                            os.w, g.kw);
    }
    return;
  }
  ConvPlan& p = conv_plan(b, g, n, is, os, dt, last);
  cuda::ConvShape shape = conv_shape(g, n, is, os);
  shape.x_last = xi.layout() == Layout::NHWC;
  shape.y_last = dy.layout() == Layout::NHWC;
  // Our tensor-core kernels run one group of float32, their images all in one layout (`last`);
  // the direct weight gradient any storage and layout.
  const bool ours = g.groups == 1 && dt == DType::Float32;
  cuda::ConvShape tensor_shape = shape;
  tensor_shape.x_last = tensor_shape.y_last = last;
  const bool direct = g.groups == 1 && cuda::direct_convolution_fits(shape);
  const bool pointwise_fits = last && pointwise(g, is, os);
  const bool product_dw_fits = pointwise_fits || (last && few_taps(g, is));
  const int windows = n * os.h * os.w, ld = row_values(g, is), k = taps * per_group;
  // Both gradients on channels widened as the forward pass may be: x in rows of `wide` values
  // for dW, the filters padded with zeros for dx, and the first is.c channels of each result kept.
  ConvPlan* widened_plan = widened_plan_of(b, g, n, is, os, dt, last, {p.weight_gradient, p.input_gradient});
  const int wide = widened_channels(g, is);
  const float one = 1.f, zero = 0.f;
  // Ours applies the neuron's derivative and sums the bias gradient as it reads dy.
  auto direct_dw = [&](const T* grad, const Tensor& out, float* bias_grad) {
    const size_t row = static_cast<size_t>(os.c) * is.c * g.kh * g.kw + os.c;
    if (!partial) partial = b.allocate(cuda::direct_weight_gradient_rows(shape) * row * sizeof(float));
    T* target = dw_target(false);
    cuda::direct_weight_gradient(b.stream(), shape, xi.dense_as<const T>(), grad, out ? out.dense_as<const T>() : nullptr,
                                 neuron, target, bias_grad, static_cast<float*>(partial->data()));
    dw_placed(false, target);
  };
  auto tensor_dw = [&](const T* dz) {  // KRSC where channels-last
    const size_t floats = cuda::tensor_weight_gradient_partial(tensor_shape);
    if (floats && !tensor_partial) tensor_partial = b.allocate(floats * sizeof(float));
    T* target = dw_target(last);
    cuda::tensor_weight_gradient(b.stream(), tensor_shape, !g.tf32, as_float(xi.dense_as<const T>()), as_float(dz),
                                 reinterpret_cast<float*>(target),
                                 floats ? static_cast<float*>(tensor_partial->data()) : nullptr);
    dw_placed(last, target);
  };
  auto tensor_dx = [&](const T* dz) {
    const auto reordered = b.allocate(static_cast<size_t>(os.c) * is.c * g.kh * g.kw * sizeof(float));
    cuda::tensor_input_gradient(b.stream(), tensor_shape, !g.tf32, as_float(dz), as_float(weights),
                                reinterpret_cast<float*>(dx.dense_as<T>()), static_cast<float*>(reordered->data()));
  };
  auto product_dw = [&](const T* dz) {  // dW (o × ld) = dzᵀ · the windows' rows: KRSC
    std::shared_ptr<Buffer> padded = ld == k ? nullptr : b.allocate(static_cast<size_t>(os.c) * ld * sizeof(T));
    T* krsc = dw_target(true);
    T* target = padded ? static_cast<T*>(padded->data()) : krsc;
    b.gemm(dt, true, false, os.c, ld, windows, dz, os.c, window_rows<T>(b, shape, xi, ld, &rows), ld, target, ld,
           g.tf32, 1.f, 0.f, {}, g.half);
    if (padded) cuda::copy_rows(b.stream(), krsc, k * sizeof(T), target, ld * sizeof(T), os.c, k * sizeof(T));
    dw_placed(true, krsc);
  };
  auto product_dx = [&](const T* dz) {  // the pixels' gradient (windows × c) = dz · W, placed in dx
    const bool whole = reads_every_pixel(shape);
    std::shared_ptr<Buffer> placed = whole ? nullptr : b.allocate(static_cast<size_t>(windows) * is.c * sizeof(T));
    T* target = whole ? dx.dense_as<T>() : static_cast<T*>(placed->data());
    b.gemm(dt, false, false, windows, is.c, os.c, dz, os.c, weights, is.c, target, is.c, g.tf32, 1.f, 0.f, {},
           g.half);
    if (!whole) cuda::place_pixels(b.stream(), shape, target, dx.dense_as<T>(), sizeof(T));
  };
  // cuDNN's weight gradient, by a legacy algorithm or a graph-API plan (which falls back on the
  // best algorithm where a pointer is misaligned): KRSC where channels-last.
  auto into_dw = [&](const auto& compute) {
    T* target = dw_target(last);
    compute(cudnn_input<T>(b, p, xi, &padded_x), target);
    dw_placed(last, target);
  };
  auto legacy_dw = [&](const cudnnConvolutionBwdFilterAlgoPerf_t& a, const T* x, const T* dz, T* target) {
    const auto ws = b.workspace(a.memory);
    cudnn_check(cudnnConvolutionBackwardFilter(b.cudnn(), &one, p.x, x, p.y, dz, p.conv, a.algo, ws->data(), a.memory,
                                               &zero, p.w, target),
                "convolution_gradient");
  };
  auto cudnn_dw = [&](const cudnnConvolutionBwdFilterAlgoPerf_t& a, const T* dz) {
    into_dw([&](const T* x, T* target) { legacy_dw(a, x, dz, target); });
  };
  auto engine_dw = [&](int i, const T* dz) {
    into_dw([&](const T* x, T* target) {
      if (!p.run_engine(b, ConvEngines::kWeightGradient, i, x, dz, target))
        legacy_dw(p.bwd_filter(b)[0], x, dz, target);
    });
  };
  auto widened_dw = [&](const T* dz) {
    ConvPlan& q = *widened_plan;
    std::shared_ptr<Buffer> rows;
    const T* x = widened_pixels<T>(b, xi, wide, &rows);
    const auto full = b.allocate(static_cast<size_t>(os.c) * taps * wide * sizeof(T));
    const auto& a = q.bwd_filter(b)[0];
    const auto ws = b.workspace(a.memory);
    cudnn_check(cudnnConvolutionBackwardFilter(b.cudnn(), &one, q.x, x, q.y, dz, q.conv, a.algo, ws->data(), a.memory,
                                               &zero, q.w, full->data()),
                "convolution_gradient");
    T* krsc = dw_target(true);
    cuda::copy_rows(b.stream(), krsc, is.c * sizeof(T), full->data(), wide * sizeof(T), os.c * taps, is.c * sizeof(T));
    dw_placed(true, krsc);
  };
  // The input gradient likewise, into dx (through a padded copy where the plan pads).
  auto into_dx = [&](const auto& compute) {
    T* target = dx.dense_as<T>();
    if (p.padded) {
      padded_dx = b.allocate(static_cast<size_t>(n) * is.c * p.hp * p.wp * sizeof(T));
      target = static_cast<T*>(padded_dx->data());
    }
    compute(target);
    if (p.padded) {  // rows and columns beyond the padded copy (no window reaches them) get 0
      const PadGeometry m = p.margins(is);
      cuda::padding(b.stream(), PadMode::Constant, {0, 0, -m.top, -m.bottom, -m.left, -m.right}, 0.f, target, n,
                    p.plane(is, p.hp, p.wp), dx.dense_as<T>(), p.plane(is, is.h, is.w));
    }
  };
  auto legacy_dx = [&](const cudnnConvolutionBwdDataAlgoPerf_t& a, const T* dz, T* target) {
    const auto ws = b.workspace(a.memory);
    cudnn_check(cudnnConvolutionBackwardData(b.cudnn(), &one, p.w, weights, p.y, dz, p.conv, a.algo, ws->data(),
                                             a.memory, &zero, p.x, target),
                "convolution_gradient");
  };
  auto cudnn_dx = [&](const cudnnConvolutionBwdDataAlgoPerf_t& a, const T* dz) {
    into_dx([&](T* target) { legacy_dx(a, dz, target); });
  };
  auto engine_dx = [&](int i, const T* dz) {
    into_dx([&](T* target) {
      if (!p.run_engine(b, ConvEngines::kInputGradient, i, dz, weights, target))
        legacy_dx(p.bwd_data(b)[0], dz, target);
    });
  };
  auto widened_dx = [&](const T* dz) {
    ConvPlan& q = *widened_plan;
    std::shared_ptr<Buffer> filters;
    const T* wf = padded_filters<T>(b, weights, os.c * taps, is.c, wide, &filters);
    const auto full = b.allocate(static_cast<size_t>(n) * is.h * is.w * wide * sizeof(T));
    const auto& a = q.bwd_data(b)[0];
    const auto ws = b.workspace(a.memory);
    cudnn_check(cudnnConvolutionBackwardData(b.cudnn(), &one, q.w, wf, q.y, dz, q.conv, a.algo, ws->data(), a.memory,
                                             &zero, q.x, full->data()),
                "convolution_gradient");
    cuda::copy_rows(b.stream(), dx.dense_as<T>(), is.c * sizeof(T), full->data(), wide * sizeof(T),
                    static_cast<size_t>(n) * is.h * is.w, is.c * sizeof(T));
  };
  if (dw && !dx && p.weight_gradient == ConvPlan::kDirect) return direct_dw(dy.dense_as<const T>(), y, db);
  const T* dz = output_gradient<T>(b, dy, y, neuron, db, &scratch);
  // Checked every call: dz's alignment is the call's, not the shape's.
  const bool tensor_fits =
      ours && cuda::tensor_weight_gradient_fits(tensor_shape, as_float(xi.dense_as<const T>()), as_float(dz));
  auto weight_gradient = [&] {
    if (p.weight_gradient == ConvPlan::kUndecided && !b.capturing()) {
      Candidates c = algorithms(p.bwd_filter(b), [&](const auto& a) { cudnn_dw(a, dz); });
      if (direct) c.push_back({ConvPlan::kDirect, [&] { direct_dw(dz, Tensor(), nullptr); }});
      if (tensor_fits) c.push_back({ConvPlan::kTensor, [&] { tensor_dw(dz); }});
      if (product_dw_fits) c.push_back({ConvPlan::kProduct, [&] { product_dw(dz); }});
      if (widened_plan) c.push_back({ConvPlan::kWidened, [&] { widened_dw(dz); }});
      for (int i = 0; i < p.engines(b, ConvEngines::kWeightGradient).size(); ++i)
        c.push_back({ConvPlan::engine(i), [&, i] { engine_dw(i, dz); }});
      p.weight_gradient = b.quickest(c, tuning_what("weight gradient", g, n, is, os, dt, last),
                                     choice_names(p.bwd_filter(b)));
    }
    if (ConvPlan::is_engine(p.weight_gradient))
      engine_dw(ConvPlan::engine_of(p.weight_gradient), dz);
    else if (p.weight_gradient == ConvPlan::kDirect)
      direct_dw(dz, Tensor(), nullptr);
    else if (p.weight_gradient == ConvPlan::kProduct)
      product_dw(dz);
    else if (p.weight_gradient == ConvPlan::kWidened)
      widened_dw(dz);
    else if (p.weight_gradient == ConvPlan::kTensor && tensor_fits)  // else cuDNN's best
      tensor_dw(dz);
    else
      cudnn_dw(p.bwd_filter(b)[std::max(p.weight_gradient, 0)], dz);
  };
  const bool tensor_dx_fits = ours && cuda::tensor_input_gradient_fits(tensor_shape, as_float(dz));
  auto input_gradient = [&] {
    if (p.input_gradient == ConvPlan::kUndecided && !b.capturing()) {
      Candidates c = algorithms(p.bwd_data(b), [&](const auto& a) { cudnn_dx(a, dz); });
      if (tensor_dx_fits) c.push_back({ConvPlan::kTensor, [&] { tensor_dx(dz); }});
      if (pointwise_fits) c.push_back({ConvPlan::kProduct, [&] { product_dx(dz); }});
      if (widened_plan) c.push_back({ConvPlan::kWidened, [&] { widened_dx(dz); }});
      for (int i = 0; i < p.engines(b, ConvEngines::kInputGradient).size(); ++i)
        c.push_back({ConvPlan::engine(i), [&, i] { engine_dx(i, dz); }});
      p.input_gradient =
          b.quickest(c, tuning_what("input gradient", g, n, is, os, dt, last), choice_names(p.bwd_data(b)));
    }
    if (ConvPlan::is_engine(p.input_gradient))
      engine_dx(ConvPlan::engine_of(p.input_gradient), dz);
    else if (p.input_gradient == ConvPlan::kTensor && tensor_dx_fits)  // else cuDNN's best
      tensor_dx(dz);
    else if (p.input_gradient == ConvPlan::kProduct && pointwise_fits)  // else cuDNN's best
      product_dx(dz);
    else if (p.input_gradient == ConvPlan::kWidened)
      widened_dx(dz);
    else
      cudnn_dx(p.bwd_data(b)[std::max(p.input_gradient, 0)], dz);
  };
  const double work = static_cast<double>(n) * os.c * os.h * os.w * (is.c / g.groups) * g.kh * g.kw;
  // cuDNN's workspace each pass takes as decided (ours take none): side by side, each must stay
  // within its own part of the shared one.
  const int wg = p.weight_gradient, ig = p.input_gradient;
  const bool dw_ours =
      wg == ConvPlan::kDirect || wg == ConvPlan::kProduct || (wg == ConvPlan::kTensor && tensor_fits);
  const size_t dx_workspace = !dx || (ig == ConvPlan::kTensor && tensor_dx_fits) || ig == ConvPlan::kProduct ? 0
                              : ConvPlan::is_engine(ig)
                                  ? p.engine_workspace(b, ConvEngines::kInputGradient, ConvPlan::engine_of(ig))
                              : ig == ConvPlan::kWidened ? widened_plan->bwd_data(b)[0].memory
                                                         : p.bwd_data(b)[std::max(ig, 0)].memory;
  const size_t dw_workspace = !dw || dw_ours ? 0
                              : ConvPlan::is_engine(wg)
                                  ? p.engine_workspace(b, ConvEngines::kWeightGradient, ConvPlan::engine_of(wg))
                              : wg == ConvPlan::kWidened ? widened_plan->bwd_filter(b)[0].memory
                                                         : p.bwd_filter(b)[std::max(wg, 0)].memory;
  b.side_by_side(dx ? input_gradient : std::function<void()>(), dw ? weight_gradient : std::function<void()>(), work,
               dx_workspace, dw_workspace);
}

void convolution_gradient(Backend& backend, const ConvGeometry& g, const Tensor& xi, const Tensor& w,
                          const Tensor& dy, const Tensor& y, const NeuronDescriptor& neuron, const Tensor& dx,
                          const Tensor& dwt, const Tensor& dbt) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::with_storage(dy.dtype(), [&](auto z) {
    convolution_gradient_of<decltype(z)>(b, g, xi, w, dy, y, neuron, dx, dwt, dbt);
  });
}

// The direct kernel's geometry, one group, both images in one layout, a neuron whose derivative
// comes from its input (the one recomputes_neuron_input folds); else false, for the generic path.
bool convolution_bias_gradient(Backend& backend, const ConvGeometry& g, const Tensor& x, const Tensor& w,
                               const Tensor& bs, const Tensor& dy, const NeuronDescriptor& neuron, const Tensor& db) {
  cuda::ConvShape shape = conv_shape(g, x.batch(), x.shape(), dy.shape());
  shape.x_last = shape.y_last = channels_last({&x, &dy});
  if (!db || g.groups != 1 || x.layout() != dy.layout() || neuron.derivative_from_output() ||
      !cuda::direct_convolution_fits(shape))
    return false;
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::with_storage(x.dtype(), [&](auto z) {
    using T = decltype(z);
    std::shared_ptr<Buffer> reordered_w;
    const T* weights = filters_in<T>(b, w, shape.x_last, shape.oc, shape.c, g.kh * g.kw, &reordered_w);
    auto partial = b.allocate(static_cast<size_t>(cuda::direct_bias_gradient_rows(shape)) * shape.oc * sizeof(float));
    cuda::direct_bias_gradient(b.stream(), shape, x.dense_as<const T>(), weights, bs.data_as<const float>(),
                               dy.dense_as<const T>(), neuron, db.data_as<float>(), static_cast<float*>(partial->data()));
  });
  return true;
}

NNGRAPH_KERNEL(ConvolutionGradientKernel, CUDA, convolution_gradient);
NNGRAPH_KERNEL(ConvolutionBiasGradientKernel, CUDA, convolution_bias_gradient);
NNGRAPH_CHANNELS_LAST(ConvolutionGradientKernel, CUDA);

}  // namespace
}  // namespace nngraph
