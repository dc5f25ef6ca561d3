#pragma once
// The fixtures of the cuda tests: OnGpu (any cuda test), and CudaVsCpu for those against the cpu
// (cuda_conv_test.cpp, cuda_test.cpp, cuda_runtime_test.cpp): both backends, random values,
// images and buffers on each device.
#ifdef NNGRAPH_HAVE_CUDA
#include <gtest/gtest.h>

#include <algorithm>
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

namespace nngraph::testing_cuda {

// A GPU test: skipped without a CUDA device; gpu() is device 0's backend.
class OnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
  CudaBackend& gpu() { return cuda_backend(0); }
};

class CudaVsCpu : public OnGpu {
 protected:
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
  // Each |a − b| within tol · (scale + |a|).
  static void near(const std::vector<float>& a, const std::vector<float>& b, float tol = 1e-4f, float scale = 1.f) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol * (scale + std::fabs(a[i]))) << "at " << i;
  }
  // The root mean square of v.
  static float rms(const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += static_cast<double>(x) * x;
    return v.empty() ? 0.f : static_cast<float>(std::sqrt(s / v.size()));
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
  // NCHW values of n images as their channels-last order, or back (`back`).
  static std::vector<float> channels_last(const std::vector<float>& v, int n, ImageShape s, bool back) {
    std::vector<float> r(v.size());
    const size_t hw = static_cast<size_t>(s.h) * s.w;
    for (int i = 0; i < n; ++i)
      for (int ch = 0; ch < s.c; ++ch)
        for (size_t p = 0; p < hw; ++p) {
          const size_t nchw = (static_cast<size_t>(i) * s.c + ch) * hw + p, nhwc = (i * hw + p) * s.c + ch;
          (back ? r[nchw] : r[nhwc]) = back ? v[nhwc] : v[nchw];
        }
    return r;
  }
  // Forward pass and both gradients of a float32 channels-last convolution on the gpu, as its
  // plan's choices stand (tanh or `neuron`, a bias), against the cpu's NCHW ones on the same
  // random values: outputs and input gradient within tol, weight and bias gradients (longer sums)
  // sum_tol.
  void channels_last_convolution(int n, const ConvGeometry& g, ImageShape in, ImageShape out, float tol,
                                 float sum_tol, NeuronType neuron = NeuronType::TanH) {
    auto image = [&](const std::vector<float>& v, ImageShape s) {  // stored channels-last
      Image img = Image::allocate({n, s, DType::Float32}, Device(DeviceType::CUDA, 0));
      if (!v.empty()) img.copy_from_host(channels_last(v, n, s, false).data());
      return img;
    };
    const auto last = [](const Image& img) { return Tensor::image(img, Layout::NHWC); };
    const auto xv = random(static_cast<size_t>(n) * in.count());
    const auto wv = random(static_cast<size_t>(out.c) * in.c * g.kh * g.kw), bv = random(out.c);
    const auto nd = NeuronDescriptor::make(neuron);
    auto [xc, unused_x] = pair(n, in, xv);
    auto [yc, unused_y] = empty(n, out);
    Image xg = image(xv, in), yg = image({}, out);
    auto wg = on_gpu(wv), bg = on_gpu(bv);
    dispatch<ConvolutionKernel>(cpu(), g, xc, t(wv), t(bv), nd, yc);
    dispatch<ConvolutionKernel>(gpu(), g, last(xg), t(wg), t(bg), nd, last(yg));
    const auto check = [](const char* what, const std::vector<float>& a, const std::vector<float>& b, float within,
                          float scale) {
      SCOPED_TRACE(what);
      near(a, b, within, scale);
    };
    check("y", host(yc), channels_last(host(yg), n, out, true), tol, 1.f);
    const auto dyv = random(yc.descriptor().count());
    auto [dyc, unused_dy] = pair(n, out, dyv);
    auto [dxc, unused_dx] = empty(n, in);
    Image dyg = image(dyv, out), dxg = image({}, in);
    std::vector<float> dwc(wv.size()), dbc(out.c);
    auto dwg = gpu().allocate(wv.size() * 4), dbg = gpu().allocate(out.c * 4);
    dispatch<ConvolutionGradientKernel>(cpu(), g, xc, t(wv), dyc, yc, nd, dxc, t(dwc), t(dbc));
    dispatch<ConvolutionGradientKernel>(gpu(), g, last(xg), t(wg), last(dyg), last(yg), nd, last(dxg), t(dwg),
                                        t(dbg));
    check("dx", host(dxc), channels_last(host(dxg), n, in, true), tol, 1.f);
    // tf32 rounds every term of a sum (and the outputs whose neuron's slope weighs the bias
    // gradient's terms): one near zero over many large terms keeps their error, which scales
    // with the sums' size, not its value.
    check("dw", dwc, host(dwg), sum_tol, g.tf32 ? std::max(1.f, rms(dwc)) : 1.f);
    check("db", dbc, host(dbg), sum_tol, g.tf32 ? std::max(1.f, rms(dbc)) : 1.f);
    // A gradient marked channels-last (a KRSC filter copy's, as a graph's built-in optimizer
    // reads it) comes out in that order.
    auto dwk = gpu().allocate(wv.size() * 4);
    const Tensor krsc(dwk->data(), 1, ImageShape{static_cast<int>(wv.size()), 1, 1}, DType::Float32, Layout::NHWC);
    dispatch<ConvolutionGradientKernel>(gpu(), g, last(xg), t(wg), last(dyg), last(yg), nd, Tensor(), krsc,
                                        Tensor());
    const ImageShape filter{in.c / g.groups, g.kh, g.kw};
    check("dw KRSC", channels_last(dwc, out.c, filter, false), host(dwk), sum_tol,
          g.tf32 ? std::max(1.f, rms(dwc)) : 1.f);
  }
  // Values as a 16-bit device buffer (float16, or bfloat16 where `bf16`), each n × c × h × w
  // block of the NCHW `v` stored NHWC (c along the last axis), or as given where c is 1.
  std::shared_ptr<Buffer> half_nhwc(const std::vector<float>& v, int n, int c, int hw, bool bf16 = false) {
    const auto last = channels_last(v, n, ImageShape{c, hw, 1}, false);
    std::vector<uint16_t> out(v.size());
    for (size_t i = 0; i < last.size(); ++i) out[i] = bf16 ? float_to_bfloat16(last[i]) : float_to_half(last[i]);
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

}  // namespace nngraph::testing_cuda
#endif  // NNGRAPH_HAVE_CUDA
