// Graph building, shape inference, fusion, memory planning, execution and data sources.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "graph/executor.h"
#include "graph/plan.h"
#include "nngraph/error.h"
#include "nngraph/graph.h"
#include "ops/arithmetic.h"
#include "ops/concatenation.h"
#include "ops/conv.h"
#include "ops/dropout.h"
#include "ops/loss.h"
#include "ops/neuron.h"
#include "ops/pool.h"
#include "ops/softmax.h"

using namespace nngraph;

namespace {

ConvolutionDescriptor conv_desc(int k, int in, int out) {
  ConvolutionDescriptor d;
  d.kernel_height = d.kernel_width = k;
  d.input_feature_channels = in;
  d.output_feature_channels = out;
  return d;
}

std::shared_ptr<ArrayDataSource> source(int k, int in, int out, const std::string& label, uint64_t seed) {
  auto d = conv_desc(k, in, out);
  return std::make_shared<ArrayDataSource>(
      d, std::vector<std::vector<float>>{ArrayDataSource::initial_weights(d, Initializer::He, seed),
                                         std::vector<float>(out, 0.1f)},
      label);
}

Image filled(int n, ImageShape s, float step) {
  Image img = Image::allocate({n, s, DType::Float32}, Device());
  std::vector<float> v(img.descriptor().count());
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(step * static_cast<float>(i));
  img.copy_from_host(v.data());
  return img;
}

// Records calls so tests can see the load → weights → purge order.
class LoggingSource : public DataSource {
 public:
  LoggingSource(std::string label, std::vector<std::string>* log, bool fail_weights = false)
      : inner_(source(3, 2, 2, label, 9)), log_(log), fail_(fail_weights) {}
  ParameterDescriptor descriptor() override { return inner_->descriptor(); }
  std::string label() override { return inner_->label(); }
  bool load() override {
    log_->push_back("load " + label());
    return true;
  }
  void purge() override { log_->push_back("purge " + label()); }
  WeightsView tensor(const std::string& name) override {
    if (name != "weights") return inner_->tensor(name);
    log_->push_back("weights " + label());
    auto v = inner_->tensor(name);
    if (fail_) v.count -= 1;
    return v;
  }

 private:
  std::shared_ptr<ArrayDataSource> inner_;
  std::vector<std::string>* log_;
  bool fail_;
};

}  // namespace

TEST(GraphBuild, InfersShapesAndFusesNeurons) {
  auto x = std::make_shared<ImageNode>(ImageShape{1, 12, 12});
  auto c = ConvolutionNode::create(x, source(3, 1, 4, "conv", 1), Padding::parse("same"));
  auto r = NeuronNode::create(c->result_image(), NeuronDescriptor::make(NeuronType::ReLU));
  auto p = PoolingNode::create(r->result_image(), PoolingMode::Max, 2, 2, 0, 0, Padding{});
  auto d = DropoutNode::create(p->result_image(), 0.5f, 1);
  auto f = FullyConnectedNode::create(d->result_image(), source(6, 4, 3, "fc", 2));
  Graph g({f->result_image()});
  const MemoryPlan plan = g.memory_plan(8);
  EXPECT_EQ(plan.steps, (std::vector<std::string>{"conv+relu", "max_pooling", "fc"}));
  EXPECT_LT(plan.planned_bytes, plan.naive_bytes);
  auto out = g.run({filled(8, {1, 12, 12}, 0.1f)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (ImageShape{3, 1, 1}));
  EXPECT_EQ(out[0].batch(), 8);
}

// Channels-last plans: images of several channels and pixels lie NHWC; a node that does not
// read NHWC on the device (convolution on cpu) converts, an elementwise one does not.
TEST(GraphBuild, ChannelsLastPlansConvertAroundNodesThatReadNchw) {
  auto x = std::make_shared<ImageNode>(ImageShape{1, 6, 6});
  auto c = ConvolutionNode::create(x, source(3, 1, 4, "conv", 1), Padding::parse("same"));
  auto s = NeuronNode::create(c->result_image(), NeuronDescriptor::make(NeuronType::Sigmoid));
  auto e = NeuronNode::create(s->result_image(), NeuronDescriptor::make(NeuronType::TanH));
  auto p = PoolingNode::create_global(e->result_image(), PoolingMode::Average);
  const Structure st = build_structure({p->result_image()}, {});
  ASSERT_EQ(st.steps.size(), 3u);  // conv+sigmoid, tanh, pooling
  const Plan nchw = make_plan(st, {{1, 6, 6}}, DType::Float32, Layout::NCHW, DeviceType::CPU);
  const Plan nhwc = make_plan(st, {{1, 6, 6}}, DType::Float32, Layout::NHWC, DeviceType::CPU);
  EXPECT_EQ(nchw.converts, (std::vector<bool>{false, false, false}));
  EXPECT_EQ(nhwc.converts, (std::vector<bool>{true, false, true}));
  for (const Step& step : st.steps) EXPECT_EQ(nchw.layouts[step.output], Layout::NCHW);
  EXPECT_EQ(nhwc.layouts[st.steps[0].output], Layout::NHWC);  // 4×6×6
  EXPECT_EQ(nhwc.layouts[st.steps[2].output], Layout::NCHW);  // 4×1×1: the same memory
  EXPECT_EQ(nhwc.layouts[0], Layout::NCHW);                   // one channel: the same memory
  EXPECT_FALSE(nhwc.in_arena[0]);  // nothing to permute in
}

TEST(GraphBuild, ErrorsNameTheNode) {
  auto x = std::make_shared<ImageNode>(ImageShape{3, 8, 8});
  auto c = ConvolutionNode::create(x, source(3, 1, 4, "conv1", 1), Padding{});
  try {
    Graph g({c->result_image()});
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "[conv1] source has 3 feature channels, weights expect 1");
  }
  auto p = PoolingNode::create(std::make_shared<ImageNode>(ImageShape{1, 1, 1}), PoolingMode::Max, 2, 2, 0, 0,
                               Padding{}, false, 1, 1, "pool");
  EXPECT_THROW(Graph({p->result_image()}), InvalidInput);
}

