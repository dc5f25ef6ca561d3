// Neuron, softmax, dropout, addition and concatenation: shape rules and kernel dispatch.
#include "backends/backend.h"
#include "nngraph/error.h"
#include "nngraph/nodes.h"

namespace nngraph {

std::shared_ptr<NeuronNode> NeuronNode::create(ImageNodePtr source, NeuronDescriptor neuron,
                                               std::string label) {
  std::shared_ptr<NeuronNode> node(new NeuronNode({std::move(source)}, std::move(label), "neuron"));
  node->set_default_label(neuron.name());
  node->neuron_ = neuron;
  return node;
}

void NeuronNode::encode(const EncodeArgs& a) const { a.backend.neuron(neuron_, *a.sources[0], a.result); }

std::shared_ptr<SoftMaxNode> SoftMaxNode::create(ImageNodePtr source, bool log, std::string label) {
  std::shared_ptr<SoftMaxNode> node(new SoftMaxNode({std::move(source)}, std::move(label), "softmax"));
  node->log_ = log;
  node->set_default_label(node->kind());
  return node;
}

void SoftMaxNode::encode(const EncodeArgs& a) const { a.backend.softmax(log_, *a.sources[0], a.result); }

std::shared_ptr<DropoutNode> DropoutNode::create(ImageNodePtr source, float keep_probability,
                                                 uint64_t seed, std::string label) {
  std::shared_ptr<DropoutNode> node(new DropoutNode({std::move(source)}, std::move(label), "dropout"));
  node->set_default_label("dropout");
  if (!(keep_probability > 0.f && keep_probability <= 1.f))
    fail("[", node->label(), "] keep_probability must be in (0, 1], got ", keep_probability);
  node->keep_probability_ = keep_probability;
  node->seed_ = seed;
  return node;
}

// Runs only in training graphs; inference graphs alias dropout away.
void DropoutNode::encode(const EncodeArgs& a) const {
  a.backend.dropout(keep_probability_, seed_, a.step, *a.sources[0], a.result);
}

std::shared_ptr<AdditionNode> AdditionNode::create(ImageNodePtr a, ImageNodePtr b, std::string label) {
  std::shared_ptr<AdditionNode> node(new AdditionNode({std::move(a), std::move(b)}, std::move(label), "addition"));
  node->set_default_label("addition");
  return node;
}

ImageShape AdditionNode::infer(const std::vector<ImageShape>& s) const {
  if (s[0] != s[1]) fail("[", label(), "] sources differ in shape: ", s[0].str(), " and ", s[1].str());
  return s[0];
}

void AdditionNode::encode(const EncodeArgs& a) const {
  a.backend.add(*a.sources[0], *a.sources[1], a.result);
}

std::shared_ptr<ConcatenationNode> ConcatenationNode::create(std::vector<ImageNodePtr> sources,
                                                             std::string label) {
  std::shared_ptr<ConcatenationNode> node(
      new ConcatenationNode(std::move(sources), std::move(label), "concatenation"));
  node->set_default_label("concatenation");
  return node;
}

ImageShape ConcatenationNode::infer(const std::vector<ImageShape>& s) const {
  ImageShape out{0, s[0].h, s[0].w};
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].h != out.h || s[i].w != out.w)
      fail("[", label(), "] source ", i, " is ", s[i].str(), " but source 0 is ", s[0].str(),
           " (concatenation needs equal height and width)");
    out.c += s[i].c;
  }
  return out;
}

void ConcatenationNode::encode(const EncodeArgs& a) const {
  int offset = 0;
  for (const Image* s : a.sources) {
    a.backend.copy_channels(*s, a.result, offset);
    offset += s->shape().c;
  }
}

}  // namespace nngraph
