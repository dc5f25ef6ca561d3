#pragma once
// What the cuda convolution's passes share (conv.cpp forward, conv_gradient.cpp gradients):
// its shape for our kernels, cuDNN's candidates and inputs, the filters' orders, the widened plan.
#include <algorithm>
#include <functional>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "backends/cuda/conv_plan.h"
#include "backends/cuda/conv_rows.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/epilogue.h"
#include "kernels.cuh"
#include "ops/conv.h"

namespace nngraph::conv_common {

using namespace conv_rows;

inline cuda::ConvShape conv_shape(const ConvGeometry& g, int n, const ImageShape& in, const ImageShape& out) {
  return {n, in.c, in.h, in.w, out.c, out.h, out.w, g.kh, g.kw, g.sy, g.sx, g.dy, g.dx, g.pad_top, g.pad_left};
}

// A pass's cuDNN candidates: each kept algorithm by its index, run through `run`.
template <class Perf, class Run>
std::vector<std::pair<int, std::function<void()>>> algorithms(const std::vector<Perf>& found, Run run) {
  std::vector<std::pair<int, std::function<void()>>> c;
  for (size_t i = 0; i < found.size(); ++i) c.push_back({static_cast<int>(i), [&found, run, i] { run(found[i]); }});
  return c;
}

using Candidates = CudaBackend::Candidates;

// x as cuDNN reads it: itself, or where the plan pads explicitly a padded copy in *padded.
template <class T>
const T* cudnn_input(CudaBackend& b, const ConvPlan& p, const Tensor& x, std::shared_ptr<Buffer>* padded) {
  if (!p.padded) return x.dense_as<const T>();
  *padded = b.allocate(static_cast<size_t>(x.batch()) * x.shape().c * p.hp * p.wp * sizeof(T));
  const ImageShape& is = x.shape();
  cuda::padding(b.stream(), PadMode::Constant, p.margins(is), 0.f, x.dense_as<const T>(), x.batch(),
                p.plane(is, is.h, is.w), static_cast<T*>((*padded)->data()), p.plane(is, p.hp, p.wp));
  return static_cast<const T*>((*padded)->data());
}

// Whether a convolution's images lie channels-last: any of them with several channels and
// pixels says so (the others are the same memory either way).
inline bool channels_last(std::initializer_list<const Tensor*> images) {
  for (const Tensor* t : images)
    if (*t && t->layout() == Layout::NHWC) return true;
  return false;
}

// OIHW weights as KRSC (O·HW·I), or back (`back`): what channels-last cuDNN reads and writes.
template <class T>
void reorder_filter(CudaBackend& b, const T* from, T* to, int o, int i, int taps, bool back) {
  const int dims[3] = {o, back ? taps : i, back ? i : taps}, perm[3] = {0, 2, 1};
  cuda::permute(b.stream(), from, to, dims, perm);
}

// Our own kernels read float32 alone: T is float wherever they run.
template <class T>
const float* as_float(const T* v) {
  return reinterpret_cast<const float*>(v);
}

// The filters in the order a convolution reads them, KRSC where `last`: w itself where it is
// in that order (a half graph's channels-last copy), else reordered into `scratch`.
template <class T>
const T* filters_in(CudaBackend& b, const Tensor& w, bool last, int o, int i, int taps,
                    std::shared_ptr<Buffer>* scratch) {
  const bool krsc = w.layout() == Layout::NHWC;
  if (krsc == last) return w.dense_as<const T>();
  *scratch = b.allocate(w.bytes());
  reorder_filter(b, w.dense_as<const T>(), static_cast<T*>((*scratch)->data()), o, i, taps, krsc);
  return static_cast<const T*>((*scratch)->data());
}

// cuDNN's plan for the convolution on x widened to widened_channels (conv_rows.h), while one of
// the passes `choices` may take it (undecided, or decided so) and cuDNN pads for itself; else null.
inline ConvPlan* widened_plan_of(CudaBackend& b, const ConvGeometry& g, int n, const ImageShape& in, const ImageShape& out,
                                 DType dt, bool last, std::initializer_list<int> choices) {
  const bool may = std::any_of(choices.begin(), choices.end(), [](int choice) {
    return choice == ConvPlan::kUndecided || choice == ConvPlan::kWidened;
  });
  ImageShape wider = in;
  wider.c = last && may ? widened_channels(g, in) : 0;
  if (!wider.c) return nullptr;
  ConvPlan* plan = &conv_plan(b, g, n, wider, out, dt, last);
  return plan->padded ? nullptr : plan;
}

}  // namespace nngraph::conv_common
