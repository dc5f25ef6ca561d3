// Which of cuDNN's fused graphs (its graph API: batch norm's scale, bias and relu before a
// convolution, statistics after it, relu's gradient after an input gradient) run on this GPU,
// and how fast against the plain convolution: bf16 NHWC 3x3 convolutions of ResNet shapes. Each
// line gives the engines the heuristics offer (global index: microseconds, or why not); the
// plain passes also as the legacy API's Find picks them, which is how the library finds its own.
// Not part of the library; built by hand on a machine with cuDNN:
//   g++ -O2 -std=c++17 bench/cudnn_fusion_probe.cpp -I/usr/local/cuda/include
//       -L/usr/local/cuda/lib64 -lcudnn -lcudart -o /tmp/probe   (one line), then /tmp/probe
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#define CK(x) check((x), #x, __LINE__)
static bool check(cudnnStatus_t s, const char* what, int line) {
  if (s != CUDNN_STATUS_SUCCESS) {
    fprintf(stderr, "  [line %d] %s: %s\n", line, what, cudnnGetErrorString(s));
    return false;
  }
  return true;
}
static void cu(cudaError_t e, int line) {
  if (e != cudaSuccess) { fprintf(stderr, "cuda %d: %s\n", line, cudaGetErrorString(e)); exit(1); }
}
#define CU(x) cu((x), __LINE__)

using D = std::shared_ptr<void>;
static cudnnHandle_t H;

static D make(cudnnBackendDescriptorType_t t) {
  cudnnBackendDescriptor_t d;
  CK(cudnnBackendCreateDescriptor(t, &d));
  return D(d, [](void* p) { cudnnBackendDestroyDescriptor(p); });
}
template <class V>
static void set(const D& d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n, const V* v) {
  CK(cudnnBackendSetAttribute(d.get(), a, t, n, v));
}
static void setd(const D& d, cudnnBackendAttributeName_t a, const D& v) {
  void* p = v.get();
  CK(cudnnBackendSetAttribute(d.get(), a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p));
}
static bool fin(const D& d, const char* what) { return check(cudnnBackendFinalize(d.get()), what, 0); }

