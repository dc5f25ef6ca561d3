#pragma once
// Plain descriptors shared by nodes, data sources and kernels.
#include <cstddef>
#include <optional>
#include <string>

namespace nngraph {

// Every neuron type, once: X(enum name, name, default a, b, c). Its formula, derivative and
// whether that follows from the output are one struct each in src/backends/math.h; the enum,
// the names and every switch over the types are derived from this list. A base c of -1 is e.
//   leaky_relu x>=0 ? x : a·x        hard_sigmoid clamp(a·x+b, 0, 1)   tanh a·tanh(b·x)
//   linear a·x+b                     elu x>=0 ? x : a·(eˣ-1)          softplus a·log(1+e^(b·x))
//   gelu x·Φ(x)                      gelu_tanh its tanh approximation  silu x·σ(a·x)
//   hard_swish x·clamp(x+3, 0, 6)/6  relun min(x>=0 ? x : a·x, b)      power (a+b·x)^c
//   exponential c^(a·x+b)            logarithm log_c(a·x+b)
#define NNGRAPH_NEURONS(X)                          \
  X(None, "none", 0.f, 0.f, 0.f)                    \
  X(ReLU, "relu", 0.f, 0.f, 0.f)                    \
  X(LeakyReLU, "leaky_relu", 0.01f, 0.f, 0.f)       \
  X(Sigmoid, "sigmoid", 0.f, 0.f, 0.f)              \
  X(HardSigmoid, "hard_sigmoid", 0.2f, 0.5f, 0.f)   \
  X(TanH, "tanh", 1.f, 1.f, 0.f)                    \
  X(Linear, "linear", 1.f, 0.f, 0.f)                \
  X(ELU, "elu", 1.f, 0.f, 0.f)                      \
  X(SoftPlus, "softplus", 1.f, 1.f, 0.f)            \
  X(Absolute, "absolute", 0.f, 0.f, 0.f)            \
  X(GELU, "gelu", 0.f, 0.f, 0.f)                    \
  X(GELUTanh, "gelu_tanh", 0.f, 0.f, 0.f)           \
  X(SiLU, "silu", 1.f, 0.f, 0.f)                    \
  X(HardSwish, "hard_swish", 0.f, 0.f, 0.f)         \
  X(ReLUN, "relun", 0.f, 6.f, 0.f)                  \
  X(Power, "power", 0.f, 1.f, 2.f)                  \
  X(Exponential, "exponential", 1.f, 0.f, -1.f)     \
  X(Logarithm, "logarithm", 1.f, 0.f, -1.f)

enum class NeuronType {
#define NNGRAPH_NEURON_ENUM(type, name, a, b, c) type,
  NNGRAPH_NEURONS(NNGRAPH_NEURON_ENUM)
#undef NNGRAPH_NEURON_ENUM
};

// An activation f(x) with its parameters (MPSNNNeuronDescriptor).
struct NeuronDescriptor {
  NeuronType type = NeuronType::None;
  float a = 0.f, b = 0.f, c = 0.f;

  // Fills the parameters the caller leaves out with each type's defaults; throws on
  // non-finite ones and on a base c that is neither -1 (e) nor positive and not 1.
  static NeuronDescriptor make(NeuronType type, std::optional<float> a = {},
                               std::optional<float> b = {}, std::optional<float> c = {});
  static NeuronType parse(const std::string& name);
  const char* name() const;
  float apply(float x) const;
  // True when f'(x) can be computed from y = f(x) alone (not for absolute, gelu, silu,
  // hard swish and power, nor for leaky relu, elu and relun with a < 0), which lets a
  // training graph fold the neuron into a convolution and keep only its output.
  bool derivative_from_output() const;
  // f'(x) from x, or from y when derivative_from_output().
  float derivative(float x_or_y) const;
};

struct ConvolutionDescriptor {
  int kernel_height = 1, kernel_width = 1;
  int input_feature_channels = 0, output_feature_channels = 0;
  int stride_y = 1, stride_x = 1;
  int dilation_y = 1, dilation_x = 1;
  int groups = 1;
  NeuronDescriptor neuron;  // fused activation applied after the bias
  // Weights of a ConvolutionTranspose: input × output/groups × kh × kw (PyTorch's and ONNX's
  // layout: those of the convolution it transposes).
  bool transposed = false;

