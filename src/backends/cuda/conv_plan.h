#pragma once
// cuDNN's side of a convolution shape: its descriptors and the algorithms Find keeps for each
// pass, made once per shape and kept per GPU (src/backends/cuda/conv.cpp and
// conv_gradient.cpp run them).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/conv_engines.h"
#include "backends/cuda/cuda_backend.h"
#include "ops/conv.h"

namespace nngraph {

// cuDNN descriptors and the algorithms found for one convolution shape.
struct ConvPlan {
  cuda::TensorDescriptor x, y;
  cuda::FilterDescriptor w;
  cuda::ConvolutionDescriptor conv;
  // cuDNN's quickest algorithms by Find for each pass, the quickest first, searched on the
  // pass's first use: an inference graph, or a widened plan, never times the gradients.
  const std::vector<cudnnConvolutionFwdAlgoPerf_t>& fwd(CudaBackend& b);
  const std::vector<cudnnConvolutionBwdDataAlgoPerf_t>& bwd_data(CudaBackend& b);
  const std::vector<cudnnConvolutionBwdFilterAlgoPerf_t>& bwd_filter(CudaBackend& b);
  // What runs each pass: the index of one of those algorithms, our direct kernels, our
  // tensor-core products, a product over the windows' rows (conv_rows.h) or cuDNN on channels
  // widened (conv_rows.h), the quickest of them on the first call that is not being captured
  // (until then the first).
  static constexpr int kUndecided = -1, kDirect = -2, kTensor = -3, kProduct = -4, kWidened = -5;
  // ... or one of the graph API's plans for the pass: engine(i) for plan i of engines(b, pass).
  static constexpr int engine(int i) { return kEngine - i; }
  static constexpr bool is_engine(int choice) { return choice <= kEngine; }
  static constexpr int engine_of(int choice) { return kEngine - choice; }
  // A choice other than one of cuDNN's algorithms by its name in the tuning log.
  static std::string name_of(int choice);
  const ConvEngines& engines(CudaBackend& b, ConvEngines::Pass pass);
  // Runs plan i of the pass's (operands as ConvEngines::run names them) in the shared workspace;
  // false, having done nothing, where a pointer is misaligned: the caller runs cuDNN's best
  // algorithm instead. So a gradient pass's plan i may take engine_workspace bytes: its own
  // scratch or that algorithm's, the larger.
  bool run_engine(CudaBackend& b, ConvEngines::Pass pass, int i, const void* a, const void* x, void* out);
  size_t engine_workspace(CudaBackend& b, ConvEngines::Pass pass, int i);
  int forward = kUndecided, input_gradient = kUndecided, weight_gradient = kUndecided;
  // cuDNN pads symmetrically; other paddings run on an explicitly zero-padded copy.
  bool padded = false;
  int pad_top = 0, pad_left = 0, hp = 0, wp = 0;
  bool last = false;  // channels-last images and filters (KRSC)
  // Where a source of shape `in` lies in the padded copy (hp × wp): negative amounts cut
  // the rows and columns past the last window. Channels-last images pad as one plane of
  // H × W·C per image.
  PadGeometry margins(const ImageShape& in) const {
    const int k = last ? in.c : 1;
    return {0, 0, pad_top, hp - pad_top - in.h, pad_left * k, (wp - pad_left - in.w) * k};
  }
  // An image of `in`'s channels, h × w, as the padding kernel sees it.
  ImageShape plane(const ImageShape& in, int h, int w) const {
    return last ? ImageShape{1, h, w * in.c} : ImageShape{in.c, h, w};
  }

 private:
  static constexpr int kEngine = -16;
  std::unique_ptr<ConvEngines> engines_[3];
  std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd_;
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bwd_data_;
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bwd_filter_;
};

// The tuning log's words (CudaBackend::quickest): a pass of the convolution n × in → n × out,
// and a candidate's name, cuDNN's number for the algorithms Find kept (`found`).
std::string tuning_what(const char* pass, const ConvGeometry& g, int n, const ImageShape& in, const ImageShape& out,
                        DType dt, bool last);
template <class Perf>
std::function<std::string(int)> choice_names(const std::vector<Perf>& found) {
  return [&found](int id) {
    return id >= 0 ? "cudnn algorithm " + std::to_string(static_cast<int>(found[id].algo)) : ConvPlan::name_of(id);
  };
}

// The plan of images n × in → n × out of dtype `t` (half ones accumulate in float32 unless
// g.half, float16); `last`: images NHWC and filters KRSC, what tensor-core kernels read
// without transposing.
ConvPlan& conv_plan(CudaBackend& b, const ConvGeometry& g, int n, const ImageShape& in, const ImageShape& out,
                    DType t, bool last);

}  // namespace nngraph