// dims NCHW, strides NHWC (or per-channel [1,C,1,1])
static D tensor(int64_t uid, cudnnDataType_t dt, std::vector<int64_t> dims, bool is_virtual = false) {
  std::vector<int64_t> st(4);
  st[1] = 1; st[3] = dims[1]; st[2] = dims[1] * dims[3]; st[0] = dims[1] * dims[2] * dims[3];
  D t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
  set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
  set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, st.data());
  set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  int64_t al = 16;
  set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &al);
  bool v = is_virtual;
  set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v);
  fin(t, "tensor");
  return t;
}
static D conv_desc(int pad, int stride) {
  D c = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  cudnnDataType_t f = CUDNN_DATA_FLOAT;
  cudnnConvolutionMode_t m = CUDNN_CROSS_CORRELATION;
  int64_t dims = 2, one[2] = {1, 1}, p[2] = {pad, pad}, s[2] = {stride, stride};
  set(c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
  set(c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &m);
  set(c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  set(c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, one);
  set(c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, s);
  set(c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, p);
  set(c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, p);
  fin(c, "conv");
  return c;
}
// fwd: x = a, w = b, y = out; weight gradient: x = a, dy = b, dw = out; input gradient: dy = a,
// w = b, dx = out.
static D conv_op(cudnnBackendDescriptorType_t kind, const D& conv, const D& a, const D& b, const D& out) {
  struct Names {
    cudnnBackendAttributeName_t alpha, beta, conv, a, b, out;
  };
  const Names n =
      kind == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR
          ? Names{CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y}
      : kind == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR
          ? Names{CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW}
          : Names{CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
                  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX};
  D o = make(kind);
  float alpha = 1.f, beta = 0.f;
  set(o, n.alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
  set(o, n.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  setd(o, n.conv, conv);
  setd(o, n.a, a);
  setd(o, n.b, b);
  setd(o, n.out, out);
  fin(o, "conv op");
  return o;
}
static D pw_desc(cudnnPointwiseMode_t mode) {
  D p = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  cudnnDataType_t f = CUDNN_DATA_FLOAT;
  set(p, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  set(p, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f);
  fin(p, "pw desc");
  return p;
}
// y = mode(x, b); relu's gradient takes (dy: x, x: b, dx: y).
static D pw(cudnnPointwiseMode_t mode, const D& x, const D* b, const D& y) {
  const bool backward = mode == CUDNN_POINTWISE_RELU_BWD;
  D o = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  setd(o, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw_desc(mode));
  setd(o, backward ? CUDNN_ATTR_OPERATION_POINTWISE_DYDESC : CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
  if (b) setd(o, backward ? CUDNN_ATTR_OPERATION_POINTWISE_XDESC : CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  setd(o, backward ? CUDNN_ATTR_OPERATION_POINTWISE_DXDESC : CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  fin(o, "pw op");
  return o;
}
static D genstats(const D& x, const D& sum, const D& sq) {
  D o = make(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
  cudnnGenStatsMode_t m = CUDNN_GENSTATS_SUM_SQSUM;
  cudnnDataType_t f = CUDNN_DATA_FLOAT;
  set(o, CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &m);
  set(o, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f);
  setd(o, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, x);
  setd(o, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, sum);
  setd(o, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, sq);
  fin(o, "genstats op");
  return o;
}

// A call's time in ms: the mean of 20 after 3.
template <class F>
static float time_ms(F f) {
  for (int i = 0; i < 3; ++i) f();
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  cudaEventRecord(a);
  for (int r = 0; r < 20; ++r) f();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a), cudaEventDestroy(b);
  return ms / 20;
}

// Builds the graph, tries the heuristics' configurations, runs the ones that finalize; returns
// the best time in ms (or -1).
static float run_graph(const char* name, const std::vector<D>& ops, const std::vector<int64_t>& uids,
                       const std::vector<void*>& ptrs, int cap = 6) {
  D g = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  std::vector<void*> raw;
  for (auto& o : ops) raw.push_back(o.get());
  set(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw.size(), raw.data());
  set(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &H);
  if (!fin(g, "op graph")) { printf("%-34s graph not finalized\n", name); return -1; }
  int64_t engines = 0, got = 0;
  cudnnBackendGetAttribute(g.get(), CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1, &got, &engines);
  float best = -1;
  std::string tried;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    D h = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    setd(h, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, g);
    set(h, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (!fin(h, "heur")) continue;
    int64_t count = 0;
    cudnnBackendGetAttribute(h.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
    count = std::min<int64_t>(count, cap);
    std::vector<D> cfgs;
    std::vector<void*> cr;
    for (int i = 0; i < count; ++i) cfgs.push_back(make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)), cr.push_back(cfgs.back().get());
    int64_t n = 0;
    cudnnBackendGetAttribute(h.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &n, cr.data());
    for (int i = 0; i < n; ++i) {
      D e = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
      void* ep = e.get();
      int64_t k = 0, gi = -1;
      cudnnBackendGetAttribute(cr[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k, &ep);
      cudnnBackendGetAttribute(ep, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &k, &gi);
      D plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &H);
      void* c = cr[i];
      set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
      if (cudnnBackendFinalize(plan.get()) != CUDNN_STATUS_SUCCESS) {
        tried += " e" + std::to_string(gi) + ":nofin";
        continue;
      }
      int64_t ws = 0;
      cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &k, &ws);
      void* wsp = nullptr;
      if (ws) CU(cudaMalloc(&wsp, ws));
      D vp = make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      set(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.size(), uids.data());
      set(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs.size(), ptrs.data());
      set(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &wsp);
      fin(vp, "variant pack");
      bool ok = true;
      for (int w = 0; w < 3 && ok; ++w) ok = cudnnBackendExecute(H, plan.get(), vp.get()) == CUDNN_STATUS_SUCCESS;
      if (!ok || cudaDeviceSynchronize() != cudaSuccess) {
        tried += " e" + std::to_string(gi) + ":noexec";
        if (wsp) cudaFree(wsp);
        continue;
      }
      const float ms = time_ms([&] { cudnnBackendExecute(H, plan.get(), vp.get()); });
      char buf[64];
      snprintf(buf, sizeof buf, " e%ld:%.1fus", (long)gi, ms * 1000);
      tried += buf;
      if (best < 0 || ms < best) best = ms;
      if (wsp) cudaFree(wsp);
    }
    tried += mode == CUDNN_HEUR_MODE_A ? " |fallback:" : "";
  }
  printf("%-34s engines %ld best %.1f us:%s\n", name, (long)engines, best * 1000, tried.c_str());
  return best;
}

// The same three passes through cuDNN's legacy API, as the library finds them: each algorithm
// cudnnFind*Ex returns, timed as run_graph times engines (time_ms); the quickest (µs) and its
// algorithm.
struct Legacy {
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  void* work;
  size_t bytes = size_t(512) << 20;
  Legacy(int64_t n, int64_t c, int64_t k, int64_t h, int64_t stride) {
    const int oh = static_cast<int>(h / stride);
    cudnnCreateTensorDescriptor(&x), cudnnCreateTensorDescriptor(&y), cudnnCreateFilterDescriptor(&w);
    cudnnCreateConvolutionDescriptor(&conv);
    CK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, n, c, h, h));
    CK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, n, k, oh, oh));
    CK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, k, c, 3, 3));
    CK(cudnnSetConvolution2dDescriptor(conv, 1, 1, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CK(cudnnSetConvolutionMathType(conv, CUDNN_TENSOR_OP_MATH));
    CU(cudaMalloc(&work, bytes));
  }
  ~Legacy() {
    cudnnDestroyTensorDescriptor(x), cudnnDestroyTensorDescriptor(y), cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
    cudaFree(work);
  }
  template <class Perf, class Run>
  static void report(const char* name, const Perf* perf, int found, Run run) {
    float best = -1;
    int algo = -1;
    for (int i = 0; i < found; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
      const float ms = time_ms([&] { run(perf[i].algo); });
      if (best < 0 || ms < best) best = ms, algo = static_cast<int>(perf[i].algo);
    }
    printf("%-34s legacy Find best %.1f us (algorithm %d of %d)\n", name, best * 1000, algo, found);
  }
  void passes(void* px, void* pw, void* py, void* pdy, void* pdw, void* pdx) {
    const float one = 1.f, zero = 0.f;
    int found = 0;
    cudnnConvolutionFwdAlgoPerf_t fp[8];
    CK(cudnnFindConvolutionForwardAlgorithmEx(H, x, px, w, pw, conv, y, py, 8, &found, fp, work, bytes));
    report("fprop", fp, found, [&](cudnnConvolutionFwdAlgo_t a) {
      cudnnConvolutionForward(H, &one, x, px, w, pw, conv, a, work, bytes, &zero, y, py);
    });
    cudnnConvolutionBwdFilterAlgoPerf_t wp[8];
    CK(cudnnFindConvolutionBackwardFilterAlgorithmEx(H, x, px, y, pdy, conv, w, pdw, 8, &found, wp, work, bytes));
    report("wgrad (bf16 dw)", wp, found, [&](cudnnConvolutionBwdFilterAlgo_t a) {
      cudnnConvolutionBackwardFilter(H, &one, x, px, y, pdy, conv, a, work, bytes, &zero, w, pdw);
    });
    cudnnConvolutionBwdDataAlgoPerf_t dp[8];
    CK(cudnnFindConvolutionBackwardDataAlgorithmEx(H, w, pw, y, pdy, conv, x, pdx, 8, &found, dp, work, bytes));
    report("dgrad", dp, found, [&](cudnnConvolutionBwdDataAlgo_t a) {
      cudnnConvolutionBackwardData(H, &one, w, pw, y, pdy, conv, a, work, bytes, &zero, x, pdx);
    });
  }
};

static void* dev_random(size_t count, float lo, float hi, unsigned seed, bool bf16 = true) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  void* p;
  if (bf16) {
    std::vector<__nv_bfloat16> h(count);
    for (auto& v : h) v = __float2bfloat16(u(rng));
    CU(cudaMalloc(&p, count * 2));
    CU(cudaMemcpy(p, h.data(), count * 2, cudaMemcpyHostToDevice));
  } else {
    std::vector<float> h(count);
    for (auto& v : h) v = u(rng);
    CU(cudaMalloc(&p, count * 4));
    CU(cudaMemcpy(p, h.data(), count * 4, cudaMemcpyHostToDevice));
  }
  return p;
}

static void shape(int64_t N, int64_t C, int64_t K, int64_t Hh, int64_t stride) {
  const int64_t OH = Hh / stride;
  printf("== N %ld C %ld K %ld H %ld stride %ld (3x3, bf16 NHWC, float math)\n", (long)N, (long)C, (long)K, (long)Hh,
         (long)stride);
  const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f = CUDNN_DATA_FLOAT;
  enum : int64_t { X = 1, W, Y, SUM, SQ, SCALE, BIAS, DY, DW, DX, V1 = 100, V2, V3, V4 };
  D x = tensor(X, bf, {N, C, Hh, Hh}), w = tensor(W, bf, {K, C, 3, 3}), y = tensor(Y, bf, {N, K, OH, OH});
  D sum = tensor(SUM, f, {1, K, 1, 1}), sq = tensor(SQ, f, {1, K, 1, 1});
  D scale = tensor(SCALE, f, {1, C, 1, 1}), bias = tensor(BIAS, f, {1, C, 1, 1});
  D dy = tensor(DY, bf, {N, K, OH, OH}), dw = tensor(DW, f, {K, C, 3, 3}), dx = tensor(DX, bf, {N, C, Hh, Hh});
  D dwb = tensor(DW, bf, {K, C, 3, 3});
  D conv = conv_desc(1, stride);
  void *px = dev_random(N * C * Hh * Hh, -1, 1, 1), *pw_ = dev_random(K * C * 9, -0.1f, 0.1f, 2),
       *py = dev_random(N * K * OH * OH, 0, 0, 3), *psum = dev_random(K, 0, 0, 4, false),
       *psq = dev_random(K, 0, 0, 5, false), *pscale = dev_random(C, 0.5f, 1.5f, 6, false),
       *pbias = dev_random(C, -0.5f, 0.5f, 7, false), *pdy = dev_random(N * K * OH * OH, -1, 1, 8),
       *pdw = dev_random(K * C * 9, 0, 0, 9, false), *pdx = dev_random(N * C * Hh * Hh, 0, 0, 10);
  const auto FWD = CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
  const auto WG = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
  const auto DG = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR;
  Legacy(N, C, K, Hh, stride).passes(px, pw_, py, pdy, pdw, pdx);
  run_graph("fprop", {conv_op(FWD, conv, x, w, y)}, {X, W, Y}, {px, pw_, py}, 32);
  run_graph("fprop + genstats", {conv_op(FWD, conv, x, w, y), genstats(y, sum, sq)}, {X, W, Y, SUM, SQ},
            {px, pw_, py, psum, psq});
  {
    D v1 = tensor(V1, f, {N, C, Hh, Hh}, true), v2 = tensor(V2, f, {N, C, Hh, Hh}, true),
      v3 = tensor(V3, bf, {N, C, Hh, Hh}, true);
    run_graph("scale-bias-relu + fprop + genstats",
              {pw(CUDNN_POINTWISE_MUL, x, &scale, v1), pw(CUDNN_POINTWISE_ADD, v1, &bias, v2),
               pw(CUDNN_POINTWISE_RELU_FWD, v2, nullptr, v3), conv_op(FWD, conv, v3, w, y), genstats(y, sum, sq)},
              {X, W, Y, SUM, SQ, SCALE, BIAS}, {px, pw_, py, psum, psq, pscale, pbias});
    D u3 = tensor(V3, f, {N, C, Hh, Hh}, true);
    run_graph("scale-bias-relu(f32) + fprop",
              {pw(CUDNN_POINTWISE_MUL, x, &scale, v1), pw(CUDNN_POINTWISE_ADD, v1, &bias, v2),
               pw(CUDNN_POINTWISE_RELU_FWD, v2, nullptr, u3), conv_op(FWD, conv, u3, w, y)},
              {X, W, Y, SCALE, BIAS}, {px, pw_, py, pscale, pbias});
  }
  run_graph("wgrad (bf16 dw)", {conv_op(WG, conv, x, dy, dwb)}, {X, DY, DW}, {px, pdy, pdw}, 32);
  run_graph("wgrad (f32 dw)", {conv_op(WG, conv, x, dy, dw)}, {X, DY, DW}, {px, pdy, pdw});
  {
    D v1 = tensor(V1, f, {N, C, Hh, Hh}, true), v2 = tensor(V2, f, {N, C, Hh, Hh}, true),
      v3 = tensor(V3, bf, {N, C, Hh, Hh}, true);
    run_graph("scale-bias-relu + wgrad",
              {pw(CUDNN_POINTWISE_MUL, x, &scale, v1), pw(CUDNN_POINTWISE_ADD, v1, &bias, v2),
               pw(CUDNN_POINTWISE_RELU_FWD, v2, nullptr, v3), conv_op(WG, conv, v3, dy, dwb)},
              {X, DY, DW, SCALE, BIAS}, {px, pdy, pdw, pscale, pbias});
  }
  run_graph("dgrad", {conv_op(DG, conv, dy, w, dx)}, {DY, W, DX}, {pdy, pw_, pdx}, 32);
  {
    // dgrad, then dx·relu'(x·scale + bias): the epilogue a batch norm + relu's gradient needs
    D v1 = tensor(V1, f, {N, C, Hh, Hh}, true), v2 = tensor(V2, f, {N, C, Hh, Hh}, true),
      v4 = tensor(V4, f, {N, C, Hh, Hh}, true);
    run_graph("dgrad + drelu(x*scale+bias)",
              {conv_op(DG, conv, dy, w, v4), pw(CUDNN_POINTWISE_MUL, x, &scale, v1),
               pw(CUDNN_POINTWISE_ADD, v1, &bias, v2), pw(CUDNN_POINTWISE_RELU_BWD, v4, &v2, dx)},
              {DY, W, DX, X, SCALE, BIAS}, {pdy, pw_, pdx, px, pscale, pbias});
  }
  for (void* p : {px, pw_, py, psum, psq, pscale, pbias, pdy, pdw, pdx}) cudaFree(p);
}

int main() {
  CK(cudnnCreate(&H));
  printf("cuDNN %zu\n", cudnnGetVersion());
  shape(512, 64, 64, 32, 1);
  shape(512, 128, 128, 16, 1);
  shape(512, 256, 256, 8, 1);
  shape(256, 64, 64, 56, 1);
  return 0;
}
