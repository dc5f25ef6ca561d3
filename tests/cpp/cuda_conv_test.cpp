// The cuda convolutions (cuDNN, our direct and tensor-core kernels, products over windows' rows,
// widened channels) against the cpu backend on the same random inputs (skipped without a GPU).
#ifdef NNGRAPH_HAVE_CUDA
#include <cstdlib>
#include <string>

#include "cuda_vs_cpu.h"

using namespace nngraph;
using nngraph::testing_cuda::CudaVsCpu;

TEST_F(CudaVsCpu, ConvolutionForwardAndGradientSymmetricAndAsymmetricPadding) {
  struct Case {
    int n, c, h, w, o, kh, kw, s, d, g, pt, pl, oh, ow;
  };
  for (const Case k : {Case{3, 4, 9, 9, 6, 3, 3, 1, 1, 2, 1, 1, 9, 9}, Case{2, 3, 8, 7, 5, 4, 4, 2, 1, 1, 1, 1, 4, 4},
                       Case{2, 2, 7, 7, 4, 3, 3, 1, 2, 1, 0, 0, 3, 3}}) {
    const ConvGeometry g{k.kh, k.kw, k.s, k.s, k.d, k.d, k.g, k.pt, k.pl};
    const auto xv = random(static_cast<size_t>(k.n) * k.c * k.h * k.w);
    const auto wv = random(static_cast<size_t>(k.o) * (k.c / k.g) * k.kh * k.kw), bv = random(k.o);
    auto [xc, xg] = pair(k.n, {k.c, k.h, k.w}, xv);
    auto [yc, yg] = empty(k.n, {k.o, k.oh, k.ow});
    auto wg = on_gpu(wv), bg = on_gpu(bv);
    const auto tanh = NeuronDescriptor::make(NeuronType::TanH);
    dispatch<ConvolutionKernel>(cpu(), g, xc, t(wv), t(bv), tanh, yc);
    dispatch<ConvolutionKernel>(gpu(), g, xg, t(wg), t(bg), tanh, yg);
    near(host(yc), host(yg));
    const auto dyv = random(yc.descriptor().count());
    auto [dyc, dyg] = pair(k.n, {k.o, k.oh, k.ow}, dyv);
    auto [dxc, dxg] = empty(k.n, {k.c, k.h, k.w});
    std::vector<float> dwc(wv.size()), dbc(k.o);
    auto dwg = gpu().allocate(wv.size() * 4), dbg = gpu().allocate(k.o * 4);
    dispatch<ConvolutionGradientKernel>(cpu(), g, xc, t(wv), dyc, yc, tanh, dxc, t(dwc), t(dbc));
    dispatch<ConvolutionGradientKernel>(gpu(), g, xg, t(wg), dyg, yg, tanh, dxg,
                               t(dwg), t(dbg));
    near(host(dxc), host(dxg));
    near(dwc, host(dwg), 1e-3f);
    near(dbc, host(dbg), 1e-3f);
  }
}

// Channels-last convolutions as products over their windows' rows (ConvPlan::kProduct, set on
// the plan: the backend runs them only where they beat cuDNN): 1×1, strided and not, every
// pass; few taps (a stem's 3×3 on 3 channels, padded, strided, dilated), forward and weights.
// And every pass on channels widened to 32 (ConvPlan::kWidened: 24 channels, 96-byte pixels;
// 21, whose 84-byte pixels are gathered 16 bytes a thread), strided and not.
TEST_F(CudaVsCpu, ProductConvolutionsOfChannelsLast) {
  struct Case {
    int n, c, h, w, o, k, s, d, pad, oh, ow;
    bool widened = false;
  };
  for (const Case k : {Case{2, 8, 7, 6, 5, 1, 2, 1, 0, 4, 3}, Case{3, 6, 5, 4, 4, 1, 1, 1, 0, 5, 4},
                       Case{2, 3, 8, 8, 6, 1, 3, 1, 0, 3, 3}, Case{2, 3, 9, 8, 16, 3, 1, 1, 1, 9, 8},
                       Case{2, 3, 9, 8, 8, 3, 2, 2, 1, 4, 3}, Case{2, 24, 7, 6, 16, 3, 1, 1, 1, 7, 6, true},
                       Case{2, 21, 5, 5, 8, 3, 2, 1, 1, 3, 3, true}}) {
    const ConvGeometry g{k.k, k.k, k.s, k.s, k.d, k.d, 1, k.pad, k.pad};
    const ImageShape in{k.c, k.h, k.w}, out{k.o, k.oh, k.ow};
    ConvPlan& plan = conv_plan(gpu(), g, k.n, in, out, DType::Float32, true);
    const int chosen = k.widened ? ConvPlan::kWidened : ConvPlan::kProduct;
    ASSERT_EQ(conv_rows::widened_channels(g, in), k.widened ? 32 : 0);
    plan.forward = plan.weight_gradient = chosen;
    if (k.k == 1 || k.widened) plan.input_gradient = chosen;
    channels_last_convolution(k.n, g, in, out, 1e-4f, 1e-3f);
    EXPECT_EQ(plan.forward, chosen);
    EXPECT_EQ(plan.weight_gradient, chosen);
    if (k.widened) {
      EXPECT_EQ(plan.input_gradient, chosen);
    }
  }
}

