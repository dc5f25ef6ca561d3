// Every cuda kernel against the cpu backend on the same random inputs (skipped without a GPU).
#ifdef NNGRAPH_HAVE_CUDA
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/conv_plan.h"
#include "backends/cuda/conv_rows.h"
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "nngraph/error.h"
#include "nngraph/nodes.h"
#include "ops/arithmetic.h"
#include "ops/cast.h"
#include "ops/optimizer.h"
#include "ops/concatenation.h"
#include "ops/conv.h"
#include "ops/dropout.h"
#include "ops/loss.h"
#include "ops/neuron.h"
#include "ops/normalization.h"
#include "ops/pool.h"
#include "ops/softmax.h"

using namespace nngraph;

namespace {

class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
  CudaBackend& gpu() { return cuda_backend(0); }
  CpuBackend& cpu() { return cpu_backend(); }

  std::vector<float> random(size_t n, float scale = 1.f) {
    std::uniform_real_distribution<float> d(-scale, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng_);
    return v;
  }
  // The same values as an image on each device.
  std::pair<Image, Image> pair(int n, ImageShape s, const std::vector<float>& v) {
    Image a = Image::allocate({n, s, DType::Float32}, Device());
    Image b = Image::allocate({n, s, DType::Float32}, Device(DeviceType::CUDA, 0));
    a.copy_from_host(v.data());
    b.copy_from_host(v.data());
    return {a, b};
  }
  std::pair<Image, Image> empty(int n, ImageShape s) {
    return {Image::allocate({n, s, DType::Float32}, Device()),
            Image::allocate({n, s, DType::Float32}, Device(DeviceType::CUDA, 0))};
  }
  // A device copy of host values (weights, biases, gradients).
  std::shared_ptr<Buffer> on_gpu(const std::vector<float>& v) {
    auto b = gpu().allocate(v.size() * sizeof(float));
    gpu().copy_from_host(b->data(), v.data(), b->bytes());
    return b;
  }
  std::vector<float> host(const Image& img) {
    std::vector<float> v(img.descriptor().count());
    img.copy_to_host(v.data());
    return v;
  }
  // Host or device values as a kernel's parameter operand.
  static Tensor t(const std::vector<float>& v) { return Tensor::vector(v.data(), v.size()); }
  static Tensor t(const std::shared_ptr<Buffer>& b) { return Tensor::vector(b, b->bytes() / sizeof(float)); }
  std::vector<float> host(const std::shared_ptr<Buffer>& b) {
    std::vector<float> v(b->bytes() / sizeof(float));
    gpu().copy_to_host(v.data(), b->data(), b->bytes());
    return v;
  }
  // The largest |got − want| / (1 + |want|).
  static float worst(const std::vector<float>& want, const std::vector<float>& got) {
    float e = 0.f;
    for (size_t i = 0; i < want.size(); ++i) e = std::max(e, std::fabs(want[i] - got[i]) / (1.f + std::fabs(want[i])));
    return e;
  }
  static void near(const std::vector<float>& a, const std::vector<float>& b, float tol = 1e-4f) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol * (1.f + std::fabs(a[i]))) << "at " << i;
  }
  // A convolution's random input, weights and bias on both devices, and its empty outputs.
  struct Conv {
    ConvGeometry g;
    cuda::ConvShape d;
    std::vector<float> xv, wv, bv;
    Image xc, xg, yc, yg;
    std::shared_ptr<Buffer> wg, bg;
  };
  Conv conv(int n, int c, int h, int w, int o, int kh, int kw, int s, int d, int pt, int pl, int oh, int ow) {
    Conv v{{kh, kw, s, s, d, d, 1, pt, pl}, {n, c, h, w, o, oh, ow, kh, kw, s, s, d, d, pt, pl}, {}, {}, {}, {}, {}, {},
           {}, {}, {}};
    v.xv = random(static_cast<size_t>(n) * c * h * w);
    v.wv = random(static_cast<size_t>(o) * c * kh * kw);
    v.bv = random(o);
    std::tie(v.xc, v.xg) = pair(n, {c, h, w}, v.xv);
    std::tie(v.yc, v.yg) = empty(n, {o, oh, ow});
    v.wg = on_gpu(v.wv);
    v.bg = on_gpu(v.bv);
    return v;
  }
  // Values as a 16-bit device buffer (float16, or bfloat16 where `bf16`), each n × c × h × w
  // block of the NCHW `v` stored NHWC (c along the last axis), or as given where c is 1.
  std::shared_ptr<Buffer> half_nhwc(const std::vector<float>& v, int n, int c, int hw, bool bf16 = false) {
    std::vector<uint16_t> out(v.size());
    for (int i = 0; i < n; ++i)
      for (int ch = 0; ch < c; ++ch)
        for (int p = 0; p < hw; ++p) {
          const float f = v[(static_cast<size_t>(i) * c + ch) * hw + p];
          out[(static_cast<size_t>(i) * hw + p) * c + ch] = bf16 ? float_to_bfloat16(f) : float_to_half(f);
        }
    auto b = gpu().allocate(out.size() * 2);
    gpu().copy_from_host(b->data(), out.data(), b->bytes());
    return b;
  }
  // The values a 16-bit tensor holds.
  static std::vector<float> rounded(std::vector<float> v, bool bf16 = false) {
    for (float& f : v) f = bf16 ? bfloat16_to_float(float_to_bfloat16(f)) : half_to_float(float_to_half(f));
    return v;
  }
  std::mt19937 rng_{42};
};

}  // namespace

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
// And forward passes on channels widened to 32 (ConvPlan::kWidened: 24 channels, 96-byte
// pixels; 21, whose 84-byte pixels are gathered 16 bytes a thread), strided and not.
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
    const int product = k.widened ? ConvPlan::kUndecided : ConvPlan::kProduct;
    ASSERT_EQ(conv_rows::widened_channels(g, in), k.widened ? 32 : 0);
    plan.forward = k.widened ? ConvPlan::kWidened : product;
    plan.weight_gradient = product;
    if (k.k == 1) plan.input_gradient = ConvPlan::kProduct;
    // NCHW values as the channels-last images the cuda pass reads, and back.
    auto last = [&](const std::vector<float>& v, ImageShape s, bool back) {
      std::vector<float> r(v.size());
      const size_t hw = static_cast<size_t>(s.h) * s.w;
      for (int i = 0; i < k.n; ++i)
        for (int ch = 0; ch < s.c; ++ch)
          for (size_t p = 0; p < hw; ++p) {
            const size_t nchw = (static_cast<size_t>(i) * s.c + ch) * hw + p, nhwc = (i * hw + p) * s.c + ch;
            (back ? r[nchw] : r[nhwc]) = back ? v[nhwc] : v[nchw];
          }
      return r;
    };
    auto image = [&](const std::vector<float>& v, ImageShape s) {
      Image img = Image::allocate({k.n, s, DType::Float32}, Device(DeviceType::CUDA, 0));
      if (!v.empty()) img.copy_from_host(last(v, s, false).data());
      return img;
    };
    const auto xv = random(static_cast<size_t>(k.n) * k.c * k.h * k.w);
    const auto wv = random(static_cast<size_t>(k.o) * k.c * k.k * k.k), bv = random(k.o);
    const auto tanh = NeuronDescriptor::make(NeuronType::TanH);
    auto [xc, unused_x] = pair(k.n, in, xv);
    auto [yc, unused_y] = empty(k.n, out);
    Image xg = image(xv, in), yg = image({}, out);
    auto wg = on_gpu(wv), bg = on_gpu(bv);
    dispatch<ConvolutionKernel>(cpu(), g, xc, t(wv), t(bv), tanh, yc);
    dispatch<ConvolutionKernel>(gpu(), g, Tensor::image(xg, Layout::NHWC), t(wg), t(bg), tanh,
                                Tensor::image(yg, Layout::NHWC));
    near(host(yc), last(host(yg), out, true));
    const auto dyv = random(yc.descriptor().count());
    auto [dyc, unused_dy] = pair(k.n, out, dyv);
    auto [dxc, unused_dx] = empty(k.n, in);
    Image dyg = image(dyv, out), dxg = image({}, in);
    std::vector<float> dwc(wv.size()), dbc(k.o);
    auto dwg = gpu().allocate(wv.size() * 4), dbg = gpu().allocate(k.o * 4);
    dispatch<ConvolutionGradientKernel>(cpu(), g, xc, t(wv), dyc, yc, tanh, dxc, t(dwc), t(dbc));
    dispatch<ConvolutionGradientKernel>(gpu(), g, Tensor::image(xg, Layout::NHWC), t(wg),
                                        Tensor::image(dyg, Layout::NHWC), Tensor::image(yg, Layout::NHWC), tanh,
                                        Tensor::image(dxg, Layout::NHWC), t(dwg), t(dbg));
    near(host(dxc), last(host(dxg), in, true));
    near(dwc, host(dwg), 1e-3f);
    near(dbc, host(dbg), 1e-3f);
    EXPECT_EQ(plan.forward, k.widened ? ConvPlan::kWidened : ConvPlan::kProduct);
    if (!k.widened) EXPECT_EQ(plan.weight_gradient, ConvPlan::kProduct);
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
    ASSERT_TRUE(cuda::tensor_convolution_fits(d));
    ASSERT_EQ(cuda::tensor_input_gradient_fits(d), k.s == 1);
    const auto nd = NeuronDescriptor::make(k.neuron);
    dispatch<ConvolutionKernel>(cpu(), g, xc, t(wv), t(bv), nd, yc);
    const auto dyv = random(yc.descriptor().count());
    auto [dyc, dyg] = pair(k.n, {k.o, k.oh, k.ow}, dyv);
    ASSERT_TRUE(cuda::tensor_weight_gradient_fits(d, dyg.data_as<float>()));
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