TEST(GraphBuild, DanglingResultAndMissingSources) {
  auto x = std::make_shared<ImageNode>();
  EXPECT_THROW(Graph({x}), InvalidInput);  // no filter produces it
  EXPECT_THROW(Graph(std::vector<ImageNodePtr>{}), InvalidInput);
  auto a = AdditionNode::create(std::make_shared<ImageNode>(), std::make_shared<ImageNode>());
  Graph g({a->result_image()});
  EXPECT_EQ(g.sources().size(), 2u);
  EXPECT_THROW(g.run({filled(1, {1, 2, 2}, 1.f)}), InvalidInput);
  EXPECT_THROW(g.run({filled(2, {1, 2, 2}, 1.f), filled(3, {1, 2, 2}, 1.f)}), InvalidInput);
  EXPECT_THROW(g.run({filled(1, {1, 2, 2}, 1.f), filled(1, {1, 2, 3}, 1.f)}), InvalidInput);
  EXPECT_THROW(FilterNodePtr(AdditionNode::create(nullptr, nullptr)), InvalidInput);
}

TEST(GraphBuild, DefaultLabelsAreNumbered) {
  auto x = std::make_shared<ImageNode>();
  auto r1 = NeuronNode::create(x, NeuronDescriptor::make(NeuronType::ReLU));
  auto r2 = NeuronNode::create(r1->result_image(), NeuronDescriptor::make(NeuronType::ReLU));
  auto t = NeuronNode::create(r2->result_image(), NeuronDescriptor::make(NeuronType::TanH), "mine");
  Graph g({t->result_image()});
  EXPECT_EQ(g.node_labels(), (std::vector<std::string>{"relu_1", "relu_2", "mine"}));
}

TEST(GraphExec, ConcatenationAndAdditionShareTheArenaCorrectly) {
  auto x = std::make_shared<ImageNode>();
  auto a = NeuronNode::create(x, NeuronDescriptor::make(NeuronType::Linear, 2.f, 1.f));
  auto b = NeuronNode::create(x, NeuronDescriptor::make(NeuronType::Absolute));
  auto s = AdditionNode::create(a->result_image(), b->result_image());
  auto cat = ConcatenationNode::create({s->result_image(), x, a->result_image()});
  Graph g({cat->result_image()});
  Image in = filled(3, {2, 3, 3}, 0.7f);
  std::vector<float> xv(in.descriptor().count());
  in.copy_to_host(xv.data());
  auto out = g.run({in});
  ASSERT_EQ(out[0].shape(), (ImageShape{6, 3, 3}));
  std::vector<float> y(out[0].descriptor().count());
  out[0].copy_to_host(y.data());
  for (int n = 0; n < 3; ++n)
    for (int c = 0; c < 2; ++c)
      for (int p = 0; p < 9; ++p) {
        const float v = xv[(n * 2 + c) * 9 + p];
        EXPECT_FLOAT_EQ(y[(n * 6 + c) * 9 + p], 2.f * v + 1.f + std::fabs(v));
        EXPECT_FLOAT_EQ(y[(n * 6 + 2 + c) * 9 + p], v);
        EXPECT_FLOAT_EQ(y[(n * 6 + 4 + c) * 9 + p], 2.f * v + 1.f);
      }
}

