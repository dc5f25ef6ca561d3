// Making a convolution shape's cuDNN plan: descriptors, and the quickest algorithms whose
// scratch fits, found once per shape and pass.
#include "backends/cuda/conv_plan.h"

#include <algorithm>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "nngraph/error.h"

namespace nngraph {
namespace {

// Scratch costs peak memory, so an algorithm past kLean must earn it: it is kept only where it
// takes at most kWorth of the time of the quickest within kLean. Measured on an H200: half
// precision gains nothing past 64 MiB (the residual network at batch 512: 3.86 against 3.84 ms,
// peak 537 against 371 MiB), while exact float32 Fourier and Winograd algorithms need more (the
// speed-run network at batch 1024: 28.2 ms within 256 MiB, 16.8 ms within 1 GiB at 1.5 GiB peak,
// no quicker within 4 GiB).
constexpr size_t kLean = size_t(64) << 20, kMost = size_t(1) << 30;
constexpr float kWorth = 0.9f;
// An algorithm Find timed at more than kHopeless times the quickest is not kept: the first
// call's timing (twelve runs of each kept one) would only confirm it. The speed run's input
// gradients in tf32 kept cuDNN's algorithm 0 at 31 to 125 ms beside 0.09 to 0.3 ms, about 4 s
// of its first step.
constexpr float kHopeless = 4.f;

// cuDNN's algorithms whose scratch fits, the quickest kKeep first, each timed by its best of
// several Find passes after a warm-up one. One pass runs each algorithm about once: on a GPU
// just woken up (clocks ramping, kernels loading) algorithms a few percent apart traded
// places from process to process, and a single slow run hid the best one. The first call
// times the kept ones again on its own buffers (Find's times and a step's disagree).
template <class Perf, class Find>
std::vector<Perf> quickest_found(Find find, const char* what) {
  constexpr int kMax = 8, kPasses = 4, kKeep = 2;
  std::vector<Perf> best;
  for (int pass = 0; pass < kPasses; ++pass) {
    Perf perf[kMax];
    int found = 0;
    cudnn_check(find(kMax, &found, perf), what);
    for (int i = 0; pass > 0 && i < found; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMost) continue;
      auto same = std::find_if(best.begin(), best.end(), [&](const Perf& b) { return b.algo == perf[i].algo; });
      if (same == best.end())
        best.push_back(perf[i]);
      else if (perf[i].time < same->time)
        *same = perf[i];
    }
  }
  if (best.empty()) fail<DeviceError>("[", what, "] cuDNN found no algorithm for this shape");
  float lean = -1;
  for (const Perf& b : best)
    if (b.memory <= kLean && (lean < 0 || b.time < lean)) lean = b.time;
  if (lean >= 0)
    best.erase(std::remove_if(best.begin(), best.end(),
                              [&](const Perf& b) { return b.memory > kLean && b.time > kWorth * lean; }),
               best.end());
  std::sort(best.begin(), best.end(), [](const Perf& a, const Perf& b) { return a.time < b.time; });
  const float hopeless = kHopeless * best.front().time;
  best.erase(std::find_if(best.begin(), best.end(), [&](const Perf& b) { return b.time > hopeless; }), best.end());
  best.resize(std::min<size_t>(best.size(), kKeep));
  return best;
}

// A pass's algorithms, searched the first time they are asked for. Find's scratch sizes can fall
// short of what a run asks (float16 accumulation), so each kept one's is asked again.
template <class Perf, class Find, class Size>
const std::vector<Perf>& found_once(std::vector<Perf>& kept, Find find, Size size, const char* what) {
  if (kept.empty()) {
    std::vector<Perf> found = quickest_found<Perf>(find, what);
    for (Perf& a : found) cudnn_check(size(a.algo, &a.memory), what);
    kept = std::move(found);
  }
  return kept;
}

// Per GPU: the plan of every convolution shape met.
struct ConvPlans : CudaBackend::OpState {
  std::map<std::vector<int>, std::unique_ptr<ConvPlan>> of;
};

cudnnDataType_t cudnn_type(DType t) {
  return t == DType::Float16 ? CUDNN_DATA_HALF : t == DType::BFloat16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

}  // namespace

std::string ConvPlan::name_of(int choice) {
  if (is_engine(choice)) return "cudnn engine plan " + std::to_string(engine_of(choice));
  switch (choice) {
    case kDirect: return "direct";
    case kTensor: return "tensor";
    case kProduct: return "product";
    default: return "widened";
  }
}

std::string tuning_what(const char* pass, const ConvGeometry& g, int n, const ImageShape& in, const ImageShape& out,
                        DType dt, bool last) {
  std::ostringstream s;
  s << "convolution " << pass << ' ' << n << 'x' << in.c << 'x' << in.h << 'x' << in.w << " -> " << out.c << 'x'
    << out.h << 'x' << out.w << " window " << g.kh << 'x' << g.kw << " stride " << g.sy << 'x' << g.sx;
  if (g.groups > 1) s << " groups " << g.groups;
  s << ' ' << (dt == DType::Float32 && g.tf32 ? "tf32" : dtype_name(dt)) << (last ? " NHWC" : " NCHW");
  return s.str();
}

ConvPlan& conv_plan(CudaBackend& b, const ConvGeometry& g, int n, const ImageShape& in, const ImageShape& out,
                    DType t, bool last) {
  const bool half = g.half && t == DType::Float16;
  const std::vector<int> key{n,    in.c,     in.h,       in.w,       out.c,  out.h, out.w, g.kh,
                             g.kw, g.sy,     g.sx,       g.dy,       g.dx,   g.groups,     g.pad_top,
                             g.pad_left, g.tf32, static_cast<int>(t), half, last};
  const cudnnDataType_t type = cudnn_type(t);
  auto& slot = b.op_state<ConvPlans>().of[key];
  if (slot) return *slot;
  auto p = std::make_unique<ConvPlan>();
  p->last = last;
  const cudnnTensorFormat_t format = last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  cudnn_check(cudnnCreateTensorDescriptor(p->x.out()), "convolution");
  cudnn_check(cudnnCreateTensorDescriptor(p->y.out()), "convolution");
  cudnn_check(cudnnCreateFilterDescriptor(p->w.out()), "convolution");
  cudnn_check(cudnnCreateConvolutionDescriptor(p->conv.out()), "convolution");
  cudnn_check(cudnnSetFilter4dDescriptor(p->w, type, format, out.c, in.c / g.groups, g.kh, g.kw),
              "convolution");
  cudnn_check(cudnnSetTensor4dDescriptor(p->y, format, type, n, out.c, out.h, out.w), "convolution");
  auto describe = [&](int h, int w, int pt, int pl) {
    cudnn_check(cudnnSetTensor4dDescriptor(p->x, format, type, n, in.c, h, w), "convolution");
    cudnn_check(cudnnSetConvolution2dDescriptor(p->conv, pt, pl, g.sy, g.sx, g.dy, g.dx, CUDNN_CROSS_CORRELATION,
                                                half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT), "convolution");
    int on, oc, oh, ow;
    cudnn_check(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &on, &oc, &oh, &ow), "convolution");
    return oh == out.h && ow == out.w;
  };
  cudnn_check(cudnnSetConvolutionGroupCount(p->conv, g.groups), "convolution");
  // FMA: exact float32; default math lets float32 run on tf32 tensor cores, half on half ones.
  const bool fma = t == DType::Float32 && !g.tf32;
  cudnn_check(cudnnSetConvolutionMathType(p->conv, fma ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH), "convolution");
  if (!describe(in.h, in.w, g.pad_top, g.pad_left)) {
    p->padded = true;
    p->pad_top = g.pad_top;
    p->pad_left = g.pad_left;
    p->hp = (out.h - 1) * g.sy + (g.kh - 1) * g.dy + 1;
    p->wp = (out.w - 1) * g.sx + (g.kw - 1) * g.dx + 1;
    if (!describe(p->hp, p->wp, 0, 0)) fail<DeviceError>("[convolution] cuDNN disagrees on the output size");
  }
  slot = std::move(p);
  return *slot;
}

