#pragma once
// Owners of CUDA, cuDNN and cuBLAS handles: each destroys what it holds exactly once (errors at
// destruction are ignored: the driver may be shutting down with the process).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <utility>

namespace nngraph::cuda {

template <class T, auto Destroy>
class Owned {
 public:
  Owned() = default;
  explicit Owned(T handle) : handle_(handle) {}
  Owned(Owned&& o) noexcept : handle_(std::exchange(o.handle_, T{})) {}
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) reset(std::exchange(o.handle_, T{}));
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { reset(); }

  // Where a create call writes the new handle (the old one destroyed first).
  T* out() {
    reset();
    return &handle_;
  }
  void reset(T handle = T{}) {
    if (handle_) Destroy(handle_);
    handle_ = handle;
  }
  T get() const { return handle_; }
  operator T() const { return handle_; }  // NOLINT: passed straight to the library calls
  explicit operator bool() const { return handle_ != T{}; }

 private:
  T handle_{};
};

using Stream = Owned<cudaStream_t, cudaStreamDestroy>;
using Event = Owned<cudaEvent_t, cudaEventDestroy>;
using HostMemory = Owned<void*, cudaFreeHost>;
using Graph = Owned<cudaGraph_t, cudaGraphDestroy>;
using GraphExec = Owned<cudaGraphExec_t, cudaGraphExecDestroy>;
using Cublas = Owned<cublasHandle_t, cublasDestroy>;
using CublasLt = Owned<cublasLtHandle_t, cublasLtDestroy>;
using LtMatmul = Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using LtLayout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using LtPreference = Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;
using Cudnn = Owned<cudnnHandle_t, cudnnDestroy>;
using TensorDescriptor = Owned<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDescriptor = Owned<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor = Owned<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using RNNDescriptor = Owned<cudnnRNNDescriptor_t, cudnnDestroyRNNDescriptor>;
using RNNDataDescriptor = Owned<cudnnRNNDataDescriptor_t, cudnnDestroyRNNDataDescriptor>;

}  // namespace nngraph::cuda