// Channels-last float32 convolutions on our tensor-core kernels (ConvPlan::kTensor, set on the
// plan), exact and tf32: 24 channels padded as the speed run's first convolution, a narrow
// output; stride 2 (no input gradient of ours); dilation with outputs wider than a tile; four
// and eight channels over 1,024 pixels, weight gradients split over their k (in tf32 the
// second, and the first two, on the 64 × 256 tile); in tf32, eight channels over 131,072
// pixels on the 256-row tiles (forward 40 columns, input gradient 8); 32 and 64 channels whose
// weight gradients take the 288-column tiles in tf32 (32 and 64 rows, one and two tiles wide),
// split over their k, without a neuron: tanh's slope would carry tf32's error in a forward sum
// of 576 terms into dz, beyond the weight gradient's tolerance.
TEST_F(CudaVsCpu, TensorConvolutionsOfChannelsLast) {
  struct Case {
    int n, c, h, w, o, k, s, d, pad, oh, ow;
    NeuronType neuron = NeuronType::TanH;
  };
  for (const bool tf32 : {false, true})
    for (const Case k : {Case{2, 24, 9, 8, 16, 3, 1, 1, 1, 9, 8}, Case{2, 8, 9, 9, 36, 3, 2, 1, 1, 5, 5},
                         Case{3, 12, 10, 10, 72, 3, 1, 2, 2, 10, 10}, Case{4, 4, 16, 16, 8, 3, 1, 1, 1, 16, 16},
                         Case{4, 8, 16, 16, 24, 3, 1, 1, 1, 16, 16}, Case{8, 8, 128, 128, 40, 3, 1, 1, 1, 128, 128},
                         Case{4, 32, 12, 12, 32, 3, 1, 1, 1, 12, 12, NeuronType::None},
                         Case{6, 64, 10, 10, 48, 3, 1, 1, 1, 10, 10, NeuronType::None}}) {
      ConvGeometry g{k.k, k.k, k.s, k.s, k.d, k.d, 1, k.pad, k.pad};
      g.tf32 = tf32;
      const ImageShape in{k.c, k.h, k.w}, out{k.o, k.oh, k.ow};
      cuda::ConvShape d{k.n, k.c, k.h, k.w, k.o, k.oh, k.ow, k.k, k.k, k.s, k.s, k.d, k.d, k.pad, k.pad};
      d.x_last = d.y_last = true;
      const auto buffer = gpu().allocate(16);  // 16-byte aligned, as every image is
      const float* aligned = static_cast<const float*>(buffer->data());
      ASSERT_TRUE(cuda::tensor_convolution_fits(d, aligned, aligned));
      ASSERT_TRUE(cuda::tensor_weight_gradient_fits(d, aligned, aligned));
      ASSERT_EQ(cuda::tensor_input_gradient_fits(d, aligned), k.s == 1);
      ASSERT_FALSE(cuda::tensor_weight_gradient_fits(d, aligned + 1, aligned));
      ConvPlan& plan = conv_plan(gpu(), g, k.n, in, out, DType::Float32, true);
      plan.forward = plan.weight_gradient = ConvPlan::kTensor;
      if (k.s == 1) plan.input_gradient = ConvPlan::kTensor;
      channels_last_convolution(k.n, g, in, out, tf32 ? 2e-2f : 1e-4f, tf32 ? 5e-3f : 1e-3f, k.neuron);
      EXPECT_EQ(plan.forward, ConvPlan::kTensor);
      EXPECT_EQ(plan.weight_gradient, ConvPlan::kTensor);
    }
}