TEST(DataSources, LoadedOneNodeAtATimeAndOnlyOnce) {
  std::vector<std::string> log;
  auto x = std::make_shared<ImageNode>(ImageShape{2, 5, 5});
  auto c1 = ConvolutionNode::create(x, std::make_shared<LoggingSource>("a", &log), Padding::parse("same"));
  auto c2 = ConvolutionNode::create(c1->result_image(), std::make_shared<LoggingSource>("b", &log),
                                    Padding::parse("same"));
  Graph g({c2->result_image()});
  const std::vector<std::string> once{"load a", "weights a", "purge a", "load b", "weights b", "purge b"};
  EXPECT_EQ(log, once);
  g.run({filled(1, {2, 5, 5}, 0.3f)});
  g.run({filled(2, {2, 5, 5}, 0.3f)});
  EXPECT_EQ(log, once);  // runs do not re-read weights
  g.reload_from_data_sources();
  EXPECT_EQ(log.size(), 2 * once.size());
}

TEST(DataSources, WrongSizeRaisesAndKeepsOldWeights) {
  std::vector<std::string> log;
  auto x = std::make_shared<ImageNode>(ImageShape{2, 4, 4});
  EXPECT_THROW(Graph({ConvolutionNode::create(x, std::make_shared<LoggingSource>("bad", &log, true), Padding{})
                          ->result_image()}),
               InvalidInput);
  EXPECT_EQ(log.back(), "purge bad");  // purged even on error
}

TEST(GraphExec, EncodeIsAsynchronousWithCallbacksInOrder) {
  auto x = std::make_shared<ImageNode>();
  auto s = SoftMaxNode::create(x, false);
  Graph g({s->result_image()}, Device(), 2);
  std::vector<int> order;
  std::mutex m;
  std::vector<HandlePtr> handles;
  for (int i = 0; i < 6; ++i)
    handles.push_back(g.encode({filled(4, {10, 1, 1}, 0.1f * i)}, {}, [&, i](Handle& h) {
      EXPECT_EQ(h.results().size(), 1u);
      std::lock_guard<std::mutex> lock(m);
      order.push_back(i);
    }));
  for (auto& h : handles) h->wait();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  auto bad = g.encode({filled(4, {10, 1, 1}, 0.1f)}, {}, [](Handle&) { throw DeviceError("callback failed"); });
  EXPECT_THROW(bad->wait(), DeviceError);
}

// Work that may run here does when the caller waited for the encode before; otherwise it keeps
// its place behind the earlier ones on the worker.
TEST(ExecutorTest, RunsHereWhenIdleAndKeepsOrderBehindQueuedWork) {
  std::vector<int> order;
  std::mutex m;
  std::atomic<bool> release{false};
  const auto caller = std::this_thread::get_id();
  {
    // Declared before the executor, whose destructor waits for the work that refers to them.
    auto h0 = std::make_shared<Handle>(), h1 = std::make_shared<Handle>(), h2 = std::make_shared<Handle>();
    Executor ex(4);
    auto finish = [&](const HandlePtr& h) { ex.complete(nullptr, h, nullptr); };
    ex.submit(h0, [&] {
      EXPECT_EQ(std::this_thread::get_id(), caller);
      order.push_back(0);
      finish(h0);
    }, true);
    h0->wait();
    ex.submit(h1, [&] {  // on the worker, held until released
      while (!release) std::this_thread::yield();
      std::lock_guard<std::mutex> lock(m);
      order.push_back(1);
      finish(h1);
    });
    ex.submit(h2, [&] {
      EXPECT_NE(std::this_thread::get_id(), caller);  // h1 was not waited for: queued behind it
      std::lock_guard<std::mutex> lock(m);
      order.push_back(2);
      finish(h2);
    }, true);
    release = true;
  }  // waits for all three
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}