const ConvEngines& ConvPlan::engines(CudaBackend& b, ConvEngines::Pass pass) {
  auto& slot = engines_[pass];
  if (!slot) slot = std::make_unique<ConvEngines>(b.cudnn(), pass, x, w, conv, y);
  return *slot;
}

bool ConvPlan::run_engine(CudaBackend& b, ConvEngines::Pass pass, int i, const void* a, const void* x, void* out) {
  const ConvEngines& e = engines(b, pass);
  return e.run(b.cudnn(), i, a, x, out, b.workspace(e.scratch(i))->data());
}

size_t ConvPlan::engine_workspace(CudaBackend& b, ConvEngines::Pass pass, int i) {
  const size_t best = pass == ConvEngines::kInputGradient ? bwd_data(b)[0].memory : bwd_filter(b)[0].memory;
  return std::max(engines(b, pass).scratch(i), best);
}

const std::vector<cudnnConvolutionFwdAlgoPerf_t>& ConvPlan::fwd(CudaBackend& b) {
  return found_once(
      fwd_, [&](int max, int* count, auto* perf) {
        return cudnnFindConvolutionForwardAlgorithm(b.cudnn(), x, w, conv, y, max, count, perf);
      },
      [&](auto algo, size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(b.cudnn(), x, w, conv, y, algo, bytes);
      },
      "convolution");
}

const std::vector<cudnnConvolutionBwdDataAlgoPerf_t>& ConvPlan::bwd_data(CudaBackend& b) {
  return found_once(
      bwd_data_, [&](int max, int* count, auto* perf) {
        return cudnnFindConvolutionBackwardDataAlgorithm(b.cudnn(), w, y, conv, x, max, count, perf);
      },
      [&](auto algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(b.cudnn(), w, y, conv, x, algo, bytes);
      },
      "convolution_gradient");
}

const std::vector<cudnnConvolutionBwdFilterAlgoPerf_t>& ConvPlan::bwd_filter(CudaBackend& b) {
  return found_once(
      bwd_filter_, [&](int max, int* count, auto* perf) {
        return cudnnFindConvolutionBackwardFilterAlgorithm(b.cudnn(), x, y, conv, w, max, count, perf);
      },
      [&](auto algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(b.cudnn(), x, y, conv, w, algo, bytes);
      },
      "convolution_gradient");
}

}  // namespace nngraph