// Our direct kernels, called directly: the backend runs them only where they beat cuDNN.
TEST_F(CudaVsCpu, DirectConvolutionAndWeightGradient) {
  struct Case {
    int n, c, h, w, o, kh, kw, s, d, pt, pl, oh, ow;
    NeuronType neuron;
    bool bias;
  };
  // Tap counts 25, 18, 64 and 9 (each kernel variant), channel tiles full, partial and two,
  // strides, dilations and asymmetric padding.
  for (const Case k : {Case{3, 1, 12, 12, 32, 5, 5, 1, 1, 2, 2, 12, 12, NeuronType::ReLU, true},
                       Case{2, 2, 11, 10, 12, 3, 3, 2, 2, 1, 1, 5, 4, NeuronType::TanH, true},
                       Case{2, 4, 8, 8, 40, 4, 4, 1, 1, 0, 0, 5, 5, NeuronType::None, false},
                       Case{5, 1, 7, 9, 5, 3, 3, 1, 1, 0, 2, 5, 9, NeuronType::Sigmoid, true}}) {
    auto [g, d, xv, wv, bv, xc, xg, yc, yg, wg, bg] =
        conv(k.n, k.c, k.h, k.w, k.o, k.kh, k.kw, k.s, k.d, k.pt, k.pl, k.oh, k.ow);
    ASSERT_TRUE(cuda::direct_convolution_fits(d));
    const auto nd = NeuronDescriptor::make(k.neuron);
    const float* bias_g = k.bias ? static_cast<float*>(bg->data()) : nullptr;
    dispatch<ConvolutionKernel>(cpu(), g, xc, t(wv), k.bias ? t(bv) : Tensor(), nd, yc);
    cuda::direct_convolution(gpu().stream(), d, xg.data_as<float>(), static_cast<float*>(wg->data()), bias_g, nd,
                             yg.data_as<float>());
    near(host(yc), host(yg));
    const auto dyv = random(yc.descriptor().count());
    auto [dyc, dyg] = pair(k.n, {k.o, k.oh, k.ow}, dyv);
    auto partial = gpu().allocate(static_cast<size_t>(cuda::direct_weight_gradient_rows(d)) * (wv.size() + k.o) * 4);
    auto dwg = gpu().allocate(wv.size() * 4), dbg = gpu().allocate(k.o * 4);
    // With the neuron's derivative and the bias gradient, then from dz itself without them.
    std::vector<float> dwc(wv.size()), dbc(k.o);
    dispatch<ConvolutionGradientKernel>(cpu(), g, xc, t(wv), dyc, yc, nd, Tensor(), t(dwc), t(dbc));
    cuda::direct_weight_gradient(gpu().stream(), d, xg.data_as<float>(), dyg.data_as<float>(), yg.data_as<float>(), nd,
                                 static_cast<float*>(dwg->data()), static_cast<float*>(dbg->data()),
                                 static_cast<float*>(partial->data()));
    near(dwc, host(dwg), 1e-3f);
    near(dbc, host(dbg), 1e-3f);
    dispatch<ConvolutionGradientKernel>(cpu(), g, xc, t(wv), dyc, Tensor(), NeuronDescriptor{}, Tensor(), t(dwc), Tensor());
    cuda::direct_weight_gradient(gpu().stream(), d, xg.data_as<float>(), dyg.data_as<float>(), static_cast<const float*>(nullptr), nd,
                                 static_cast<float*>(dwg->data()), nullptr, static_cast<float*>(partial->data()));
    near(dwc, host(dwg), 1e-3f);
  }
}

// The direct weight gradient on a half graph's operands: channels-last float16 x, dy and y
// (one channel, and several: a tap offset per channel), summed in float32, written as float16;
// dy read in packs of channels (32 and 40 of them) and one by one (12).
TEST_F(CudaVsCpu, DirectWeightGradientOfChannelsLastHalf) {
  struct Case {
    int n, c, h, w, o, s, oh, ow;
  };
  for (const Case k : {Case{4, 1, 14, 13, 32, 1, 14, 13}, Case{3, 3, 9, 10, 40, 2, 5, 5}, Case{2, 2, 8, 8, 12, 1, 8, 8}}) {
    auto [g, d, xv, wv, bv, xc, xg, yc, yg, wg, bg] = conv(k.n, k.c, k.h, k.w, k.o, 3, 3, k.s, 1, 1, 1, k.oh, k.ow);
    ASSERT_TRUE(cuda::direct_convolution_fits(d));
    const auto x = rounded(xv), dy = rounded(random(static_cast<size_t>(k.n) * k.o * k.oh * k.ow));
    const auto y = rounded(random(dy.size()));
    Image xh = Image::allocate({k.n, {k.c, k.h, k.w}, DType::Float32}, Device());
    xh.copy_from_host(x.data());
    auto [dyc, unused_dy] = pair(k.n, {k.o, k.oh, k.ow}, dy);
    auto [ycpu, unused_y] = pair(k.n, {k.o, k.oh, k.ow}, y);
    const auto relu = NeuronDescriptor::make(NeuronType::ReLU);
    std::vector<float> dwc(wv.size()), dbc(k.o);
    dispatch<ConvolutionGradientKernel>(cpu(), g, xh, t(wv), dyc, ycpu, relu, Tensor(), t(dwc), t(dbc));
    d.x_last = d.y_last = true;
    const auto xg16 = half_nhwc(x, k.n, k.c, k.h * k.w), dyg16 = half_nhwc(dy, k.n, k.o, k.oh * k.ow);
    const auto yg16 = half_nhwc(y, k.n, k.o, k.oh * k.ow);
    auto partial = gpu().allocate(static_cast<size_t>(cuda::direct_weight_gradient_rows(d)) * (wv.size() + k.o) * 4);
    auto dwg = gpu().allocate(wv.size() * 2), dbg = gpu().allocate(k.o * 4);
    cuda::direct_weight_gradient(gpu().stream(), d, static_cast<const __half*>(xg16->data()),
                                 static_cast<const __half*>(dyg16->data()), static_cast<const __half*>(yg16->data()),
                                 relu, static_cast<__half*>(dwg->data()), static_cast<float*>(dbg->data()),
                                 static_cast<float*>(partial->data()));
    std::vector<uint16_t> dw16(wv.size());
    gpu().copy_to_host(dw16.data(), dwg->data(), dwg->bytes());
    std::vector<float> dw(wv.size());
    for (size_t i = 0; i < dw.size(); ++i) dw[i] = half_to_float(dw16[i]);
    near(dwc, dw, 2e-3f);  // float16's rounding of sums of a few hundred products
    near(dbc, host(dbg), 1e-4f);
  }
}

