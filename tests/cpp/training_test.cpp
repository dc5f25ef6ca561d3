// Training pieces: neuron derivatives, dropout masks, optimizer and loss kernels, gradient
// construction and a training step through the graph.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/math.h"
#include "backends/optimizer_math.h"
#include "graph/plan.h"
#include "nngraph/error.h"
#include "nngraph/graph.h"
#include "ops/arithmetic.h"
#include "ops/concatenation.h"
#include "ops/conv.h"
#include "ops/dropout.h"
#include "ops/loss.h"
#include "ops/neuron.h"
#include "ops/optimizer.h"
#include "ops/pool.h"
#include "ops/softmax.h"

using namespace nngraph;

TEST(Neuron, DerivativeMatchesFiniteDifferences) {
  for (auto t : {NeuronType::ReLU, NeuronType::LeakyReLU, NeuronType::Sigmoid, NeuronType::HardSigmoid,
                 NeuronType::TanH, NeuronType::Linear, NeuronType::ELU, NeuronType::SoftPlus, NeuronType::Absolute}) {
    const auto n = NeuronDescriptor::make(t, t == NeuronType::TanH ? std::optional<float>(1.3f) : std::nullopt,
                                          t == NeuronType::SoftPlus ? std::optional<float>(0.7f) : std::nullopt);
    for (float x : {-2.1f, -0.6f, 0.4f, 1.7f}) {
      const double h = 1e-3;
      const double numeric = (n.apply(static_cast<float>(x + h)) - n.apply(static_cast<float>(x - h))) / (2 * h);
      const float v = n.derivative_from_output() ? n.apply(x) : x;
      EXPECT_NEAR(n.derivative(v), numeric, 2e-3) << n.name() << " at " << x;
    }
  }
}

// The branch-free exp behind sigmoid and tanh: a few ulp of the double-precision functions over
// the float range, saturating at its ends, NaN through.
TEST(Neuron, FastExpSigmoidAndTanhAreAccurate) {
  double worst_exp = 0, worst_sigmoid = 0, worst_tanh = 0;
  for (float x = -87.f; x < 88.f; x += 0.0037f) {
    worst_exp = std::max(worst_exp, std::abs(math::exp_fast(x) / std::exp(double(x)) - 1));
    worst_sigmoid = std::max(worst_sigmoid, std::abs(math::sigmoid(x) * (1 + std::exp(-double(x))) - 1));
    const double t = std::tanh(double(x));
    worst_tanh = std::max(worst_tanh, std::abs(math::tanh_fast(x) - t) / std::max(std::abs(t), 1e-30));
  }
  EXPECT_LT(worst_exp, 4e-7);
  EXPECT_LT(worst_sigmoid, 4e-7);
  EXPECT_LT(worst_tanh, 6e-7);
  EXPECT_GT(math::exp_fast(1e4f), 1e38f);
  EXPECT_TRUE(std::isfinite(math::exp_fast(1e4f)));
  EXPECT_LT(math::exp_fast(-1e4f), 1e-37f);
  EXPECT_EQ(math::sigmoid(INFINITY), 1.f);
  EXPECT_LT(math::sigmoid(-INFINITY), 1e-38f);
  EXPECT_EQ(math::tanh_fast(-INFINITY), -1.f);
  EXPECT_TRUE(std::isnan(math::exp_fast(NAN)) && std::isnan(math::sigmoid(NAN)) && std::isnan(math::tanh_fast(NAN)));
}

TEST(Dropout, MaskIsAFunctionOfSeedStepAndIndex) {
  const uint64_t k = math::dropout_key(7, 3);
  int kept = 0;
  for (uint64_t i = 0; i < 100000; ++i) kept += math::dropout_keep(k, i, 0.3f);
  EXPECT_NEAR(kept / 100000.0, 0.3, 0.01);
  EXPECT_EQ(math::dropout_key(7, 3), k);
  EXPECT_NE(math::dropout_key(7, 4), k);
  EXPECT_NE(math::dropout_key(8, 3), k);
  for (uint64_t i = 0; i < 1000; ++i) EXPECT_TRUE(math::dropout_keep(k, i, 1.0f));
}

TEST(OptimizerKernel, SgdNesterovAndAdamFirstStep) {
  std::vector<float> w{1.f, -2.f}, g{0.5f, -0.25f}, v{0.1f, 0.2f};
  OptimizerStep s{OptimizerKind::SGD, OptimizerDescriptor{}};
  s.d.learning_rate = 0.1f;
  s.momentum = 0.9f;
  s.nesterov = true;
  dispatch<OptimizerKernel>(cpu_backend(), s, std::vector<TensorUpdate>{{w.data(), g.data(), {v.data()}, 2, 1}});
  EXPECT_FLOAT_EQ(v[0], 0.9f * 0.1f + 0.5f);
  EXPECT_FLOAT_EQ(w[0], 1.f - 0.1f * (0.5f + 0.9f * v[0]));
  std::vector<float> w2{1.f, -2.f}, m(2, 0.f), vv(2, 0.f);
  OptimizerStep a{OptimizerKind::Adam, OptimizerDescriptor{}};
  a.d.learning_rate = 0.01f;
  a.step = 1;
  dispatch<OptimizerKernel>(cpu_backend(), a, std::vector<TensorUpdate>{{w2.data(), g.data(), {m.data(), vv.data()}, 2, 1}});
  // Bias-corrected first step: lr·g/(|g| + ε) = lr·sign(g).
  EXPECT_NEAR(w2[0], 1.f - 0.01f, 1e-6);
  EXPECT_NEAR(w2[1], -2.f + 0.01f, 1e-6);
}

