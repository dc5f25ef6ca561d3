#pragma once
// Graph nodes: image nodes are data edges, filter nodes are operations (MPSNNFilterNode).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nngraph/data_source.h"
#include "nngraph/descriptors.h"
#include "nngraph/image.h"

namespace nngraph {

class Backend;
class FilterNode;
struct ConvGeometry;
struct PoolGeometry;

// A data edge. Made directly it is a graph source, optionally with a declared C×H×W shape
// (then the graph checks every shape when it is built); a filter node makes its result.
class ImageNode {
 public:
  explicit ImageNode(std::optional<ImageShape> shape = {}, std::string label = "");
  FilterNode* producer() const { return producer_; }
  // True for the training state a node leaves for its gradient node (FilterNode::state_image).
  bool is_state() const { return is_state_; }
  const std::optional<ImageShape>& shape() const { return shape_; }
  const std::string& label() const { return label_; }
  void set_label(std::string label) { label_ = std::move(label); }

 private:
  friend class FilterNode;
  FilterNode* producer_ = nullptr;
  bool is_state_ = false;
  std::optional<ImageShape> shape_;
  std::string label_;
};
using ImageNodePtr = std::shared_ptr<ImageNode>;
using FilterNodePtr = std::shared_ptr<FilterNode>;

struct EncodeArgs {
  Backend& backend;
  std::vector<const Image*> sources;
  const Image& result;          // empty when nothing consumes it
  const WeightsState* weights;  // one per weight source of the node (or of the node a gradient node trains)
  GradientState* gradients;     // weight gradients a gradient node writes, one per source (else null)
  NeuronDescriptor fused;       // a neuron the graph folded into this node
  const uint64_t* step;         // counts encodes (in the backend's memory): seeds dropout masks
  const Image* losses;          // loss nodes: per-image loss values (N×1×1×1)
  bool allow_tf32;              // matrix products may use tf32 tensor cores (cuda)
  const Image* state = nullptr;  // training graphs: the state this node leaves for its gradient node
};

class FilterNode : public std::enable_shared_from_this<FilterNode> {
 public:
  virtual ~FilterNode() = default;
  FilterNode(const FilterNode&) = delete;
  FilterNode& operator=(const FilterNode&) = delete;

  // Shares ownership with this node, so holding the result keeps the node alive.
  ImageNodePtr result_image();
  const std::vector<ImageNodePtr>& sources() const { return sources_; }
  const std::string& label() const { return result_.label(); }
  void set_label(std::string label) {
    result_.set_label(std::move(label));
    default_label_ = false;
  }
  // True while the label is the node kind's default, which a graph may number.
  bool has_default_label() const { return default_label_; }

  // Gradient node(s) of this node, one per source: each turns d(loss)/d(result) into
  // d(loss)/d(source i) (MPS gradientFiltersWithSources).
  std::vector<FilterNodePtr> gradient_filters(const ImageNodePtr& source_gradient);
  // The single gradient node of a one-source node.
  FilterNodePtr gradient_filter(const ImageNodePtr& source_gradient);

  virtual const char* kind() const = 0;
  // Result shape from source shapes; throws InvalidInput naming this node.
  virtual ImageShape infer(const std::vector<ImageShape>& sources) const = 0;
  virtual void encode(const EncodeArgs& args) const = 0;
  // Trainable nodes: their data sources, each with the descriptor its weights must match.
  virtual std::vector<WeightSource> weight_sources() const { return {}; }
  // Floats per image this node leaves for its gradient node in a training graph (its
  // training state, read through state_image()); 0 when it leaves none.
  virtual size_t state_size(const std::vector<ImageShape>& sources) const {
    (void)sources;
    return 0;
  }
  ImageNodePtr state_image();
  // True when the result is source 0 itself (dropout at inference): no kernel runs.
  virtual bool identity(bool training) const {
    (void)training;
    return false;
  }
  // Convolution-like nodes can apply a following neuron in their epilogue.
  virtual bool accepts_fused_neuron() const { return false; }
  // Gradient nodes for source 1 that can apply a following neuron gradient, ⊙ f'(source 1),
  // in the same pass (source 1 being that neuron's output).
  virtual bool accepts_fused_neuron_gradient() const { return false; }
  // Gradient and loss nodes: a graph holding one runs forward nodes in training mode.
  virtual bool is_gradient() const { return false; }
  // Gradient nodes of trainable nodes: the forward node whose weights they train.
  virtual const FilterNode* trains() const { return nullptr; }

 protected:
  FilterNode(std::vector<ImageNodePtr> sources, std::string label, const char* kind);
  virtual std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient);

 private:
  std::vector<ImageNodePtr> sources_;
  ImageNode result_, state_;
  bool default_label_ = false;

 protected:
  void set_default_label(std::string label) {
    if (!default_label_ && !result_.label().empty()) return;
    result_.set_label(std::move(label));
    default_label_ = true;
  }
};