// The products fully connected layers may run (C = op(A)·op(B) on tensor cores), against
// double sums: every transposition, padded leading dimensions, tails and products split over k.
// A product's random operands (rows padded by `pad`) and C = op(A)·op(B) in double.
struct Product {
  bool ta, tb;
  int m, n, k, pad;
  int lda() const { return (ta ? m : k) + pad; }
  int ldb() const { return (tb ? k : n) + pad; }
  std::vector<float> want(const std::vector<float>& av, const std::vector<float>& bv) const {
    std::vector<float> c(static_cast<size_t>(m) * n);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double sum = 0;
        for (int l = 0; l < k; ++l)
          sum += static_cast<double>(ta ? av[l * lda() + i] : av[i * lda() + l]) *
                 (tb ? bv[j * ldb() + l] : bv[l * ldb() + j]);
        c[i * n + j] = static_cast<float>(sum);
      }
    return c;
  }
};

TEST_F(CudaVsCpu, TensorProducts) {
  using Case = Product;
  for (const Case q : {Case{false, true, 64, 256, 3136, 0}, Case{true, false, 128, 96, 64, 0},
                       Case{false, false, 64, 200, 1024, 0}, Case{true, true, 36, 44, 100, 4},
                       Case{false, false, 36, 44, 100, 8}}) {
    const int lda = q.lda(), ldb = q.ldb();
    const auto av = random(static_cast<size_t>(q.ta ? q.k : q.m) * lda);
    const auto bv = random(static_cast<size_t>(q.tb ? q.n : q.k) * ldb);
    const auto want = q.want(av, bv);
    const auto ag = on_gpu(av), bg = on_gpu(bv), cg = gpu().allocate(want.size() * 4);
    const auto* a = static_cast<const float*>(ag->data());
    const auto* b = static_cast<const float*>(bg->data());
    auto* c = static_cast<float*>(cg->data());
    ASSERT_TRUE(cuda::tensor_product_fits(q.ta, q.tb, q.m, q.n, q.k, a, lda, b, ldb, q.n));
    EXPECT_FALSE(cuda::tensor_product_fits(q.ta, q.tb, q.m, q.n, q.k, a + 1, lda, b, ldb, q.n));
    EXPECT_FALSE(cuda::tensor_product_fits(q.ta, q.tb, q.m, q.n, q.k, a, lda, b, ldb, q.n + 1));
    const size_t partial_floats = cuda::tensor_product_partial(q.m, q.n, q.k);
    const auto partial = gpu().allocate(std::max<size_t>(1, partial_floats) * 4);
    float error[2] = {};
    for (const bool exact : {false, true}) {
      cuda::tensor_product(gpu().stream(), exact, q.ta, q.tb, q.m, q.n, q.k, a, lda, b, ldb, c,
                           partial_floats ? static_cast<float*>(partial->data()) : nullptr);
      error[exact] = worst(want, host(cg));
    }
    EXPECT_LT(error[1], 5e-5f) << q.m << "x" << q.n << "x" << q.k;
    EXPECT_LT(error[0], 2e-2f) << q.m << "x" << q.n << "x" << q.k;
    EXPECT_GT(error[0], 20 * error[1]) << q.m << "x" << q.n << "x" << q.k;
  }
  EXPECT_GT(cuda::tensor_product_partial(64, 256, 3136), 0u);  // the first case is split over k
  EXPECT_FALSE(cuda::tensor_product_fits(false, true, 64, 256, 3134, nullptr, 3136, nullptr, 3136, 256));
}