// The direct forward pass on a half graph's operands: channels-last x and y, KRSC weights,
// the bias and neuron in float32; bfloat16 and float16. y is stored in 16-byte packs of
// channels (24: the speed run's whitening layer, one tile of 24; 40: tiles of 32 and 8) and
// one by one (12).
TEST_F(CudaVsCpu, DirectConvolutionOfChannelsLastHalf) {
  struct Case {
    int n, c, h, w, o, k, s, pad, oh, ow;
    bool bf16;
  };
  for (const Case k : {Case{256, 3, 32, 32, 24, 2, 1, 0, 31, 31, true}, Case{3, 3, 9, 10, 40, 3, 2, 1, 5, 5, false},
                       Case{2, 1, 8, 8, 12, 3, 1, 1, 8, 8, true}}) {
    auto [g, d, xv, wv, bv, xc, xg, yc, yg, wg, bg] = conv(k.n, k.c, k.h, k.w, k.o, k.k, k.k, k.s, 1, k.pad, k.pad, k.oh, k.ow);
    ASSERT_TRUE(cuda::direct_convolution_fits(d));
    const auto x = rounded(xv, k.bf16), w = rounded(wv, k.bf16);
    Image xr = Image::allocate({k.n, {k.c, k.h, k.w}, DType::Float32}, Device());
    xr.copy_from_host(x.data());
    const auto gelu = NeuronDescriptor::make(NeuronType::GELU);
    dispatch<ConvolutionKernel>(cpu(), g, xr, t(w), t(bv), gelu, yc);
    d.x_last = d.y_last = true;
    // OIHW weights as KRSC: each output channel's taps as one image of c channels.
    const auto x16 = half_nhwc(x, k.n, k.c, k.h * k.w, k.bf16), w16 = half_nhwc(w, k.o, k.c, k.k * k.k, k.bf16);
    const size_t count = static_cast<size_t>(k.n) * k.o * k.oh * k.ow;
    auto y16 = gpu().allocate(count * 2);
    const float* bias = static_cast<const float*>(bg->data());
    if (k.bf16)
      cuda::direct_convolution(gpu().stream(), d, static_cast<const __nv_bfloat16*>(x16->data()),
                               static_cast<const __nv_bfloat16*>(w16->data()), bias, gelu,
                               static_cast<__nv_bfloat16*>(y16->data()));
    else
      cuda::direct_convolution(gpu().stream(), d, static_cast<const __half*>(x16->data()),
                               static_cast<const __half*>(w16->data()), bias, gelu, static_cast<__half*>(y16->data()));
    std::vector<uint16_t> got16(count);
    gpu().copy_to_host(got16.data(), y16->data(), y16->bytes());
    const auto want = host(yc);
    std::vector<float> got(count);
    const int plane = k.oh * k.ow;
    for (int i = 0; i < k.n; ++i)
      for (int o = 0; o < k.o; ++o)
        for (int p = 0; p < plane; ++p) {
          const uint16_t v = got16[(static_cast<size_t>(i) * plane + p) * k.o + o];
          got[(static_cast<size_t>(i) * k.o + o) * plane + p] = k.bf16 ? bfloat16_to_float(v) : half_to_float(v);
        }
    near(rounded(want, k.bf16), got, k.bf16 ? 8e-3f : 1e-3f);  // a rounding of the float32 sum at most
  }
}