TEST(LossKernel, SoftmaxCrossEntropyOfUniformLogitsIsLogC) {
  const int n = 3, c = 5;
  Image x = Image::allocate({n, {c, 1, 1}, DType::Float32}, Device());
  Image lab = Image::allocate(x.descriptor(), Device()), grad = Image::allocate(x.descriptor(), Device());
  Image w = Image::allocate({n, {1, 1, 1}, DType::Float32}, Device());
  Image losses = Image::allocate({n, {1, 1, 1}, DType::Float32}, Device());
  std::fill_n(x.data_as<float>(), n * c, 0.3f);
  std::fill_n(lab.data_as<float>(), n * c, 0.f);
  for (int i = 0; i < n; ++i) lab.data_as<float>()[i * c + i] = 1.f;
  std::fill_n(w.data_as<float>(), n, 1.f);
  LossDescriptor d;
  dispatch<LossKernel>(cpu_backend(), d, 1.0 / n, nullptr, x, lab, w, grad, losses);
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(losses.data_as<float>()[i], std::log(5.0), 1e-6);
    EXPECT_NEAR(grad.data_as<float>()[i * c + i], (0.2 - 1.0) / n, 1e-6);
    EXPECT_NEAR(grad.data_as<float>()[i * c + (i + 1) % c], 0.2 / n, 1e-6);
  }
}

namespace {

std::shared_ptr<ArrayDataSource> layer(int k, int in, int out, const char* label, std::shared_ptr<Optimizer> opt) {
  ConvolutionDescriptor d;
  d.kernel_height = d.kernel_width = k;
  d.input_feature_channels = in;
  d.output_feature_channels = out;
  auto ds = std::make_shared<ArrayDataSource>(
      d, std::vector<std::vector<float>>{ArrayDataSource::initial_weights(d, Initializer::He, 1),
                                         std::vector<float>(out, 0.f)},
      label);
  ds->set_optimizer(std::move(opt));
  return ds;
}

}  // namespace

TEST(GradientPass, SharedResultsSumTheirGradientsAndInputGradientsAreSkipped) {
  auto x = std::make_shared<ImageNode>(ImageShape{2, 5, 5});
  auto conv = ConvolutionNode::create(x, layer(3, 2, 4, "conv", make_sgd({}, 0, false)), Padding::parse("same"));
  auto a = NeuronNode::create(conv->result_image(), NeuronDescriptor::make(NeuronType::TanH));
  auto b = NeuronNode::create(conv->result_image(), NeuronDescriptor::make(NeuronType::Sigmoid));
  auto sum = AdditionNode::create(a->result_image(), b->result_image());
  auto loss = LossNode::create(sum->result_image(), LossDescriptor{LossType::MeanSquaredError, Reduction::Sum});
  const auto roots = build_gradient_pass({loss});  // owns the gradient nodes the structure points at
  const Structure s = build_structure({}, roots);
  EXPECT_TRUE(s.training);
  int sums = 0;
  for (const auto* f : s.order) sums += std::string(f->label()).find("gradient_sum") != std::string::npos;
  EXPECT_EQ(sums, 1);  // conv's result feeds two neurons
  // conv's gradient runs for its weights only: its source is a graph input.
  for (const auto& step : s.steps)
    if (step.node->trains() == conv.get()) EXPECT_FALSE(step.output_needed);
}