// The digit network's last layer (forward, weight and input gradients) and odd shapes.
TEST_F(CudaVsCpu, ThinProducts) {
  for (const Product q : {Product{false, true, 64, 10, 1024, 0}, Product{true, false, 10, 1024, 64, 0},
                          Product{false, false, 64, 1024, 10, 0}, Product{false, true, 7, 13, 333, 3},
                          Product{true, false, 5, 77, 9, 1}, Product{false, false, 3, 300, 1, 2}}) {
    ASSERT_TRUE(cuda::thin_product_fits(q.ta, q.tb, q.m, q.n, q.k));
    const auto av = random(static_cast<size_t>(q.ta ? q.k : q.m) * q.lda());
    const auto bv = random(static_cast<size_t>(q.tb ? q.n : q.k) * q.ldb());
    const int ldc = q.n + q.pad;
    const auto ag = on_gpu(av), bg = on_gpu(bv), cg = gpu().allocate(size_t(q.m) * ldc * 4);
    cuda::thin_product(gpu().stream(), q.ta, q.tb, q.m, q.n, q.k, static_cast<const float*>(ag->data()), q.lda(),
                       static_cast<const float*>(bg->data()), q.ldb(), static_cast<float*>(cg->data()), ldc);
    const auto all = host(cg);
    std::vector<float> got;
    for (int i = 0; i < q.m; ++i) got.insert(got.end(), all.begin() + i * ldc, all.begin() + i * ldc + q.n);
    near(got, q.want(av, bv), 1e-5f);
  }
  EXPECT_FALSE(cuda::thin_product_fits(true, true, 8, 8, 8));  // neither layout
  EXPECT_FALSE(cuda::thin_product_fits(false, true, 64, 1024, 3136));  // too large
}