// The bias gradient through GELU' of the convolution computed again (a GELU folded into a
// convolution of few taps), against the cpu's gradient from the stored pre-activation: NCHW
// with a partial channel tile, stride and padding; the speed run's whitening layer
// channels-last in float32 and in bfloat16 (dy read in packs). Refused, with nothing written,
// for a neuron whose derivative comes from its output and for layouts that differ.
TEST_F(CudaVsCpu, ConvolutionBiasGradientComputesTheResultAgain) {
  struct Case {
    int n, c, h, w, o, k, s, pad, oh, ow;
    bool last, bf16;
  };
  const auto gelu = NeuronDescriptor::make(NeuronType::GELU);
  for (const Case k : {Case{3, 2, 9, 8, 5, 3, 2, 1, 5, 4, false, false}, Case{64, 3, 32, 32, 24, 2, 1, 0, 31, 31, true, false},
                       Case{64, 3, 32, 32, 24, 2, 1, 0, 31, 31, true, true}}) {
    auto [g, d, xv, wv, bv, xc, xg, yc, yg, wg, bg] = conv(k.n, k.c, k.h, k.w, k.o, k.k, k.k, k.s, 1, k.pad, k.pad, k.oh, k.ow);
    const auto x = k.bf16 ? rounded(xv, true) : xv, w = k.bf16 ? rounded(wv, true) : wv;
    const auto dy = k.bf16 ? rounded(random(static_cast<size_t>(k.n) * k.o * k.oh * k.ow), true)
                           : random(static_cast<size_t>(k.n) * k.o * k.oh * k.ow);
    auto [xr, unused_x] = pair(k.n, {k.c, k.h, k.w}, x);
    auto [dyc, unused_dy] = pair(k.n, {k.o, k.oh, k.ow}, dy);
    dispatch<ConvolutionKernel>(cpu(), g, xr, t(w), t(bv), NeuronDescriptor{}, yc);
    std::vector<float> dbc(k.o);
    dispatch<ConvolutionGradientKernel>(cpu(), g, xr, t(w), dyc, yc, gelu, Tensor(), Tensor(), t(dbc));
    const DType dt = k.bf16 ? DType::BFloat16 : DType::Float32;
    const Layout layout = k.last ? Layout::NHWC : Layout::NCHW;
    auto stored = [&](const std::vector<float>& v, int n, int c, int hw) {  // as the step stores it
      if (k.bf16) return half_nhwc(v, n, c, hw, true);
      return on_gpu(k.last ? channels_last(v, n, ImageShape{c, hw, 1}, false) : v);
    };
    const auto x_g = stored(x, k.n, k.c, k.h * k.w), dy_g = stored(dy, k.n, k.o, k.oh * k.ow);
    const auto w_g = stored(w, 1, 1, static_cast<int>(w.size()));  // OIHW, reordered by the kernel where NHWC
    const Tensor X(x_g->data(), k.n, {k.c, k.h, k.w}, dt, layout), DY(dy_g->data(), k.n, {k.o, k.oh, k.ow}, dt, layout);
    const Tensor W = Tensor::vector(w_g->data(), w.size(), dt);
    auto dbg = on_gpu(std::vector<float>(k.o, 7.f));
    ASSERT_TRUE(dispatch<ConvolutionBiasGradientKernel>(gpu(), g, X, W, t(bg), DY, gelu, t(dbg)));
    near(dbc, host(dbg), k.bf16 ? 2e-2f : 1e-3f, std::max(1.f, rms(dbc)));
    const auto untouched = host(dbg);
    EXPECT_FALSE(dispatch<ConvolutionBiasGradientKernel>(gpu(), g, X, W, t(bg), DY,
                                                         NeuronDescriptor::make(NeuronType::ReLU), t(dbg)));
    if (k.last) {
      const Tensor nchw(x_g->data(), k.n, {k.c, k.h, k.w}, dt, Layout::NCHW);
      EXPECT_FALSE(dispatch<ConvolutionBiasGradientKernel>(gpu(), g, nchw, W, t(bg), DY, gelu, t(dbg)));
    }
    EXPECT_EQ(host(dbg), untouched);
  }
}

