// Addition, subtraction, multiplication and division of two images: shape rule, gradient
// wiring and kernel dispatch.
#include "ops/arithmetic.h"

#include <algorithm>

#include "nngraph/error.h"

namespace nngraph {
namespace {

const char* kind_of(ArithmeticOp op) {
  switch (op) {
    case ArithmeticOp::Add: return "addition";
    case ArithmeticOp::Subtract: return "subtraction";
    case ArithmeticOp::Multiply: return "multiplication";
    case ArithmeticOp::Divide: return "division";
  }
  return "arithmetic";
}

}  // namespace

ImageShape broadcast_shape(const ImageShape& a, const ImageShape& b, const std::string& node) {
  auto axis = [&](int x, int y) {
    if (x != y && x != 1 && y != 1)
      fail("[", node, "] sources differ in shape: ", a.str(), " and ", b.str(),
           " (each axis must match or be 1 in one of them)");
    return std::max(x, y);
  };
  return {axis(a.c, b.c), axis(a.h, b.h), axis(a.w, b.w)};
}

ArithmeticNode::ArithmeticNode(ArithmeticOp op, ImageNodePtr a, ImageNodePtr b, std::string label)
    : FilterNode({std::move(a), std::move(b)}, std::move(label), kind_of(op)), op_(op) {
  set_default_label(kind());
}

std::shared_ptr<ArithmeticNode> ArithmeticNode::create(ArithmeticOp op, ImageNodePtr a, ImageNodePtr b,
                                                       std::string label) {
  switch (op) {
    case ArithmeticOp::Add: return AdditionNode::create(std::move(a), std::move(b), std::move(label));
    case ArithmeticOp::Subtract: return SubtractionNode::create(std::move(a), std::move(b), std::move(label));
    case ArithmeticOp::Multiply: return MultiplicationNode::create(std::move(a), std::move(b), std::move(label));
    case ArithmeticOp::Divide: return DivisionNode::create(std::move(a), std::move(b), std::move(label));
  }
  fail("[arithmetic] unknown op");
}

ImageShape ArithmeticNode::infer(const std::vector<ImageShape>& s) const { return broadcast_shape(s[0], s[1], label()); }

void ArithmeticNode::encode(const EncodeArgs& a) const {
  dispatch<ArithmeticKernel>(a.backend, op_, *a.sources[0], *a.sources[1], a.fused,
                             a.sources.size() > 2 ? Tensor(*a.sources[2]) : Tensor(), a.result);
}

namespace {

bool same_images(const std::vector<ImageShape>& s) {
  return std::all_of(s.begin(), s.end(), [&](const ImageShape& x) { return x == s[0]; });
}

}  // namespace

bool ArithmeticNode::channels_last(DeviceType, const std::vector<ImageShape>& s) const { return same_images(s); }

bool ArithmeticGradientNode::channels_last(DeviceType, const std::vector<ImageShape>& s) const {
  return same_images(s);
}

std::vector<FilterNodePtr> ArithmeticNode::make_gradients(const ImageNodePtr& dy) {
  return {std::make_shared<ArithmeticGradientNode>(dy, *this, 0), std::make_shared<ArithmeticGradientNode>(dy, *this, 1)};
}

namespace {

// Sums and differences need only the operand's shape; products and quotients both values.
std::vector<ImageNodePtr> gradient_sources(const ImageNodePtr& dy, const ArithmeticNode& f, int operand) {
  if (f.op() == ArithmeticOp::Add || f.op() == ArithmeticOp::Subtract) return {dy, f.sources()[operand]};
  return {dy, f.sources()[0], f.sources()[1]};
}

}  // namespace

std::shared_ptr<SumNode> SumNode::create(std::vector<ImageNodePtr> sources, std::string label) {
  if (sources.size() < 2) fail("[", label.empty() ? kKind : label, "] a sum needs two sources or more");
  std::shared_ptr<SumNode> node(new SumNode(std::move(sources), std::move(label), kKind));
  node->set_default_label(kKind);
  return node;
}

ImageShape SumNode::infer(const std::vector<ImageShape>& s) const {
  for (size_t i = 1; i < s.size(); ++i)
    if (!(s[i] == s[0]))
      fail("[", label(), "] source ", i, " is ", s[i].str(), " but source 0 is ", s[0].str(),
           " (a sum needs sources of one shape)");
  return s[0];
}

void SumNode::encode(const EncodeArgs& a) const {
  const size_t addends = sources().size();  // then a folded neuron's output, where there is one
  std::vector<Tensor> terms;
  for (size_t i = 0; i < addends; ++i) terms.emplace_back(*a.sources[i]);
  dispatch<SumKernel>(a.backend, terms, a.fused, a.sources.size() > addends ? Tensor(*a.sources[addends]) : Tensor(),
                      a.result);
}

ArithmeticGradientNode::ArithmeticGradientNode(const ImageNodePtr& dy, const ArithmeticNode& forward, int operand)
    : GradientNode(gradient_sources(dy, forward, operand), forward, "arithmetic_gradient"),
      op_(forward.op()), operand_(operand) {}

ImageShape ArithmeticGradientNode::infer(const std::vector<ImageShape>& s) const {
  return s.size() == 2 ? s[1] : s[1 + operand_];
}

bool ArithmeticGradientNode::passes_through(const std::vector<ImageShape>& s) const {
  const bool unit = op_ == ArithmeticOp::Add || (op_ == ArithmeticOp::Subtract && operand_ == 0);
  return unit && s[1] == s[0];
}

void ArithmeticGradientNode::encode(const EncodeArgs& a) const {
  const Image& first = *a.sources[1];
  const Image& second = a.sources.size() > 2 ? *a.sources[2] : first;
  dispatch<ArithmeticGradientKernel>(a.backend, op_, operand_, first, second, *a.sources[0], a.result);
}

}  // namespace nngraph
