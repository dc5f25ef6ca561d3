// The other cuda kernels (products, layers, losses, optimizers) against the cpu backend on the
// same random inputs (skipped without a GPU).
#ifdef NNGRAPH_HAVE_CUDA
#include "cuda_vs_cpu.h"

using namespace nngraph;
using nngraph::testing_cuda::CudaVsCpu;

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

// Every algorithm cuBLASLt's heuristics offer as a product's candidate, forced in turn, against
// double sums of the operands as stored: exact float32, tf32, bfloat16 and float16 (summed in
// float16), every transposition, padded rows, and operands 4 bytes past a 16-byte boundary.
TEST_F(CudaVsCpu, LtProducts) {
  struct Math {
    DType type;
    bool tf32, half;
    float tol;
  };
  int ran = 0;
  for (const Math math : {Math{DType::Float32, false, false, 2e-5f}, Math{DType::Float32, true, false, 1e-2f},
                          Math{DType::BFloat16, false, false, 8e-3f}, Math{DType::Float16, false, true, 3e-2f}})
    for (const Product q : {Product{false, true, 96, 80, 72, 0}, Product{true, false, 64, 48, 200, 0},
                            Product{false, false, 40, 24, 33, 8}, Product{true, true, 32, 64, 16, 4}})
      for (const int offset : {0, 1}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(math.type) << (math.tf32 ? " tf32" : "") << ' ' << q.m
                                          << "x" << q.n << "x" << q.k << " offset " << offset);
        const size_t bytes = dtype_size(math.type);
        // Values the storage holds exactly; offset: each operand `offset` values into its buffer.
        auto stored = [&](std::vector<float> v) {
          for (auto& x : v)
            x = math.type == DType::BFloat16  ? bfloat16_to_float(float_to_bfloat16(x))
                : math.type == DType::Float16 ? half_to_float(float_to_half(x))
                                              : x;
          return v;
        };
        auto upload = [&](const std::vector<float>& v) {
          std::vector<unsigned char> raw((v.size() + offset) * bytes);
          for (size_t i = 0; i < v.size(); ++i) {
            const uint16_t h = math.type == DType::BFloat16 ? float_to_bfloat16(v[i]) : float_to_half(v[i]);
            std::memcpy(raw.data() + (i + offset) * bytes, bytes == 4 ? static_cast<const void*>(&v[i]) : &h, bytes);
          }
          auto b = gpu().allocate(raw.size());
          gpu().copy_from_host(b->data(), raw.data(), raw.size());
          return b;
        };
        const auto av = stored(random(static_cast<size_t>(q.ta ? q.k : q.m) * q.lda()));
        const auto bv = stored(random(static_cast<size_t>(q.tb ? q.n : q.k) * q.ldb()));
        const auto want = q.want(av, bv);
        const auto ag = upload(av), bg = upload(bv), cg = upload(std::vector<float>(want.size()));
        auto at = [&](const std::shared_ptr<Buffer>& b) { return static_cast<unsigned char*>(b->data()) + offset * bytes; };
        for (int i = 0; i < 8; ++i) {
          gpu().force_product(4 + i);
          gpu().gemm(math.type, q.ta, q.tb, q.m, q.n, q.k, at(ag), q.lda(), at(bg), q.ldb(), at(cg), q.n, math.tf32,
                     1.f, 0.f, {}, math.half);
          if (gpu().forced_runs() == 0) break;  // no more algorithms
          ++ran;
          std::vector<unsigned char> raw(cg->bytes());
          gpu().copy_to_host(raw.data(), cg->data(), raw.size());
          std::vector<float> got(want.size());
          for (size_t e = 0; e < got.size(); ++e) {
            const unsigned char* v = raw.data() + (e + offset) * bytes;
            uint16_t h;
            std::memcpy(bytes == 4 ? static_cast<void*>(&got[e]) : &h, v, bytes);
            if (bytes == 2) got[e] = math.type == DType::BFloat16 ? bfloat16_to_float(h) : half_to_float(h);
          }
          EXPECT_LT(worst(want, got), math.tol) << "algorithm " << i;
        }
        gpu().force_product(-1);
      }
  EXPECT_GT(ran, 4 * 4 * 2);  // more algorithms ran than there are cases (2-byte aligned ones may have none)
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
    dispatch<BatchNormalizationStatisticsKernel>(cpu(), std::vector<RunningStatistics>{{0.1f, 1.01f, t(bc), t(mc), t(vc)}});
    dispatch<BatchNormalizationStatisticsKernel>(gpu(), std::vector<RunningStatistics>{{0.1f, 1.01f, t(sg), t(mg), t(vg)}});
    near(mc, host(mg), 1e-5f);
    near(vc, host(vg), 1e-5f);
  }
}