TEST_F(CudaVsCpu, FullyConnectedAndGradient) {
  const int n = 5, k = 24, o = 7;
  const auto xv = random(n * k), wv = random(o * k), bv = random(o), dyv = random(n * o);
  auto [xc, xg] = pair(n, {6, 2, 2}, xv);
  auto [yc, yg] = empty(n, {o, 1, 1});
  auto wg = on_gpu(wv), bg = on_gpu(bv);
  const auto relu = NeuronDescriptor::make(NeuronType::ReLU);
  dispatch<FullyConnectedKernel>(cpu(), xc, t(wv), t(bv), relu, yc, false, false);
  dispatch<FullyConnectedKernel>(gpu(), xg, t(wg), t(bg), relu, yg, false, false);
  near(host(yc), host(yg));
  auto [dyc, dyg] = pair(n, {o, 1, 1}, dyv);
  auto [dxc, dxg] = empty(n, {6, 2, 2});
  std::vector<float> dwc(wv.size()), dbc(o);
  auto dwg = gpu().allocate(wv.size() * 4), dbg = gpu().allocate(o * 4);
  dispatch<FullyConnectedGradientKernel>(cpu(), xc, t(wv), dyc, yc, relu, dxc, t(dwc), t(dbc), false, false);
  dispatch<FullyConnectedGradientKernel>(gpu(), xg, t(wg), dyg, yg, relu, dxg,
                                 t(dwg), t(dbg), false, false);
  near(host(dxc), host(dxg));
  near(dwc, host(dwg));
  near(dbc, host(dbg));
}

TEST_F(CudaVsCpu, PoolingNeuronSoftmaxDropoutAndChannels) {
  const int n = 2, c = 3, h = 7, w = 8;
  const auto xv = random(n * c * h * w, 3.f);
  auto [xc, xg] = pair(n, {c, h, w}, xv);
  for (auto mode : {PoolingMode::Max, PoolingMode::Average})
    for (const PoolGeometry g : {PoolGeometry{2, 2, 2, 2, 0, 0, false}, PoolGeometry{3, 3, 2, 2, 1, 1, false},
                                 PoolGeometry{3, 2, 1, 2, 1, 0, true}}) {
      const int oh = (h + 2 * g.pad_top - g.kh) / g.sy + 1, ow = (w + 2 * g.pad_left - g.kw) / g.sx + 1;
      auto [yc, yg] = empty(n, {c, oh, ow});
      dispatch<PoolingKernel>(cpu(), mode, g, xc, yc, Tensor());
      dispatch<PoolingKernel>(gpu(), mode, g, xg, yg, Tensor());
      near(host(yc), host(yg));
      // Max pooling's winners: the same bytes on each device.
      const bool max = mode == PoolingMode::Max;
      const int bytes = c * oh * ow, floats = (bytes + 15) / 16 * 4;
      auto [wc, wg] = empty(n, {floats, 1, 1});
      if (max) {
        dispatch<PoolingKernel>(cpu(), mode, g, xc, yc, Tensor(wc));
        dispatch<PoolingKernel>(gpu(), mode, g, xg, yg, Tensor(wg));
        const auto on_cpu = host(wc), on_gpu = host(wg);
        for (int i = 0; i < n; ++i)
          EXPECT_EQ(std::memcmp(on_cpu.data() + i * floats, on_gpu.data() + i * floats, bytes), 0);
      }
      auto [dyc, dyg] = pair(n, {c, oh, ow}, random(yc.descriptor().count()));
      for (auto t : {NeuronType::None, NeuronType::Sigmoid}) {  // with a folded neuron gradient
        const auto nd = NeuronDescriptor::make(t);
        auto [dxc, dxg] = empty(n, {c, h, w});
        dispatch<PoolingGradientKernel>(cpu(), mode, g, xc, dyc, Tensor(), Tensor(), dxc, nd);
        dispatch<PoolingGradientKernel>(gpu(), mode, g, xg, dyg, Tensor(), Tensor(), dxg, nd);
        near(host(dxc), host(dxg));
        if (!max) continue;
        // From the winners (x not read; f' of y, the winner's value): as from x.
        auto [ec, eg] = empty(n, {c, h, w});
        dispatch<PoolingGradientKernel>(cpu(), mode, g, xc, dyc, Tensor(wc), Tensor(yc), ec, nd);
        dispatch<PoolingGradientKernel>(gpu(), mode, g, xg, dyg, Tensor(wg), Tensor(yg), eg, nd);
        near(host(ec), host(dxc));
        near(host(eg), host(dxc));
      }
    }
  for (auto t : {NeuronType::ReLU, NeuronType::Sigmoid, NeuronType::ELU, NeuronType::SoftPlus, NeuronType::Absolute}) {
    const auto nd = NeuronDescriptor::make(t);
    auto [yc, yg] = empty(n, {c, h, w});
    dispatch<NeuronKernel>(cpu(), nd, xc, yc);
    dispatch<NeuronKernel>(gpu(), nd, xg, yg);
    near(host(yc), host(yg));
    auto [dyc, dyg] = pair(n, {c, h, w}, random(xv.size()));
    auto [dxc, dxg] = empty(n, {c, h, w});
    dispatch<NeuronGradientKernel>(cpu(), nd, nd.derivative_from_output() ? yc : xc, dyc, dxc);
    dispatch<NeuronGradientKernel>(gpu(), nd, nd.derivative_from_output() ? yg : xg, dyg, dxg);
    near(host(dxc), host(dxg));
  }
  for (bool log : {false, true}) {
    auto [yc, yg] = empty(n, {c, h, w});
    dispatch<SoftMaxKernel>(cpu(), log, xc, yc);
    dispatch<SoftMaxKernel>(gpu(), log, xg, yg);
    near(host(yc), host(yg));
    auto [dyc, dyg] = pair(n, {c, h, w}, random(xv.size()));
    auto [dxc, dxg] = empty(n, {c, h, w});
    dispatch<SoftMaxGradientKernel>(cpu(), log, yc, dyc, dxc);
    dispatch<SoftMaxGradientKernel>(gpu(), log, yg, dyg, dxg);
    near(host(dxc), host(dxg));
  }
  auto [dc, dg] = empty(n, {c, h, w});
  const uint64_t step = 4;
  auto step_on_gpu = gpu().allocate(sizeof(uint64_t));
  gpu().store(static_cast<uint64_t*>(step_on_gpu->data()), step);
  dispatch<DropoutKernel>(cpu(), 0.6f, 9, &step, xc, dc);
  dispatch<DropoutKernel>(gpu(), 0.6f, 9, static_cast<const uint64_t*>(step_on_gpu->data()), xg, dg);
  near(host(dc), host(dg), 0.f);  // the very same mask
  auto [cc, cg] = empty(n, {2 * c, h, w});
  dispatch<CopyChannelsKernel>(cpu(), xc, cc, c);
  dispatch<CopyChannelsKernel>(gpu(), xg, cg, c);
  auto [sc, sg] = empty(n, {c, h, w});
  dispatch<SliceChannelsKernel>(cpu(), cc, c, sc);
  dispatch<SliceChannelsKernel>(gpu(), cg, c, sg);
  near(host(sc), host(sg), 0.f);
  near(host(sg), xv, 0.f);
  Image half = xg.converted(DType::Float16);
  near(host(half.converted(DType::Float32)), host(xc.converted(DType::Float16).converted(DType::Float32)), 0.f);
}