// Our tensor-core products, called directly, exact (three tf32 products) and tf32 (one): the
// exact ones agree with float32 as closely as cuDNN's FMA algorithms, far closer than tf32.
TEST_F(CudaVsCpu, TensorConvolutionPasses) {
  struct Case {
    int n, c, h, w, o, kh, kw, s, d, pt, pl, oh, ow;
    NeuronType neuron;
  };
  // Tails in every product dimension, narrow and two-tile outputs, stride, dilation,
  // asymmetric padding, and a weight gradient split over its k.
  for (const Case k : {Case{3, 32, 12, 11, 48, 5, 5, 1, 1, 2, 2, 12, 10, NeuronType::TanH},
                       Case{2, 16, 9, 8, 70, 3, 3, 2, 1, 1, 0, 5, 4, NeuronType::ReLU},
                       Case{2, 48, 10, 10, 16, 3, 3, 1, 2, 2, 2, 10, 10, NeuronType::None},
                       Case{16, 16, 14, 14, 32, 3, 3, 1, 1, 1, 1, 14, 14, NeuronType::None}}) {
    auto [g, d, xv, wv, bv, xc, xg, yc, yg, wg, bg] =
        conv(k.n, k.c, k.h, k.w, k.o, k.kh, k.kw, k.s, k.d, k.pt, k.pl, k.oh, k.ow);
    ASSERT_TRUE(cuda::tensor_convolution_fits(d, xg.data_as<float>(), static_cast<float*>(wg->data())));
    const auto nd = NeuronDescriptor::make(k.neuron);
    dispatch<ConvolutionKernel>(cpu(), g, xc, t(wv), t(bv), nd, yc);
    const auto dyv = random(yc.descriptor().count());
    auto [dyc, dyg] = pair(k.n, {k.o, k.oh, k.ow}, dyv);
    ASSERT_TRUE(cuda::tensor_weight_gradient_fits(d, xg.data_as<float>(), dyg.data_as<float>()));
    ASSERT_EQ(cuda::tensor_input_gradient_fits(d, dyg.data_as<float>()), k.s == 1);
    auto [dxc, dxg] = empty(k.n, {k.c, k.h, k.w});
    std::vector<float> dwc(wv.size());
    dispatch<ConvolutionGradientKernel>(cpu(), g, xc, t(wv), dyc, Tensor(), NeuronDescriptor{}, dxc, t(dwc), Tensor());
    const auto dwg = gpu().allocate(wv.size() * 4), reordered = gpu().allocate(wv.size() * 4);
    const size_t partial_floats = cuda::tensor_weight_gradient_partial(d);
    const auto partial = gpu().allocate(std::max<size_t>(1, partial_floats) * 4);
    const int passes = k.s == 1 ? 3 : 2;  // forward, weight gradient, input gradient (stride 1)
    float error[2][3] = {};               // [exact][pass]
    for (const bool exact : {false, true}) {
      const float* w = static_cast<float*>(wg->data());
      cuda::tensor_convolution(gpu().stream(), d, exact, xg.data_as<float>(), w, static_cast<float*>(bg->data()), nd,
                               yg.data_as<float>(), static_cast<float*>(reordered->data()));
      cuda::tensor_weight_gradient(gpu().stream(), d, exact, xg.data_as<float>(), dyg.data_as<float>(),
                                   static_cast<float*>(dwg->data()),
                                   partial_floats ? static_cast<float*>(partial->data()) : nullptr);
      error[exact][0] = worst(host(yc), host(yg));
      error[exact][1] = worst(dwc, host(dwg));
      if (passes == 3) {
        cuda::tensor_input_gradient(gpu().stream(), d, exact, dyg.data_as<float>(), w, dxg.data_as<float>(),
                                    static_cast<float*>(reordered->data()));
        error[exact][2] = worst(host(dxc), host(dxg));
      }
    }
    for (int pass = 0; pass < passes; ++pass) {
      EXPECT_LT(error[1][pass], 5e-5f) << "pass " << pass;
      EXPECT_LT(error[0][pass], 2e-2f) << "pass " << pass;
      EXPECT_GT(error[0][pass], 20 * error[1][pass]) << "pass " << pass;  // the exact path adds the remainders
    }
  }
}
namespace {
// How many graph-API plans each pass of a plan has: forward, input gradient, weight gradient.
std::array<int, 3> plans_of(ConvPlan& plan) {
  CudaBackend& b = cuda_backend(0);
  return {plan.engines(b, ConvEngines::kForward).size(), plan.engines(b, ConvEngines::kInputGradient).size(),
          plan.engines(b, ConvEngines::kWeightGradient).size()};
}
}  // namespace