TEST(GradientPass, ThreeOrMoreReadersSumTheirGradientsInOneNode) {
  auto x = std::make_shared<ImageNode>(ImageShape{2, 5, 5});
  auto conv = ConvolutionNode::create(x, layer(3, 2, 4, "conv", make_sgd({}, 0, false)), Padding::parse("same"));
  auto act = NeuronNode::create(conv->result_image(), NeuronDescriptor::make(NeuronType::Sigmoid));
  // conv's result: three readers (the neuron and two more); the neuron's: four.
  std::vector<ImageNodePtr> parts;
  for (int i = 0; i < 2; ++i)
    parts.push_back(NeuronNode::create(conv->result_image(), NeuronDescriptor::make(NeuronType::TanH))->result_image());
  for (int i = 0; i < 4; ++i)
    parts.push_back(NeuronNode::create(act->result_image(), NeuronDescriptor::make(NeuronType::TanH))->result_image());
  auto loss = LossNode::create(ConcatenationNode::create(parts)->result_image(),
                               LossDescriptor{LossType::MeanSquaredError, Reduction::Sum});
  const auto roots = build_gradient_pass({loss});
  const Structure s = build_structure({}, roots);
  std::map<std::string, std::vector<std::string>> kinds;  // gradient sums by label: their kinds
  for (const auto* f : s.order)
    if (f->label().find("gradient_sum") != std::string::npos) kinds[f->label()].push_back(f->kind());
  // Each result's in one sum; the neuron's gradient folds into its sum's step, read as one more source.
  EXPECT_EQ(kinds[conv->label() + "_gradient_sum"], std::vector<std::string>{"sum"});
  EXPECT_EQ(kinds[act->label() + "_gradient_sum"], std::vector<std::string>{"sum"});
  EXPECT_EQ(kinds.size(), 2u);
  int folded = 0;
  for (const auto& st : s.steps)
    if (st.node->label() == act->label() + "_gradient_sum") {
      folded += st.fused.type == NeuronType::Sigmoid;
      EXPECT_EQ(st.inputs.size(), 5u);  // four gradients and the neuron's output
    }
  EXPECT_EQ(folded, 1);
}

TEST(TrainingGraph, StepLowersTheLossAndUpdatesEveryLayer) {
  auto opt = make_sgd(OptimizerDescriptor{0.05f}, 0.f, false);
  auto c = layer(3, 1, 3, "c", opt);
  auto f = layer(6, 3, 4, "f", opt);
  auto x = std::make_shared<ImageNode>(ImageShape{1, 6, 6});
  auto conv = ConvolutionNode::create(x, c, Padding::parse("same"));
  auto relu = NeuronNode::create(conv->result_image(), NeuronDescriptor::make(NeuronType::ReLU));
  auto fc = FullyConnectedNode::create(relu->result_image(), f);
  auto loss = LossNode::create(fc->result_image(), LossDescriptor{});
  auto g = Graph::training(loss);
  const int n = 4;
  Image img = Image::allocate({n, {1, 6, 6}, DType::Float32}, Device());
  for (size_t i = 0; i < img.descriptor().count(); ++i) img.data_as<float>()[i] = std::sin(0.37f * i);
  LossLabels labels{Image::allocate({n, {4, 1, 1}, DType::Float32}, Device()),
                    Image::allocate({n, {1, 1, 1}, DType::Float32}, Device())};
  std::fill_n(labels.labels.data_as<float>(), n * 4, 0.f);
  for (int i = 0; i < n; ++i) labels.labels.data_as<float>()[i * 4 + i % 4] = 1.f;
  std::fill_n(labels.weights.data_as<float>(), n, 1.f);
  const std::vector<float> c0(static_cast<const float*>(c->tensor("weights").data), static_cast<const float*>(c->tensor("weights").data) + 27);
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    auto h = g->encode({img}, {labels});
    h->wait();
    (step == 0 ? first : last) = h->loss();
  }
  EXPECT_LT(last, first * 0.5);
  EXPECT_NE(static_cast<const float*>(c->tensor("weights").data)[0], c0[0]);
  EXPECT_EQ(c->optimizer_step(), 20);
  EXPECT_THROW(g->encode({img}, {}), InvalidInput);  // labels are required
}

TEST(LossScale, SkipsAndHalvesOnOverflowAndGrowsAfterCleanSteps) {
  math::LossScaleState s;
  s.scale = 1024.f;
  for (int step = 0; step < 3; ++step) math::advance_loss_scale(s, 2.f, 0.5f, 3);
  EXPECT_EQ(s.scale, 2048.f);  // grown after three clean steps
  EXPECT_EQ(s.good, 0);
  EXPECT_EQ(s.report[0], 1024.f);
  math::advance_loss_scale(s, 2.f, 0.5f, 3);
  s.found = 1;  // the next step's gradients overflow
  math::advance_loss_scale(s, 2.f, 0.5f, 3);
  EXPECT_EQ(s.scale, 1024.f);
  EXPECT_EQ(s.report[0], 2048.f);
  EXPECT_EQ(s.report[1], 1.f);
  EXPECT_EQ(s.skipped, 1);
  EXPECT_EQ(s.good, 0);  // the clean run restarts
  EXPECT_EQ(s.found, 0);
  s.scale = 3.0e38f;
  for (int step = 0; step < 3; ++step) math::advance_loss_scale(s, 2.f, 0.5f, 3);
  EXPECT_EQ(s.scale, 3.0e38f);  // stays finite
}

TEST(LossScale, AdamConstantsFollowTheStep) {
  OptimizerStep s{OptimizerKind::Adam, OptimizerDescriptor{}};
  s.step = 7;
  const math::UpdateConstants seventh(s);
  s.step = 9;
  math::UpdateConstants k(s);
  k.at_step(7);  // two steps skipped
  EXPECT_EQ(k.step_size, seventh.step_size);
  EXPECT_EQ(k.inv_sqrt_c2, seventh.inv_sqrt_c2);
}