  size_t weight_count() const {
    return static_cast<size_t>(output_feature_channels) * (input_feature_channels / groups) *
           kernel_height * kernel_width;
  }
  // Throws InvalidInput, naming `label`, on non-positive sizes or bad groups.
  void validate(const std::string& label) const;
  std::string str() const;
};

// Every loss type, once: X(enum name, name, reduces over the channels at each pixel (or the
// whole image), takes label smoothing). The formulas are src/backends/math.h's.
#define NNGRAPH_LOSSES(X)                                                      \
  X(SoftMaxCrossEntropy, "softmax_cross_entropy", true, true)                  \
  X(SigmoidCrossEntropy, "sigmoid_cross_entropy", false, true)                 \
  X(CategoricalCrossEntropy, "categorical_cross_entropy", true, true)          \
  X(MeanSquaredError, "mean_squared_error", false, false)                      \
  X(MeanAbsoluteError, "mean_absolute_error", false, false)                    \
  X(Huber, "huber", false, false)                                              \
  X(Hinge, "hinge", false, false)                                              \
  X(Log, "log", false, false)                                                  \
  X(KullbackLeiblerDivergence, "kullback_leibler_divergence", true, false)     \
  X(CosineDistance, "cosine_distance", true, false)

enum class LossType {
#define NNGRAPH_LOSS_ENUM(type, name, per_image, smoothable) type,
  NNGRAPH_LOSSES(NNGRAPH_LOSS_ENUM)
#undef NNGRAPH_LOSS_ENUM
};
enum class Reduction { None, Sum, Mean };

// MPSCNNLossDescriptor. Softmax / categorical cross-entropy and KL divergence reduce over the
// channels at each pixel and `mean` divides by the N·H·W pixels; cosine distance compares
// whole images and `mean` divides by N; the elementwise types divide by all N·C·H·W values.
// `none` reports per-image losses and back-propagates their sum.
struct LossDescriptor {
  LossType type = LossType::SoftMaxCrossEntropy;
  Reduction reduction = Reduction::Mean;
  float weight = 1.f;
  float label_smoothing = 0.f;  // cross-entropy types only
  float delta = 1.f;            // huber
  float epsilon = 1e-7f;        // clamp for logarithms and divisions
  static LossType parse_type(const std::string& name);
  static Reduction parse_reduction(const std::string& name);
  const char* type_name() const;
  bool per_image() const;
  bool smoothable() const;
  void validate() const;
};

// Arithmetic of two images (MPSNNAdditionNode, ...Subtraction, ...Multiplication, ...Division).
enum class ArithmeticOp { Add, Subtract, Multiply, Divide };

enum class PaddingMode { Valid, Same, Full, Explicit };

// How a window node pads its source. same: output = ceil(in / stride), extra padding after;
// full: every partial overlap of the window; explicit: the given amounts.
struct Padding {
  PaddingMode mode = PaddingMode::Valid;
  int top = 0, bottom = 0, left = 0, right = 0;
  static Padding parse(const std::string& mode);
  static Padding explicit_(int top, int bottom, int left, int right);
  std::string str() const;
};

// What a padding node writes beyond its source's edge (MPSImageEdgeMode): a constant, the
// source mirrored about its edge pixel (reflect: d c b | a b c d | c b a), or the edge
// pixel repeated (edge).
enum class PadMode { Constant, Reflect, Edge };

// Amounts a padding node adds before and after each axis; negative amounts crop (constant
// mode only).
struct PadGeometry {
  int front = 0, back = 0;  // channels
  int top = 0, bottom = 0, left = 0, right = 0;
  std::string str() const;
};

// How an upsampling node fills between source pixels (MPSCNNUpsamplingNearest, ...Bilinear).
enum class UpsamplingMode { Nearest, Bilinear };

// One spatial axis of a window operation after padding is resolved.
struct Axis {
  int out = 0, pad_before = 0, pad_after = 0;
};
// Output size and padding of one axis; out <= 0 means the window does not fit.
Axis resolve_axis(int in, int kernel, int stride, int dilation, PaddingMode mode,
                  int explicit_before, int explicit_after);

}  // namespace nngraph
