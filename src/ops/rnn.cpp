// The RNN graph node: an image's positions as a sequence, through a stack of recurrent layers.
#include "nngraph/error.h"
#include "ops/cast.h"
#include "ops/convert.h"
#include "ops/gradient.h"
#include "ops/rnn.h"
#include "ops/rnn_stack.h"

namespace nngraph {

bool RNNLayerGeometry::cell_has_c() const { return cell == RNNCell::LSTM; }
bool RNNLayerGeometry::has_extra() const { return cell == RNNCell::GRU || cell == RNNCell::MGU; }
void RNNLayerGeometry::require_float32() const {
  if (dtype != DType::Float32) fail<Unsupported>("[rnn] this kernel runs float32 layers, got ", dtype_name(dtype));
}

size_t RNNLayerGeometry::state_floats() const {
  const size_t step = size_t(batch) * hidden;
  return boundary() * (cell_has_c() ? 2 : 1) + steps * step * gates + (has_extra() ? steps * step : 0);
}
namespace {

std::shared_ptr<Buffer> floats(Backend& b, size_t count) { return b.allocate(count * sizeof(float)); }
float* data(const std::shared_ptr<Buffer>& b) { return static_cast<float*>(b->data()); }

// The layers compute in float32 in every graph format: a half graph's images are cast at the
// node's edges (sequences are short beside the products of their steps).

// img as float32: itself, or a cast copy (held in *held).
Tensor as_float(Backend& b, const Image& img, std::shared_ptr<Buffer>* held) {
  if (img.dtype() == DType::Float32) return img;
  *held = floats(b, img.descriptor().count());
  const Tensor wide(data(*held), img.batch(), img.shape());
  dispatch<CastKernel>(b, img, wide);
  return wide;
}

// N × C × steps (NCHW, positions flattened) → steps × N × C, time-major, float32.
std::shared_ptr<Buffer> to_time_major(Backend& b, const Image& img) {
  const int dims[3] = {img.batch(), img.shape().c, img.shape().h * img.shape().w}, perm[3] = {2, 0, 1};
  std::shared_ptr<Buffer> wide;
  const Tensor x = as_float(b, img, &wide);
  auto out = floats(b, img.descriptor().count());
  dispatch<PermuteKernel>(b, x, Tensor::vector(data(out), img.descriptor().count()), dims, perm);
  return out;
}

// Writes a float32 result into img (cast where img is half).
void store_float(Backend& b, const float* values, const Image& img) {
  dispatch<CastKernel>(b, Tensor(values, img.batch(), img.shape()), img);
}

void from_time_major(Backend& b, const float* seq, const Image& img) {
  const int dims[3] = {img.shape().h * img.shape().w, img.batch(), img.shape().c}, perm[3] = {1, 2, 0};
  const Tensor from = Tensor::vector(seq, img.descriptor().count());
  if (img.dtype() == DType::Float32) return dispatch<PermuteKernel>(b, from, img, dims, perm);
  auto wide = floats(b, img.descriptor().count());
  dispatch<PermuteKernel>(b, from, Tensor(data(wide), img.batch(), img.shape()), dims, perm);
  store_float(b, data(wide), img);
}

// Sources: dY, X, the forward node's training state.
class RNNGradientNode : public GradientNode {
 public:
  RNNGradientNode(const ImageNodePtr& dy, std::shared_ptr<RNNNode> forward)
      : GradientNode({dy, forward->sources()[0], forward->state_image()}, *forward, "rnn_gradient"),
        forward_(std::move(forward)) {}
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[1]; }
  const FilterNode* trains() const override { return forward_.get(); }

  void encode(const EncodeArgs& a) const override {
    const Image &dy = *a.sources[0], &x = *a.sources[1];
    const int steps = x.shape().h * x.shape().w, n = x.batch();
    const auto& stack = forward_->stack();
    const auto l = rnn_stack::layout(stack, steps, n);
    auto xt = to_time_major(a.backend, x);
    rnn_stack::IO io;
    io.x = data(xt);
    std::shared_ptr<Buffer> dyt, dxt;
    std::shared_ptr<Buffer> wide_dy;
    if (forward_->last_only()) {
      io.dy_last = as_float(a.backend, dy, &wide_dy).data_as<const float>();
    } else {
      dyt = to_time_major(a.backend, dy);
      io.dy = data(dyt);
    }
    if (!a.result.empty()) {
      dxt = floats(a.backend, x.descriptor().count());
      io.dx = data(dxt);
    }
    rnn_stack::gradient(a.backend, stack, l, a.weights, a.sources[2]->data_as<float>(), io, a.gradients);
    if (dxt) from_time_major(a.backend, data(dxt), a.result);
  }

 private:
  std::shared_ptr<RNNNode> forward_;
};

}  // namespace

std::shared_ptr<RNNNode> RNNNode::create(ImageNodePtr source, RNNStack stack, bool last_only, std::string label) {
  std::shared_ptr<RNNNode> node(new RNNNode(std::move(source), std::move(label)));
  node->set_default_label(RNNDescriptor::cell_name(stack.stages.empty() || stack.stages[0].empty()
                                                       ? RNNCell::LSTM : stack.stages[0][0].cell));
  stack.validate(node->label());
  node->stack_ = std::move(stack);
  node->last_only_ = last_only;
  return node;
}

ImageShape RNNNode::infer(const std::vector<ImageShape>& s) const {
  if (s[0].c != stack_.input_channels())
    fail("[", label(), "] source has ", s[0].c, " feature channels, the first layer reads ", stack_.input_channels());
  const int out = stack_.output_channels();
  return last_only_ ? ImageShape{out, 1, 1} : ImageShape{out, s[0].h, s[0].w};
}

size_t RNNNode::state_size(const std::vector<ImageShape>& s) const {
  return rnn_stack::layout(stack_, s[0].h * s[0].w, 1).total;
}

void RNNNode::encode(const EncodeArgs& a) const {
  const Image& x = *a.sources[0];
  const int steps = x.shape().h * x.shape().w, n = x.batch();
  const auto l = rnn_stack::layout(stack_, steps, n);
  std::shared_ptr<Buffer> scratch_state;
  float* state = a.state ? a.state->data_as<float>() : nullptr;
  if (!state) {
    scratch_state = floats(a.backend, l.total);
    state = data(scratch_state);
  }
  auto xt = to_time_major(a.backend, x);
  rnn_stack::IO io;
  io.x = data(xt);
  io.for_gradient = a.state != nullptr;  // graphs keep a state only for a gradient node
  std::shared_ptr<Buffer> yt, y_last;
  if (last_only_ && a.result.dtype() == DType::Float32) {
    io.y_last = a.result.data_as<float>();
  } else if (last_only_) {
    y_last = floats(a.backend, a.result.descriptor().count());
    io.y_last = data(y_last);
  } else {
    yt = floats(a.backend, a.result.descriptor().count());
    io.y = data(yt);
  }
  rnn_stack::forward(a.backend, stack_, l, a.weights, state, io);
  if (yt) from_time_major(a.backend, data(yt), a.result);
  if (y_last) store_float(a.backend, data(y_last), a.result);
}

std::vector<FilterNodePtr> RNNNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<RNNGradientNode>(dy, std::static_pointer_cast<RNNNode>(shared_from_this()))};
}

}  // namespace nngraph
