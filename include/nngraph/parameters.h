#pragma once
// What a layer kind reads from its data source: named tensors, described once per kind
// (MPSCNNConvolutionDataSource, MPSCNNBatchNormalizationDataSource; matrices for recurrent gates).
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "nngraph/descriptors.h"

namespace nngraph {

// One tensor of a layer's parameters.
struct TensorSpec {
  std::string name;            // the data source's method that returns it: "weights", "gamma", ...
  std::vector<int64_t> shape;  // as graphs hold it (convolution weights OIHW)
  bool optional = false;       // a source may leave it out (biases)
  bool trained = true;         // the optimizer updates it; running statistics are not
  float fill = 0.f;            // its value where a source does not give one
  bool non_negative = false;   // a variance: no value below zero
  // A matrix-product operand (convolution weights): a graph computing in half precision
  // reads a half copy of it and writes its gradient in half.
  bool operand = false;
  size_t count() const;
};

// A rows × columns matrix (recurrent gate weights) with optional biases (rows); a diagonal
// one holds only its rows diagonal values (LSTM memory, "peephole", weights).
struct MatrixDescriptor {
  int rows = 0, columns = 0;
  bool diagonal = false;
  void validate(const std::string& label) const;
  std::string str() const;
  bool operator==(const MatrixDescriptor& o) const {
    return rows == o.rows && columns == o.columns && diagonal == o.diagonal;
  }
};

// Per feature channel: gamma and beta (trained) and the mean and variance a normalization
// layer uses at inference (running statistics, not trained by the optimizer).
struct NormalizationDescriptor {
  int feature_channels = 0;
  // Running mean and variance after gamma and beta (batch normalization); without them the
  // kind of group, instance and layer normalization.
  bool statistics = true;
  void validate(const std::string& label) const;
  std::string str() const;
};

// Every layer kind a data source can describe. A new kind is a struct with validate() and
// str(), an alternative here and its tensor_specs() overload.
using ParameterDescriptor = std::variant<ConvolutionDescriptor, MatrixDescriptor, NormalizationDescriptor>;

// The tensors of a kind, in the order sources supply, graphs hold and checkpoints list them.
std::vector<TensorSpec> tensor_specs(const ConvolutionDescriptor& d);
std::vector<TensorSpec> tensor_specs(const MatrixDescriptor& d);
std::vector<TensorSpec> tensor_specs(const NormalizationDescriptor& d);
std::vector<TensorSpec> tensor_specs(const ParameterDescriptor& d);
// Where the tensor `name` stands in tensor_specs(d); an error naming `label` and the kind where
// d has none.
size_t tensor_index(const ParameterDescriptor& d, const std::string& name, const std::string& label);
// "convolution", "matrix" or "normalization".
const char* kind_name(const ParameterDescriptor& d);
// Sizes, e.g. "8×3×3×3" or "16×24"; with the kind for messages that compare kinds.
std::string describe(const ParameterDescriptor& d);
void validate(const ParameterDescriptor& d, const std::string& label);
// Whether an array of this shape holds the tensor: its shape, the same with trailing 1s
// dropped or added, or (rows, everything else); a 0- or 1-D shape is checked by count alone.
bool shape_fits(const std::vector<int64_t>& got, const TensorSpec& spec);
std::string shape_text(const std::vector<int64_t>& shape);
// Fails, naming `who` and the tensor, where values are NaN or inf or break the spec's sign.
void check_values(const TensorSpec& spec, const std::vector<float>& values, const std::string& who);

}  // namespace nngraph