// Large planes split into chunks per channel, and one value per plane (after a fully
// connected layer) summed down columns.
TEST_F(CudaVsCpu, BatchNormalizationPassesAndStatistics) {
  for (const auto& [n, c, h, w] :
       {std::array<int, 4>{64, 8, 28, 28}, std::array<int, 4>{300, 70, 1, 1}, std::array<int, 4>{520, 64, 1, 1}}) {
    const size_t count = static_cast<size_t>(n) * c * h * w;
    auto xv = random(count, 2.f);
    for (size_t i = 0; i < count; ++i) xv[i] += 3.f;  // off-centre: sums of squares must not cancel
    auto [xc, xg] = pair(n, {c, h, w}, xv);
    const auto gamma = random(c), beta = random(c), mean = random(c);
    std::vector<float> var(c, 0.7f), bc(kBatchNormStatistics * c, 0.f);
    const auto gg = on_gpu(gamma), bg = on_gpu(beta), mg = on_gpu(mean), vg = on_gpu(var), sg = on_gpu(bc);
    auto [ac, ag] = pair(n, {c, h, w}, random(count));  // a residual addend, in training
    for (bool training : {false, true}) {
      auto [yc, yg] = empty(n, {c, h, w});
      const auto relu = NeuronDescriptor::make(NeuronType::ReLU);
      dispatch<BatchNormalizationKernel>(cpu(), 1e-5f, xc, t(gamma), t(beta), t(mean), t(var),
                                         training ? t(bc) : Tensor(), false, training ? Tensor(ac) : Tensor(), relu, yc);
      dispatch<BatchNormalizationKernel>(gpu(), 1e-5f, xg, t(gg), t(bg), t(mg), t(vg), training ? t(sg) : Tensor(),
                                         false, training ? Tensor(ag) : Tensor(), relu, yg);
      near(host(yc), host(yg), 2e-4f);
      if (!training) continue;
      // Computed again from the statistics the training pass left: the same values on each.
      auto [rc, rg] = empty(n, {c, h, w});
      dispatch<BatchNormalizationKernel>(cpu(), 1e-5f, xc, t(gamma), t(beta), t(mean), t(var), t(bc), true, Tensor(ac),
                                         relu, rc);
      dispatch<BatchNormalizationKernel>(gpu(), 1e-5f, xg, t(gg), t(bg), t(mg), t(vg), t(sg), true, Tensor(ag), relu,
                                         rg);
      near(host(rc), host(yc), 0.f);
      near(host(rg), host(yg), 0.f);
    }
    const auto sh = host(sg);  // mean, inverse deviation, variance
    near(std::vector<float>(bc.begin(), bc.begin() + 3 * c), std::vector<float>(sh.begin(), sh.begin() + 3 * c), 1e-4f);
    auto [dyc, dyg] = pair(n, {c, h, w}, random(count));
    // dy as it is, and through the gradient of a neuron after the normalization.
    for (NeuronType through : {NeuronType::None, NeuronType::ReLU, NeuronType::Sigmoid, NeuronType::GELU}) {
      const auto nd = NeuronDescriptor::make(through);
      auto [dxc, dxg] = empty(n, {c, h, w});
      std::vector<float> dgc(c), dbc(c);
      const auto dgg = on_gpu(dgc), dbg = on_gpu(dbc);
      dispatch<BatchNormalizationGradientKernel>(cpu(), xc, dyc, t(gamma), t(beta), t(bc), nd, dxc, t(dgc), t(dbc));
      dispatch<BatchNormalizationGradientKernel>(gpu(), xg, dyg, t(gg), t(bg), t(sg), nd, dxg, t(dgg), t(dbg));
      near(dgc, host(dgg), 1e-3f);
      near(dbc, host(dbg), 1e-3f);
      near(host(dxc), host(dxg), 1e-3f);
    }
    auto mc = mean, vc = var;
    dispatch<BatchNormalizationStatisticsKernel>(cpu(), 0.1f, 1.01f, t(bc), t(mc), t(vc));
    dispatch<BatchNormalizationStatisticsKernel>(gpu(), 0.1f, 1.01f, t(sg), t(mg), t(vg));
    near(mc, host(mg), 1e-5f);
    near(vc, host(vg), 1e-5f);
  }
}

