// Building a convolution pass's graph-API plans from the legacy descriptors, and running one.
#include "backends/cuda/conv_engines.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backends/cuda/cuda_backend.h"

namespace nngraph {
namespace {

using Descriptor = std::shared_ptr<void>;

// A descriptor of the given type, or null where cuDNN refuses it.
Descriptor make(cudnnBackendDescriptorType_t type) {
  cudnnBackendDescriptor_t d = nullptr;
  if (cudnnBackendCreateDescriptor(type, &d) != CUDNN_STATUS_SUCCESS) return nullptr;
  return Descriptor(d, [](void* p) { cudnnBackendDestroyDescriptor(p); });
}

// Sets attributes and finalizes; any refusal on the way leaves ok false.
struct Builder {
  bool ok = true;
  template <class V>
  void set(const Descriptor& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
           const V* values) {
    ok = ok && d && cudnnBackendSetAttribute(d.get(), name, type, count, values) == CUDNN_STATUS_SUCCESS;
  }
  void set(const Descriptor& d, cudnnBackendAttributeName_t name, const Descriptor& value) {
    void* p = value.get();
    ok = ok && value && d && cudnnBackendSetAttribute(d.get(), name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p) ==
                                 CUDNN_STATUS_SUCCESS;
  }
  Descriptor finish(Descriptor d) {
    ok = ok && d && cudnnBackendFinalize(d.get()) == CUDNN_STATUS_SUCCESS;
    return ok ? d : nullptr;
  }
};

enum : int64_t { kX = 1, kW, kY };

Descriptor tensor(Builder& b, int64_t uid, cudnnDataType_t type, const int64_t (&dims)[4], const int64_t (&strides)[4]) {
  Descriptor t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t alignment = 16;
  b.set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  b.set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
  b.set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
  b.set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  b.set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  return b.finish(t);
}

// A legacy image descriptor as a graph-API tensor.
Descriptor image(Builder& b, int64_t uid, cudnnTensorDescriptor_t d, cudnnDataType_t* type) {
  int n = 0, c = 0, h = 0, w = 0, ns = 0, cs = 0, hs = 0, ws = 0;
  if (cudnnGetTensor4dDescriptor(d, type, &n, &c, &h, &w, &ns, &cs, &hs, &ws) != CUDNN_STATUS_SUCCESS) b.ok = false;
  return tensor(b, uid, *type, {n, c, h, w}, {ns, cs, hs, ws});
}

// What the plans' engines must not be: compiled at run time (seconds a shape), or summing in
// less than float32; and for float32 images, converting them down (to half), or to tf32 on the
// tensor cores where the convolution's math is exact (CUDNN_FMA_MATH), as the legacy
// algorithms then run.
bool acceptable(const Descriptor& config, bool float32, bool exact) {
  Descriptor engine = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  void* e = engine.get();
  int64_t got = 0;
  if (!engine || cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                          &got, &e) != CUDNN_STATUS_SUCCESS)
    return false;
  cudnnBackendBehaviorNote_t behaviour[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &got, behaviour) != CUDNN_STATUS_SUCCESS)
    return false;
  if (std::count(behaviour, behaviour + got, CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)) return false;
  cudnnBackendNumericalNote_t numerics[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &got, numerics) != CUDNN_STATUS_SUCCESS)
    return false;
  const auto noted = [&](cudnnBackendNumericalNote_t note) { return std::count(numerics, numerics + got, note) > 0; };
  if (noted(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)) return false;
  return !float32 ||
         (!noted(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) && !(exact && noted(CUDNN_NUMERICAL_NOTE_TENSOR_CORE)));
}

bool enabled() {
  static const bool on = [] {
    const char* e = std::getenv("NNGRAPH_CUDNN_ENGINES");
    return !(e && e[0] == '0');
  }();
  return on;
}

}  // namespace

