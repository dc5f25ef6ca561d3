#pragma once
// Weights enter a graph only through data sources (MPSCNNConvolutionDataSource).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nngraph/descriptors.h"
#include "nngraph/dtype.h"

namespace nngraph {

// A borrowed span of host values; valid from the call that returned it until purge().
struct WeightsView {
  const void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::Float32;
};

// OIHW: output, input/groups, kernel height, kernel width (default). OHWI: the MPS layout.
enum class WeightsLayout { OIHW, OHWI };

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual ConvolutionDescriptor descriptor() = 0;
  virtual std::string label() = 0;
  // Make weights available; false means they could not be loaded.
  virtual bool load() = 0;
  // The graph has its own copy; the source may drop its memory.
  virtual void purge() = 0;
  virtual WeightsView weights() = 0;
  // count 0: the layer has no bias.
  virtual WeightsView biases() = 0;
  virtual WeightsLayout weights_layout() { return WeightsLayout::OIHW; }
};

enum class Initializer { He, Glorot, Zeros };

// Weights held in host arrays: given, or drawn by an initializer.
class ArrayDataSource : public DataSource {
 public:
  ArrayDataSource(ConvolutionDescriptor descriptor, std::vector<float> weights,
                  std::vector<float> biases, std::string label);
  // fan_in = I/groups·kh·kw, fan_out = O/groups·kh·kw; he: N(0, 2/fan_in),
  // glorot: U(±sqrt(6/(fan_in+fan_out))). Deterministic for a seed.
  static std::vector<float> initial_weights(const ConvolutionDescriptor& d, Initializer init,
                                            uint64_t seed);

  ConvolutionDescriptor descriptor() override { return descriptor_; }
  std::string label() override { return label_; }
  bool load() override { return true; }
  void purge() override {}  // the arrays are the master copy
  WeightsView weights() override { return {weights_.data(), weights_.size(), DType::Float32}; }
  WeightsView biases() override { return {biases_.data(), biases_.size(), DType::Float32}; }

 private:
  ConvolutionDescriptor descriptor_;
  std::vector<float> weights_, biases_;
  std::string label_;
};

// Checks a source's arrays against its descriptor and returns float32 OIHW weights and
// biases; errors name `node`.
struct LoadedWeights {
  std::vector<float> weights, biases;
};
LoadedWeights read_data_source(DataSource& source, const ConvolutionDescriptor& descriptor,
                               const std::string& node);

}  // namespace nngraph