TEST_F(CudaVsCpu, LossesAndOptimizers) {
  const int n = 4, c = 5, hw = 3;
  for (auto t : {LossType::SoftMaxCrossEntropy, LossType::SigmoidCrossEntropy, LossType::Huber, LossType::CosineDistance,
                 LossType::KullbackLeiblerDivergence}) {
    LossDescriptor d;
    d.type = t;
    d.weight = 0.5f;
    const bool probabilities = t == LossType::KullbackLeiblerDivergence;
    auto xv = random(n * c * hw);
    if (probabilities)
      for (auto& v : xv) v = std::fabs(v) + 0.05f;
    auto lv = random(n * c * hw);
    for (auto& v : lv) v = std::fabs(v);
    auto [xc, xg] = pair(n, {c, hw, 1}, xv);
    auto [lc, lg] = pair(n, {c, hw, 1}, lv);
    auto [wc, wg] = pair(n, {1, 1, 1}, std::vector<float>{1.f, 0.5f, 2.f, 1.f});
    auto [gc, gg] = empty(n, {c, hw, 1});
    auto [oc, og] = empty(n, {1, 1, 1});
    dispatch<LossKernel>(cpu(), d, 0.25, nullptr, xc, lc, wc, gc, oc);
    dispatch<LossKernel>(gpu(), d, 0.25, nullptr, xg, lg, wg, gg, og);
    near(host(oc), host(og));
    near(host(gc), host(gg));
  }
  for (auto kind : {OptimizerKind::SGD, OptimizerKind::Adam, OptimizerKind::RMSProp}) {
    OptimizerStep s{kind, OptimizerDescriptor{}};
    s.momentum = 0.9f;
    s.amsgrad = true;
    s.step = 3;
    s.d.regularization = Regularization::L2;
    s.d.regularization_scale = 0.01f;
    const size_t count = 1000;
    auto w = random(count), g = random(count), s0 = random(count, 0.1f), s1 = random(count, 0.1f),
         s2 = random(count, 0.1f);
    for (auto& v : s1) v = std::fabs(v);  // second moments are never negative
    for (auto& v : s2) v = std::fabs(v);
    if (kind == OptimizerKind::RMSProp)
      for (auto& v : s0) v = std::fabs(v);
    auto wg = on_gpu(w), gg = on_gpu(g), a = on_gpu(s0), b = on_gpu(s1), m = on_gpu(s2);
    auto at = [](const std::shared_ptr<Buffer>& buf, size_t offset) { return static_cast<float*>(buf->data()) + offset; };
    for (size_t offset : {0, 1}) {  // four at a time where aligned, one at a time where not
      dispatch<OptimizerKernel>(cpu(), s, std::vector<TensorUpdate>{{w.data() + offset, g.data() + offset,
                                                                     {s0.data() + offset, s1.data() + offset,
                                                                      s2.data() + offset},
                                                                     count - offset, s.step}});
      dispatch<OptimizerKernel>(gpu(), s, std::vector<TensorUpdate>{{at(wg, offset), at(gg, offset),
                                                                     {at(a, offset), at(b, offset), at(m, offset)},
                                                                     count - offset, s.step}});
    }
    near(w, host(wg), 1e-5f);
    near(s0, host(a), 1e-5f);
    near(s1, host(b), 1e-5f);
    near(s2, host(m), 1e-5f);
  }
  // One batched launch equals one launch per tensor, with each tensor's own step count.
  OptimizerStep adam{OptimizerKind::Adam, OptimizerDescriptor{}};
  adam.d.gradient_rescale = 0.5f;
  const size_t sizes[] = {3000, 7, 1000};
  std::vector<TensorUpdate> batch, single;
  std::vector<std::shared_ptr<Buffer>> keep;
  for (int copy = 0; copy < 2; ++copy) {
    rng_.seed(11);
    for (int i = 0; i < 3; ++i) {
      auto w = on_gpu(random(sizes[i])), g = on_gpu(random(sizes[i])), m = on_gpu(random(sizes[i], 0.1f));
      auto v = random(sizes[i], 0.1f);
      for (auto& x : v) x = std::fabs(x);
      auto vg = on_gpu(v);
      keep.insert(keep.end(), {w, g, m, vg});
      TensorUpdate t{static_cast<float*>(w->data()), static_cast<float*>(g->data()),
                     {static_cast<float*>(m->data()), static_cast<float*>(vg->data()), nullptr}, sizes[i], 2 + i};
      (copy ? single : batch).push_back(t);
    }
  }
  dispatch<OptimizerKernel>(gpu(), adam, batch);
  for (const auto& t : single) dispatch<OptimizerKernel>(gpu(), adam, std::vector<TensorUpdate>{t});
  for (int i = 0; i < 3; ++i) {
    auto host_of = [&](float* p, size_t n) {
      std::vector<float> v(n);
      gpu().copy_to_host(v.data(), p, n * sizeof(float));
      return v;
    };
    near(host_of(batch[i].values, sizes[i]), host_of(single[i].values, sizes[i]), 0.f);
  }
  std::vector<float> bad{1.f, NAN, 2.f};
  auto bg = on_gpu(bad);
  EXPECT_FALSE(dispatch<AllFiniteKernel>(gpu(), Tensor::vector(bg, 3)));
  EXPECT_TRUE(dispatch<AllFiniteKernel>(gpu(), Tensor::vector(bg, 1)));
}