class ConvolutionNode : public FilterNode {
 public:
  static std::shared_ptr<ConvolutionNode> create(ImageNodePtr source,
                                                 std::shared_ptr<DataSource> weights,
                                                 Padding padding, std::string label = "");
  const char* kind() const override { return "convolution"; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;
  std::vector<WeightSource> weight_sources() const override { return {{source_.get(), desc_}}; }
  const ConvolutionDescriptor& descriptor() const { return desc_; }
  bool accepts_fused_neuron() const override { return desc_.neuron.type == NeuronType::None; }
  const Padding& padding() const { return padding_; }
  // Kernel geometry for a source of shape `in` (padding resolved).
  ConvGeometry geometry(const ImageShape& in) const;

  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;
 protected:
  ConvolutionNode(ImageNodePtr source, std::shared_ptr<DataSource> weights, Padding padding,
                  std::string label, const char* kind);
  std::shared_ptr<DataSource> source_;
  ConvolutionDescriptor desc_;
  Padding padding_;
};

// A convolution whose kernel covers the whole source: the descriptor's kernel equals the
// source's H×W with input channels C, or is 1×1 with input channels C·H·W (flattened).
class FullyConnectedNode : public ConvolutionNode {
 public:
  static std::shared_ptr<FullyConnectedNode> create(ImageNodePtr source,
                                                    std::shared_ptr<DataSource> weights,
                                                    std::string label = "");
  const char* kind() const override { return "fully_connected"; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;

 private:
  using ConvolutionNode::ConvolutionNode;
};

enum class PoolingMode { Max, Average };

class PoolingNode : public FilterNode {
 public:
  // stride 0 means stride = kernel. Average pooling divides by the in-bounds count unless
  // count_include_pad.
  static std::shared_ptr<PoolingNode> create(ImageNodePtr source, PoolingMode mode,
                                             int kernel_height, int kernel_width, int stride_y,
                                             int stride_x, Padding padding,
                                             bool count_include_pad = false,
                                             std::string label = "");
  const char* kind() const override { return "pooling"; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;
  PoolingMode mode() const { return mode_; }
  PoolGeometry geometry(const ImageShape& in) const;

  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;
 private:
  PoolingNode(ImageNodePtr source, std::string label) : FilterNode({std::move(source)}, std::move(label), "pooling") {}
  PoolingMode mode_ = PoolingMode::Max;
  int kh_ = 2, kw_ = 2, sy_ = 2, sx_ = 2;
  Padding padding_;
  bool count_include_pad_ = false;
};

class NeuronNode : public FilterNode {
 public:
  static std::shared_ptr<NeuronNode> create(ImageNodePtr source, NeuronDescriptor neuron,
                                            std::string label = "");
  const char* kind() const override { return "neuron"; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[0]; }
  void encode(const EncodeArgs& args) const override;
  const NeuronDescriptor& neuron() const { return neuron_; }

  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;
 private:
  using FilterNode::FilterNode;
  NeuronDescriptor neuron_;
};

// Softmax (or log-softmax) across feature channels, at every pixel of every image.
class SoftMaxNode : public FilterNode {
 public:
  static std::shared_ptr<SoftMaxNode> create(ImageNodePtr source, bool log,
                                             std::string label = "");
  const char* kind() const override { return log_ ? "log_softmax" : "softmax"; }
  bool log() const { return log_; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[0]; }
  void encode(const EncodeArgs& args) const override;

  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;
 private:
  using FilterNode::FilterNode;
  bool log_ = false;
};

// Keeps each value with keep_probability (scaled by 1/keep_probability) when training;
// the identity at inference.
class DropoutNode : public FilterNode {
 public:
  static std::shared_ptr<DropoutNode> create(ImageNodePtr source, float keep_probability,
                                             uint64_t seed, std::string label = "");
  const char* kind() const override { return "dropout"; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override { return sources[0]; }
  void encode(const EncodeArgs& args) const override;
  bool identity(bool training) const override { return !training; }
  float keep_probability() const { return keep_probability_; }
  uint64_t seed() const { return seed_; }

  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;
 private:
  using FilterNode::FilterNode;
  float keep_probability_ = 0.5f;
  uint64_t seed_ = 0;
};

class AdditionNode : public FilterNode {
 public:
  static std::shared_ptr<AdditionNode> create(ImageNodePtr a, ImageNodePtr b,
                                              std::string label = "");
  const char* kind() const override { return "addition"; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;

  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;
 private:
  using FilterNode::FilterNode;
};

// Joins sources along feature channels; all share H×W.
class ConcatenationNode : public FilterNode {
 public:
  static std::shared_ptr<ConcatenationNode> create(std::vector<ImageNodePtr> sources,
                                                   std::string label = "");
  const char* kind() const override { return "concatenation"; }
  ImageShape infer(const std::vector<ImageShape>& sources) const override;
  void encode(const EncodeArgs& args) const override;

  std::vector<FilterNodePtr> make_gradients(const ImageNodePtr& source_gradient) override;
 private:
  using FilterNode::FilterNode;
};

}  // namespace nngraph
