#include "nngraph/descriptors.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "backends/math.h"
#include "nngraph/error.h"

namespace nngraph {
namespace {

struct NeuronInfo {
  NeuronType type;
  const char* name;
  float a, b, c;  // defaults
};
constexpr NeuronInfo kNeurons[] = {
#define NNGRAPH_NEURON_INFO(type, name, a, b, c) {NeuronType::type, name, a, b, c},
    NNGRAPH_NEURONS(NNGRAPH_NEURON_INFO)
#undef NNGRAPH_NEURON_INFO
};

const NeuronInfo& info(NeuronType t) {
  for (const auto& n : kNeurons)
    if (n.type == t) return n;
  return kNeurons[0];
}

}  // namespace

NeuronDescriptor NeuronDescriptor::make(NeuronType type, std::optional<float> a,
                                        std::optional<float> b, std::optional<float> c) {
  const auto& i = info(type);
  const NeuronDescriptor n{type, a.value_or(i.a), b.value_or(i.b), c.value_or(i.c)};
  if (!std::isfinite(n.a) || !std::isfinite(n.b) || !std::isfinite(n.c))
    fail("[neuron] ", n.name(), " parameters must be finite, got a=", n.a, ", b=", n.b, ", c=", n.c);
  if ((type == NeuronType::Exponential || type == NeuronType::Logarithm) && n.c != -1.f &&
      (n.c <= 0.f || n.c == 1.f))
    fail("[neuron] ", n.name(), " base c must be positive and not 1 (or -1 for e), got ", n.c);
  return n;
}

NeuronType NeuronDescriptor::parse(const std::string& name) {
  for (const auto& n : kNeurons)
    if (name == n.name) return n.type;
  std::string all;
  for (const auto& n : kNeurons) all += std::string(all.empty() ? "" : ", ") + n.name;
  fail("[neuron] unknown neuron type '", name, "' (expected one of ", all, ")");
}

const char* NeuronDescriptor::name() const { return info(type).name; }

float NeuronDescriptor::apply(float x) const { return math::neuron(*this, x); }

bool NeuronDescriptor::derivative_from_output() const { return math::derivative_from_output(*this); }

float NeuronDescriptor::derivative(float v) const { return math::neuron_derivative(*this, v); }

namespace {

struct LossInfo {
  LossType type;
  const char* name;
  bool per_image, smoothable;
};
constexpr LossInfo kLosses[] = {
#define NNGRAPH_LOSS_INFO(type, name, per_image, smoothable) {LossType::type, name, per_image, smoothable},
    NNGRAPH_LOSSES(NNGRAPH_LOSS_INFO)
#undef NNGRAPH_LOSS_INFO
};

const LossInfo& loss_info(LossType t) {
  for (const auto& l : kLosses)
    if (l.type == t) return l;
  return kLosses[0];
}

}  // namespace

LossType LossDescriptor::parse_type(const std::string& name) {
  for (const auto& l : kLosses)
    if (name == l.name) return l.type;
  std::string all;
  for (const auto& l : kLosses) all += std::string(all.empty() ? "" : ", ") + l.name;
  fail("[loss] unknown loss type '", name, "' (expected one of ", all, ")");
}

Reduction LossDescriptor::parse_reduction(const std::string& name) {
  if (name == "none") return Reduction::None;
  if (name == "sum") return Reduction::Sum;
  if (name == "mean") return Reduction::Mean;
  fail("[loss] unknown reduction '", name, "' (expected none, sum or mean)");
}

const char* LossDescriptor::type_name() const { return loss_info(type).name; }
bool LossDescriptor::per_image() const { return loss_info(type).per_image; }
bool LossDescriptor::smoothable() const { return loss_info(type).smoothable; }

void LossDescriptor::validate() const {
  if (!(label_smoothing >= 0.f && label_smoothing < 1.f))
    fail("[loss] label_smoothing must be in [0, 1), got ", label_smoothing);
  if (label_smoothing > 0.f && !smoothable())
    fail("[loss] label_smoothing applies to the cross-entropy losses, not ", type_name());
  if (!(delta > 0.f) || !std::isfinite(delta)) fail("[loss] delta must be finite and > 0, got ", delta);
  if (!(epsilon > 0.f) || !std::isfinite(epsilon)) fail("[loss] epsilon must be finite and > 0, got ", epsilon);
  if (!std::isfinite(weight)) fail("[loss] weight must be finite, got ", weight);
}

void ConvolutionDescriptor::validate(const std::string& label) const {
  if (kernel_height < 1 || kernel_width < 1)
    fail("[", label, "] kernel must be at least 1×1, got ", kernel_height, "×", kernel_width);
  if (input_feature_channels < 1 || output_feature_channels < 1)
    fail("[", label, "] feature channels must be positive, got ", input_feature_channels, " in, ",
         output_feature_channels, " out");
  if (stride_y < 1 || stride_x < 1) fail("[", label, "] stride must be >= 1");
  if (dilation_y < 1 || dilation_x < 1) fail("[", label, "] dilation must be >= 1");
  if (groups < 1 || input_feature_channels % groups || output_feature_channels % groups)
    fail("[", label, "] groups=", groups, " must divide input (", input_feature_channels,
         ") and output (", output_feature_channels, ") feature channels");
}

std::string ConvolutionDescriptor::str() const {
  const int rows = transposed ? input_feature_channels : output_feature_channels;
  const int per_group = (transposed ? output_feature_channels : input_feature_channels) / groups;
  return cat(transposed ? "transposed " : "", rows, "×", per_group, "×", kernel_height, "×", kernel_width);
}

Padding Padding::parse(const std::string& mode) {
  if (mode == "valid") return Padding{PaddingMode::Valid};
  if (mode == "same") return Padding{PaddingMode::Same};
  if (mode == "full") return Padding{PaddingMode::Full};
  fail("[padding] unknown padding '", mode,
       "' (expected valid, same, full or explicit (top, bottom, left, right))");
}

Padding Padding::explicit_(int top, int bottom, int left, int right) {
  if (top < 0 || bottom < 0 || left < 0 || right < 0) fail("[padding] amounts must be >= 0");
  return Padding{PaddingMode::Explicit, top, bottom, left, right};
}

std::string Padding::str() const {
  switch (mode) {
    case PaddingMode::Valid: return "valid";
    case PaddingMode::Same: return "same";
    case PaddingMode::Full: return "full";
    case PaddingMode::Explicit: return cat("(", top, ", ", bottom, ", ", left, ", ", right, ")");
  }
  return "?";
}

Axis resolve_axis(int in, int kernel, int stride, int dilation, PaddingMode mode,
                  int explicit_before, int explicit_after) {
  const int span = (kernel - 1) * dilation + 1;
  Axis a;
  switch (mode) {
    case PaddingMode::Valid: break;
    case PaddingMode::Same: {
      const int out = (in + stride - 1) / stride;
      const int total = std::max((out - 1) * stride + span - in, 0);
      a.pad_before = total / 2;
      a.pad_after = total - a.pad_before;
      break;
    }
    case PaddingMode::Full: a.pad_before = a.pad_after = span - 1; break;
    case PaddingMode::Explicit:
      a.pad_before = explicit_before;
      a.pad_after = explicit_after;
      break;
  }
  const int padded = in + a.pad_before + a.pad_after;
  a.out = padded < span ? 0 : (padded - span) / stride + 1;
  return a;
}

std::string PadGeometry::str() const {
  std::ostringstream o;
  o << "(top " << top << ", bottom " << bottom << ", left " << left << ", right " << right;
  if (front || back) o << ", channels " << front << " before, " << back << " after";
  o << ")";
  return o.str();
}

}  // namespace nngraph