// A half graph's channels-last filter copy, written with the update: the updated OIHW values
// in KRSC order, as the cast that first makes the copy lays them out.
TEST_F(CudaVsCpu, OptimizerWritesAChannelsLastFilterCopy) {
  const int o = 5, i = 3, kh = 2, kw = 3;
  const size_t count = static_cast<size_t>(o) * i * kh * kw;
  auto w = on_gpu(random(count)), g = on_gpu(random(count));
  auto copy = gpu().allocate(count * 2), want = gpu().allocate(count * 2);
  TensorUpdate t{static_cast<float*>(w->data()), g->data(), {nullptr, nullptr, nullptr}, count, 1};
  t.copy = copy->data();
  t.copy_dtype = DType::Float16;
  t.copy_inputs = i;
  t.copy_taps = kh * kw;
  dispatch<OptimizerKernel>(gpu(), OptimizerStep{OptimizerKind::SGD, OptimizerDescriptor{}}, std::vector<TensorUpdate>{t});
  dispatch<CastKernel>(gpu(), Tensor(w->data(), o, {i, kh, kw}),
                       Tensor(want->data(), o, {i, kh, kw}, DType::Float16, Layout::NHWC));
  std::vector<uint16_t> got(count), expected(count);
  gpu().copy_to_host(got.data(), copy->data(), count * 2);
  gpu().copy_to_host(expected.data(), want->data(), count * 2);
  EXPECT_EQ(got, expected);
  // And KRSC is (o, tap, i): the first output's second input channel at tap 0 sits at index 1.
  const auto updated = host(w);
  std::vector<uint16_t> one(1);
  gpu().copy_to_host(one.data(), static_cast<char*>(copy->data()) + 2, 2);
  EXPECT_EQ(half_to_float(one[0]), half_to_float(float_to_half(updated[kh * kw])));
}