// cuDNN's graph-API plans (ConvEngines), each set on its pass's plan and run through the
// kernels, against the cpu on the same bfloat16 values: channels-last 3×3 convolutions, padded,
// at strides 1 and 2, with a bias; every plan of every pass. The heuristics offer some for each.
TEST_F(CudaVsCpu, GraphApiConvolutionPlans) {
  struct Case {
    int n, c, h, w, o, s, oh, ow;
  };
  for (const Case k : {Case{2, 16, 8, 8, 32, 1, 8, 8}, Case{3, 32, 9, 9, 16, 2, 5, 5}}) {
    auto [g, d, xv, wv, bv, xc, xg, yc, yg, wg, bg] = conv(k.n, k.c, k.h, k.w, k.o, 3, 3, k.s, 1, 1, 1, k.oh, k.ow);
    const ImageShape in{k.c, k.h, k.w}, out{k.o, k.oh, k.ow};
    const int hw = k.h * k.w, ohw = k.oh * k.ow;
    const auto x = rounded(xv, true), w = rounded(wv, true);
    const auto dyv = rounded(random(static_cast<size_t>(k.n) * k.o * ohw), true);
    const auto none = NeuronDescriptor::make(NeuronType::None);
    auto [xr, unused_x] = pair(k.n, in, x);
    auto [dyr, unused_dy] = pair(k.n, out, dyv);
    auto [dxc, unused_dx] = empty(k.n, in);
    std::vector<float> dwc(w.size()), dbc(k.o);
    dispatch<ConvolutionKernel>(cpu(), g, xr, t(w), t(bv), none, yc);
    dispatch<ConvolutionGradientKernel>(cpu(), g, xr, t(w), dyr, yc, none, dxc, t(dwc), t(dbc));
    // The device's operands: bfloat16 channels-last images, OIHW bfloat16 weights.
    const auto x16 = half_nhwc(x, k.n, k.c, hw, true), w16 = half_nhwc(w, k.o, 1, k.c * 9, true);
    const auto dy16 = half_nhwc(dyv, k.n, k.o, ohw, true);
    const auto y16 = gpu().allocate(dy16->bytes()), dx16 = gpu().allocate(x16->bytes()),
               dw16 = gpu().allocate(w16->bytes()), db = gpu().allocate(k.o * sizeof(float));
    auto image = [&](const std::shared_ptr<Buffer>& b, ImageShape s) {
      return Tensor(b->data(), k.n, s, DType::BFloat16, Layout::NHWC);
    };
    const Tensor X = image(x16, in), Y = image(y16, out), DY = image(dy16, out), DX = image(dx16, in);
    const Tensor W = Tensor::vector(w16->data(), w.size(), DType::BFloat16),
                 DW = Tensor::vector(dw16->data(), w.size(), DType::BFloat16);
    // Device bfloat16 values as NCHW floats (NHWC images where c > 1).
    auto back = [&](const std::shared_ptr<Buffer>& b, int n, int c, int pixels) {
      std::vector<uint16_t> v(b->bytes() / 2);
      gpu().copy_to_host(v.data(), b->data(), b->bytes());
      std::vector<float> r(v.size());
      for (int i = 0; i < n; ++i)
        for (int ch = 0; ch < c; ++ch)
          for (int p = 0; p < pixels; ++p)
            r[(static_cast<size_t>(i) * c + ch) * pixels + p] =
                bfloat16_to_float(v[(static_cast<size_t>(i) * pixels + p) * c + ch]);
      return r;
    };
    ConvPlan& plan = conv_plan(gpu(), g, k.n, in, out, DType::BFloat16, true);
    const auto [forward, data, filter] = plans_of(plan);
    ASSERT_GT(std::min({forward, data, filter}), 0);
    for (int i = 0; i < forward; ++i) {
      plan.forward = ConvPlan::engine(i);
      dispatch<ConvolutionKernel>(gpu(), g, X, W, t(bg), none, Y);
      near(rounded(host(yc), true), back(y16, k.n, k.o, ohw), 8e-3f);  // a rounding of the sum at most
    }
    for (int i = 0; i < std::max(data, filter); ++i) {
      plan.input_gradient = ConvPlan::engine(std::min(i, data - 1));
      plan.weight_gradient = ConvPlan::engine(std::min(i, filter - 1));
      dispatch<ConvolutionGradientKernel>(gpu(), g, X, W, DY, Y, none, DX, DW, t(db));
      near(rounded(host(dxc), true), back(dx16, k.n, k.c, hw), 8e-3f);
      near(rounded(dwc, true), back(dw16, k.o, 1, k.c * 9), 8e-3f);
      near(dbc, host(db), 1e-3f);
    }
    EXPECT_EQ(plan.forward, ConvPlan::engine(forward - 1));  // still as set: nothing timed them away
  }
}
// The same in float32, NCHW and channels-last, a plan each per math: exact (CUDNN_FMA_MATH),
// where every plan must agree with the cpu as cuDNN's FMA algorithms do, so none runs on tf32;
// and tf32, within its rounding.
TEST_F(CudaVsCpu, GraphApiConvolutionPlansInFloat32) {
  const int n = 2, c = 16, h = 8, w = 8, o = 32, hw = h * w;
  for (const bool tf32 : {false, true})
    for (const bool last : {false, true}) {
      SCOPED_TRACE(std::string(tf32 ? "tf32" : "exact") + (last ? ", channels-last" : ", NCHW"));
      auto [g, d, xv, wv, bv, xc, xg, yc, yg, wg, bg] = conv(n, c, h, w, o, 3, 3, 1, 1, 1, 1, h, w);
      g.tf32 = tf32;
      const ImageShape shape{c, h, w}, out{o, h, w};
      const auto dyv = random(static_cast<size_t>(n) * o * hw);
      const auto none = NeuronDescriptor::make(NeuronType::None);
      auto [dyc, unused_dy] = pair(n, out, dyv);
      auto [dxc, unused_dx] = empty(n, shape);
      std::vector<float> dwc(wv.size()), dbc(o);
      dispatch<ConvolutionKernel>(cpu(), g, xc, t(wv), t(bv), none, yc);
      dispatch<ConvolutionGradientKernel>(cpu(), g, xc, t(wv), dyc, yc, none, dxc, t(dwc), t(dbc));
      // NCHW values in the test's layout (`to`), or the test's layout's as NCHW.
      auto moved = [&](const std::vector<float>& v, int channels, bool to) {
        if (!last) return v;
        std::vector<float> r(v.size());
        for (int i = 0; i < n; ++i)
          for (int ch = 0; ch < channels; ++ch)
            for (int p = 0; p < hw; ++p) {
              const size_t nchw = (static_cast<size_t>(i) * channels + ch) * hw + p;
              const size_t nhwc = (static_cast<size_t>(i) * hw + p) * channels + ch;
              r[to ? nhwc : nchw] = v[to ? nchw : nhwc];
            }
        return r;
      };
      auto laid = [&](const std::vector<float>& v, int channels) { return moved(v, channels, true); };
      auto unlaid = [&](const std::shared_ptr<Buffer>& b, int channels) { return moved(host(b), channels, false); };
      const auto xb = on_gpu(laid(xv, c)), dyb = on_gpu(laid(dyv, o));
      const auto yb = gpu().allocate(dyb->bytes()), dxb = gpu().allocate(xb->bytes());
      const auto dwb = gpu().allocate(wv.size() * sizeof(float)), db = gpu().allocate(o * sizeof(float));
      const Layout layout = last ? Layout::NHWC : Layout::NCHW;
      const Tensor X(xb->data(), n, shape, DType::Float32, layout), Y(yb->data(), n, out, DType::Float32, layout);
      const Tensor DY(dyb->data(), n, out, DType::Float32, layout), DX(dxb->data(), n, shape, DType::Float32, layout);
      ConvPlan& plan = conv_plan(gpu(), g, n, shape, out, DType::Float32, last);
      const auto [forward, data, filter] = plans_of(plan);
      ASSERT_GT(std::min({forward, data, filter}), 0);
      // Exact: as close as float32 sums in another order; tf32: a 10-bit mantissa's products.
      const float tolerance = tf32 ? 2e-2f : 5e-5f;
      for (int i = 0; i < forward; ++i) {
        plan.forward = ConvPlan::engine(i);
        dispatch<ConvolutionKernel>(gpu(), g, X, t(wg), t(bg), none, Y);
        EXPECT_LT(worst(host(yc), unlaid(yb, o)), tolerance) << "forward plan " << i;
      }
      for (int i = 0; i < std::max(data, filter); ++i) {
        plan.input_gradient = ConvPlan::engine(std::min(i, data - 1));
        plan.weight_gradient = ConvPlan::engine(std::min(i, filter - 1));
        dispatch<ConvolutionGradientKernel>(gpu(), g, X, t(wg), DY, Y, none, DX, t(dwb), t(db));
        EXPECT_LT(worst(host(dxc), unlaid(dxb, c)), tolerance) << "input gradient plan " << i;
        EXPECT_LT(worst(dwc, host(dwb)), tolerance) << "weight gradient plan " << i;
        near(dbc, host(db), 1e-3f);
      }
    }
}
// NNGRAPH_TUNING_LOG=1: the first forward and gradient of a new shape print, for each timed
// pass, every candidate's name and least time and the one chosen, which is one of them.
TEST_F(CudaVsCpu, TuningLogNamesTheCandidatesAndTheChoice) {
  const ConvGeometry g{3, 3, 1, 1, 1, 1, 1, 1, 1};
  const int n = 3, c = 5, h = 11, w = 7, o = 7;  // a shape no other test times
  auto [xc, xg] = pair(n, {c, h, w}, random(static_cast<size_t>(n) * c * h * w));
  auto [dyc, dyg] = pair(n, {o, h, w}, random(static_cast<size_t>(n) * o * h * w));
  auto [yc, yg] = empty(n, {o, h, w});
  auto [dxc, dxg] = empty(n, {c, h, w});
  auto wg = on_gpu(random(static_cast<size_t>(o) * c * 9)), bg = on_gpu(random(o));
  auto dwg = gpu().allocate(static_cast<size_t>(o) * c * 9 * 4), dbg = gpu().allocate(o * 4);
  const auto none = NeuronDescriptor::make(NeuronType::None);
  ::setenv("NNGRAPH_TUNING_LOG", "1", 1);
  ::testing::internal::CaptureStderr();
  dispatch<ConvolutionKernel>(gpu(), g, xg, t(wg), t(bg), none, yg);
  dispatch<ConvolutionGradientKernel>(gpu(), g, xg, t(wg), dyg, yg, none, dxg, t(dwg), t(dbg));
  const std::string log = ::testing::internal::GetCapturedStderr();
  ::unsetenv("NNGRAPH_TUNING_LOG");
  for (const char* pass : {"forward", "weight gradient", "input gradient"}) {
    const std::string head =
        std::string("nngraph tuning convolution ") + pass + " 3x5x11x7 -> 7x11x7 window 3x3 stride 1x1 float32 NCHW:";
    const size_t at = log.find(head);
    ASSERT_NE(at, std::string::npos) << pass << " in:\n" << log;
    const std::string line = log.substr(at + head.size(), log.find('\n', at) - at - head.size());
    EXPECT_NE(line.find(" cudnn algorithm "), std::string::npos) << line;
    const size_t chose = line.find("; chose ");
    ASSERT_NE(chose, std::string::npos) << line;
    const std::string choice = line.substr(chose + 8);
    EXPECT_NE(line.substr(0, chose).find(" " + choice + " "), std::string::npos) << line;
    EXPECT_NE(line.find(" ms"), std::string::npos) << line;
  }
}
#endif  // NNGRAPH_HAVE_CUDA