// bfloat16 rows of channels (channels-last pixels) against the cpu on the same rounded values:
// rows a co-resident grid holds both ways, the forward pass only, and neither (two-stage).
TEST_F(CudaVsCpu, BatchNormalizationRowsInBfloat16) {
  for (const auto& [n, c] : {std::array<int, 2>{2000, 192}, std::array<int, 2>{30000, 256}, std::array<int, 2>{150000, 64}}) {
    const size_t count = static_cast<size_t>(n) * c;
    auto xv = random(count, 2.f);
    for (auto& v : xv) v += 1.f;
    auto [x32, xg32] = pair(n, {c, 1, 1}, xv);
    auto [a32, ag32] = pair(n, {c, 1, 1}, random(count));
    auto [d32, dg32] = pair(n, {c, 1, 1}, random(count));
    const Image xg = xg32.converted(DType::BFloat16), ag = ag32.converted(DType::BFloat16),
                dyg = dg32.converted(DType::BFloat16);
    auto [xc, unused_x] = pair(n, {c, 1, 1}, host(xg.converted(DType::Float32)));
    auto [ac, unused_a] = pair(n, {c, 1, 1}, host(ag.converted(DType::Float32)));
    auto [dyc, unused_d] = pair(n, {c, 1, 1}, host(dyg.converted(DType::Float32)));
    const auto gamma = random(c), beta = random(c), mean = random(c);
    std::vector<float> var(c, 0.7f), bc(kBatchNormStatistics * c, 0.f);
    const auto gg = on_gpu(gamma), bg = on_gpu(beta), mg = on_gpu(mean), vg = on_gpu(var), sg = on_gpu(bc);
    const auto relu = NeuronDescriptor::make(NeuronType::ReLU);
    Image yc = Image::allocate({n, {c, 1, 1}, DType::Float32}, Device());
    Image yg = Image::allocate({n, {c, 1, 1}, DType::BFloat16}, Device(DeviceType::CUDA, 0));
    dispatch<BatchNormalizationKernel>(cpu(), 1e-5f, xc, t(gamma), t(beta), t(mean), t(var), t(bc), false, Tensor(ac),
                                       relu, yc);
    dispatch<BatchNormalizationKernel>(gpu(), 1e-5f, xg, t(gg), t(bg), t(mg), t(vg), t(sg), false, Tensor(ag), relu, yg);
    EXPECT_LT(worst(host(yc), host(yg.converted(DType::Float32))), 1e-2f) << n << "x" << c;
    const auto sh = host(sg);
    near(std::vector<float>(bc.begin(), bc.begin() + 3 * c), std::vector<float>(sh.begin(), sh.begin() + 3 * c), 1e-4f);
    Image dxc = Image::allocate({n, {c, 1, 1}, DType::Float32}, Device());
    Image dxg = Image::allocate({n, {c, 1, 1}, DType::BFloat16}, Device(DeviceType::CUDA, 0));
    std::vector<float> dgc(c), dbc(c);
    const auto dgg = on_gpu(dgc), dbg = on_gpu(dbc);
    // No neuron's gradient here: a relu's would flip where the two devices' coefficients straddle 0.
    const auto none = NeuronDescriptor::make(NeuronType::None);
    dispatch<BatchNormalizationGradientKernel>(cpu(), xc, dyc, t(gamma), t(beta), t(bc), none, dxc, t(dgc), t(dbc));
    dispatch<BatchNormalizationGradientKernel>(gpu(), xg, dyg, t(gg), t(bg), t(sg), none, dxg, t(dgg), t(dbg));
    EXPECT_LT(worst(dgc, host(dgg)), 1e-3f) << n << "x" << c;
    EXPECT_LT(worst(dbc, host(dbg)), 1e-3f) << n << "x" << c;
    EXPECT_LT(worst(host(dxc), host(dxg.converted(DType::Float32))), 1e-2f) << n << "x" << c;
  }
}

// More nodes than one launch takes, of 1 to 600 channels, each with its momentum; one without
// an unbiased variance (a batch of one value per channel).
TEST_F(CudaVsCpu, RunningStatisticsOfManyNodes) {
  std::vector<RunningStatistics> on_cpu, on_device;
  std::vector<std::vector<float>> cpu_values;
  std::vector<std::shared_ptr<Buffer>> device_values;
  for (int i = 0; i < 200; ++i) {
    const int c = 1 + (i * 37) % 600;
    const float momentum = 0.05f + 0.001f * i, unbias = i == 7 ? 0.f : 1.f + 1.f / (i + 2);
    for (auto v : {random(kBatchNormStatistics * c), random(c), random(c, 0.5f)}) {
      cpu_values.push_back(v);
      device_values.push_back(on_gpu(v));
    }
    const size_t k = cpu_values.size() - 3;
    on_cpu.push_back({momentum, unbias, t(cpu_values[k]), t(cpu_values[k + 1]), t(cpu_values[k + 2])});
    on_device.push_back({momentum, unbias, t(device_values[k]), t(device_values[k + 1]), t(device_values[k + 2])});
  }
  const auto before = cpu_values;
  dispatch<BatchNormalizationStatisticsKernel>(cpu(), on_cpu);
  dispatch<BatchNormalizationStatisticsKernel>(gpu(), on_device);
  for (size_t i = 0; i < on_cpu.size(); ++i) {
    const std::vector<float>& stats = before[3 * i];
    const std::vector<float>& mean = before[3 * i + 1];
    const std::vector<float>& var = before[3 * i + 2];
    const size_t c = mean.size();
    std::vector<float> want_mean(c), want_var(c);
    for (size_t ch = 0; ch < c; ++ch) {
      want_mean[ch] = mean[ch] + on_cpu[i].momentum * (stats[ch] - mean[ch]);
      want_var[ch] = on_cpu[i].unbias > 0.f ? var[ch] + on_cpu[i].momentum * (stats[2 * c + ch] * on_cpu[i].unbias - var[ch])
                                            : var[ch];
    }
    near(cpu_values[3 * i + 1], want_mean, 1e-6f);
    near(cpu_values[3 * i + 2], want_var, 1e-6f);
    near(host(device_values[3 * i + 1]), want_mean, 1e-6f);
    near(host(device_values[3 * i + 2]), want_var, 1e-6f);
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
#endif  // NNGRAPH_HAVE_CUDA