TEST_F(CudaVsCpu, OutOfMemoryRaisesAndTheDeviceStaysUsable) {
  EXPECT_THROW(gpu().allocate(size_t(1) << 50), OutOfMemory);
  auto b = gpu().allocate(64);
  EXPECT_TRUE(b);
}
// A captured step's scratch: allocated outside the graph (no allocation nodes, no graph memory),
// reused within the step once freed, valid for every replay, kept while a buffer outlives the step.
TEST_F(CudaVsCpu, CapturedScratchHoldsNoGraphMemory) {
  const size_t n = 4096, bytes = n * sizeof(float);
  auto src = on_gpu(random(n)), dst = gpu().allocate(bytes);
  void *first = nullptr, *second = nullptr;
  std::shared_ptr<Buffer> kept;
  auto step = gpu().capture([&] {
    auto a = gpu().allocate(bytes);
    first = a->data();
    gpu().copy(a->data(), src->data(), bytes);
    auto b = gpu().allocate(bytes);  // a is busy: another block
    gpu().copy(b->data(), a->data(), bytes);
    a.reset();
    auto c = gpu().allocate(bytes / 2);  // a's block, free again
    second = c->data();
    gpu().copy(c->data(), b->data(), bytes / 2);
    gpu().copy(dst->data(), c->data(), bytes / 2);
    gpu().copy(static_cast<char*>(dst->data()) + bytes / 2, static_cast<char*>(b->data()) + bytes / 2, bytes / 2);
    kept = gpu().allocate(16);  // outlives the step
  });
  EXPECT_EQ(first, second);
  for (int run = 0; run < 2; ++run) {
    const auto v = random(n);
    gpu().copy_from_host(src->data(), v.data(), bytes);
    gpu().replay(step, {});
    near(host(dst), v, 0.f);
  }
  uint64_t graph_bytes = 1;
  ASSERT_EQ(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &graph_bytes), cudaSuccess);
  EXPECT_EQ(graph_bytes, 0u);
  step.reset();
  kept.reset();  // freed now, with no step left to own it
  gpu().synchronize();
  EXPECT_NE(gpu().allocate(64), nullptr);
}

// Side by side in a capture: both works see what came before, the work after sees both, and
// scratch one frees is not handed to the other (it may still be read); one after the other
// where the works are long or the shared workspace cannot hold both.
TEST_F(CudaVsCpu, SideBySideWorksShareNoScratch) {
  const size_t n = 4096, bytes = n * sizeof(float);
  auto src = on_gpu(random(n)), a = gpu().allocate(bytes), b = gpu().allocate(bytes), sum = gpu().allocate(bytes);
  void *freed = nullptr, *beside = nullptr, *after = nullptr, *in_turn = nullptr, *no_room = nullptr;
  void *long_first = nullptr, *roomy_first = nullptr;
  auto step = gpu().capture([&] {
    auto staged = gpu().allocate(bytes);
    gpu().copy(staged->data(), src->data(), bytes);
    gpu().side_by_side(
        [&] {
          auto s = gpu().allocate(bytes);
          freed = s->data();
          gpu().copy(s->data(), staged->data(), bytes);
          gpu().copy(a->data(), s->data(), bytes);
        },
        [&] {
          auto s = gpu().allocate(bytes);
          beside = s->data();
          gpu().copy(s->data(), staged->data(), bytes);
          gpu().copy(b->data(), s->data(), bytes);
        },
        1e3, 0, 0);
    auto s = gpu().allocate(bytes);  // both blocks are free again
    after = s->data();
    gpu().copy_all({{sum->data(), a->data(), bytes / 2}, {static_cast<char*>(sum->data()) + bytes / 2,
                                                           static_cast<char*>(b->data()) + bytes / 2, bytes / 2}});
    s.reset();
    gpu().side_by_side([&] { long_first = gpu().allocate(bytes)->data(); },
                       [&] { in_turn = gpu().allocate(bytes)->data(); }, 1e15, 0, 0);
    gpu().side_by_side([&] { roomy_first = gpu().allocate(bytes)->data(); },
                       [&] { no_room = gpu().allocate(bytes)->data(); }, 1e3, 0, size_t(1) << 50);
  });
  EXPECT_NE(freed, beside);
  EXPECT_TRUE(after == beside || after == freed);
  EXPECT_EQ(long_first, in_turn);
  EXPECT_EQ(roomy_first, no_room);
  for (int run = 0; run < 2; ++run) {
    const auto v = random(n);
    gpu().copy_from_host(src->data(), v.data(), bytes);
    gpu().replay(step, {});
    near(host(a), v, 0.f);
    near(host(b), v, 0.f);
    near(host(sum), v, 0.f);
  }
}

// An upload overlaps the work queued before it but never writes memory that work still reads.
TEST_F(CudaVsCpu, UploadsLeaveQueuedReadsAlone) {
  const size_t n = 1 << 16, bytes = n * sizeof(float);
  const auto before = random(n), later = random(n);
  for (int round = 0; round < 4; ++round) {
    auto queued = on_gpu(before), out = gpu().allocate(bytes);
    gpu().synchronize();
    cuda::hold(gpu().stream(), 2000);  // the read below waits behind this
    gpu().copy(out->data(), queued->data(), bytes);
    queued.reset();  // freed after the read, in the stream's order
    auto uploaded = gpu().upload(bytes, [&](void* p) { std::memcpy(p, later.data(), bytes); });
    near(host(out), before, 0.f);
    near(host(uploaded), later, 0.f);
  }
}
#endif  // NNGRAPH_HAVE_CUDA
