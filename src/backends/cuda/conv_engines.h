#pragma once
// cuDNN's graph API for one pass of a convolution: the execution plans its heuristics offer
// for the shape, beyond the few algorithms the legacy Find returns (each engine there runs with
// one default choice of its tiles; here each configuration is a candidate of its own). The
// library times them with its other candidates (src/backends/cuda/conv.cpp, conv_gradient.cpp).
#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace nngraph {

class ConvEngines {
 public:
  enum Pass { kForward, kInputGradient, kWeightGradient };
  // The plans for the convolution the legacy descriptors describe (x, w, y as the forward pass
  // names them); none where the graph API is off (NNGRAPH_CUDNN_ENGINES=0), the convolution is
  // grouped, or no configuration builds. Up to kMost plans, each with at most kScratch bytes of
  // scratch, none compiled at run time; for float32, none on tf32 where the convolution's math
  // is exact.
  ConvEngines(cudnnHandle_t handle, Pass pass, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
              cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y);
  static constexpr int kMost = 8;
  static constexpr size_t kScratch = size_t(64) << 20;

  int size() const { return static_cast<int>(plans_.size()); }
  size_t scratch(int i) const { return plans_[i].scratch; }
  // Runs plan i: forward x, w → y; input gradient dy, w → dx; weight gradient x, dy → dw. False,
  // having done nothing, where a pointer is not 16-byte aligned, as the plans assume.
  bool run(cudnnHandle_t handle, int i, const void* a, const void* b, void* out, void* workspace) const;

 private:
  struct Plan {
    std::shared_ptr<void> plan;
    size_t scratch;
  };
  Pass pass_;
  std::vector<Plan> plans_;
};

}  // namespace nngraph