ConvEngines::ConvEngines(cudnnHandle_t handle, Pass pass, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                         cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y)
    : pass_(pass) {
  if (!enabled()) return;
  Builder b;
  cudnnDataType_t type, y_type, compute;
  Descriptor xt = image(b, kX, x, &type), yt = image(b, kY, y, &y_type);
  cudnnTensorFormat_t format;
  int k, c, r, s, groups = 0, pad_h, pad_w, u, v, dil_h, dil_w;
  cudnnConvolutionMode_t mode;
  cudnnMathType_t math;
  if (!b.ok || cudnnGetFilter4dDescriptor(w, &type, &format, &k, &c, &r, &s) != CUDNN_STATUS_SUCCESS ||
      cudnnGetConvolutionGroupCount(conv, &groups) != CUDNN_STATUS_SUCCESS || groups != 1 ||
      cudnnGetConvolution2dDescriptor(conv, &pad_h, &pad_w, &u, &v, &dil_h, &dil_w, &mode, &compute) !=
          CUDNN_STATUS_SUCCESS ||
      compute != CUDNN_DATA_FLOAT || cudnnGetConvolutionMathType(conv, &math) != CUDNN_STATUS_SUCCESS)
    return;
  const bool float32 = type == CUDNN_DATA_FLOAT, exact = math == CUDNN_FMA_MATH;
  const bool last = format == CUDNN_TENSOR_NHWC;
  const int64_t filter_strides[4] = {int64_t(r) * s * c, last ? 1 : int64_t(r) * s, last ? int64_t(s) * c : s,
                                     last ? c : 1};
  Descriptor wt = tensor(b, kW, type, {k, c, r, s}, filter_strides);
  Descriptor cd = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const int64_t dims = 2, dilation[2] = {dil_h, dil_w}, stride[2] = {u, v}, padding[2] = {pad_h, pad_w};
  b.set(cd, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  b.set(cd, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  b.set(cd, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  b.set(cd, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation);
  b.set(cd, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride);
  b.set(cd, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, padding);
  b.set(cd, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, padding);
  cd = b.finish(cd);
  // Each pass's operation and the names of its operands: (a, b) → out as run() takes them.
  struct Names {
    cudnnBackendDescriptorType_t kind;
    cudnnBackendAttributeName_t alpha, beta, conv, a, b, out;
  };
  const Names n =
      pass == kForward
          ? Names{CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y}
      : pass == kInputGradient
          ? Names{CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX}
          : Names{CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW};
  const Descriptor& a = pass == kInputGradient ? yt : xt;
  const Descriptor& bt = pass == kWeightGradient ? yt : wt;
  const Descriptor& out = pass == kForward ? yt : pass == kInputGradient ? xt : wt;
  Descriptor op = make(n.kind);
  const float one = 1.f, zero = 0.f;
  b.set(op, n.alpha, CUDNN_TYPE_FLOAT, 1, &one);
  b.set(op, n.beta, CUDNN_TYPE_FLOAT, 1, &zero);
  b.set(op, n.conv, cd);
  b.set(op, n.a, a);
  b.set(op, n.b, bt);
  b.set(op, n.out, out);
  op = b.finish(op);
  Descriptor graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  void* ops = op.get();
  b.set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ops);
  b.set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  graph = b.finish(graph);
  Descriptor heuristics = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t heur = CUDNN_HEUR_MODE_A;
  b.set(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  b.set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &heur);
  heuristics = b.finish(heuristics);
  if (!b.ok) return;
  int64_t count = 0;
  if (cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                               nullptr) != CUDNN_STATUS_SUCCESS)
    return;
  std::vector<Descriptor> configs;
  std::vector<void*> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.push_back(make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    if (!configs.back()) return;
    raw.push_back(configs.back().get());
  }
  if (cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                               &count, raw.data()) != CUDNN_STATUS_SUCCESS)
    return;
  for (int64_t i = 0; i < count && size() < kMost; ++i) {
    if (!acceptable(configs[i], float32, exact)) continue;
    Builder p;
    Descriptor plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    p.set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    p.set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[i]);
    plan = p.finish(plan);
    int64_t scratch = 0, got = 0;
    if (!p.ok || cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                          &got, &scratch) != CUDNN_STATUS_SUCCESS)
      continue;
    if (static_cast<size_t>(scratch) <= kScratch) plans_.push_back({plan, static_cast<size_t>(scratch)});
  }
}

bool ConvEngines::run(cudnnHandle_t handle, int i, const void* a, const void* b, void* out, void* workspace) const {
  auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if (!aligned(a) || !aligned(b) || !aligned(out)) return false;
  const int64_t a_uid = pass_ == kInputGradient ? kY : kX, b_uid = pass_ == kWeightGradient ? kY : kW;
  const int64_t out_uid = pass_ == kForward ? kY : pass_ == kInputGradient ? kX : kW;
  const int64_t uids[3] = {a_uid, b_uid, out_uid};
  void* pointers[3] = {const_cast<void*>(a), const_cast<void*>(b), out};
  Builder p;
  Descriptor pack = make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  p.set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
  p.set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers);
  p.set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack = p.finish(pack);
  if (!p.ok) cudnn_check(CUDNN_STATUS_BAD_PARAM, "convolution (graph API)");
  cudnn_check(cudnnBackendExecute(handle, plans_[i].plan.get(), pack.get()), "convolution (graph API)");
  return true;
}

}  // namespace nngraph
