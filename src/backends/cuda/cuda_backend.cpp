// The cuda backend's device: errors, the registry of GPUs, each one's stream and library
// handles, its lock; the queue's fences.
#include "backends/cuda/cuda_backend.h"

#include <array>
#include <memory>
#include <mutex>

#include "nngraph/error.h"

namespace nngraph {

void cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear the sticky-free error so the device stays usable
  if (e == cudaErrorMemoryAllocation) fail<OutOfMemory>("[", what, "] out of GPU memory: ", cudaGetErrorString(e));
  fail<DeviceError>("[", what, "] CUDA error: ", cudaGetErrorString(e));
}

void cudnn_check(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  if (s == CUDNN_STATUS_ALLOC_FAILED) fail<OutOfMemory>("[", what, "] cuDNN: ", cudnnGetErrorString(s));
  fail<DeviceError>("[", what, "] cuDNN error: ", cudnnGetErrorString(s));
}

void cublas_check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  if (s == CUBLAS_STATUS_ALLOC_FAILED) fail<OutOfMemory>("[", what, "] cuBLAS: ", cublasGetStatusString(s));
  fail<DeviceError>("[", what, "] cuBLAS error: ", cublasGetStatusString(s));
}

namespace cuda {
void check_launch(const char* what) { cuda_check(cudaGetLastError(), what); }
}  // namespace cuda

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

CudaBackend& cuda_backend(int index) {
  static std::mutex mutex;
  // Never destroyed: buffers may be freed while the process exits, after static destructors.
  static auto& backends = *new std::array<std::unique_ptr<CudaBackend>, 64>();
  std::lock_guard<std::mutex> lock(mutex);  // every buffer free comes here: count devices once
  if (index >= 0 && index < static_cast<int>(backends.size()) && backends[index]) return *backends[index];
  const int count = cuda_device_count();
  if (index >= count || index >= static_cast<int>(backends.size()))
    fail<DeviceError>("[device] cuda:", index, " is not present (", count, " CUDA device(s) found)");
  backends[index] = std::make_unique<CudaBackend>(index);
  return *backends[index];
}

CudaBackend::CudaBackend(int index) : index_(index) {
  cuda_check(cudaSetDevice(index), "device");
  cuda_check(cudaStreamCreateWithFlags(stream_.out(), cudaStreamNonBlocking), "device");
  cuda_check(cudaStreamCreateWithFlags(uploads_.out(), cudaStreamNonBlocking), "device");
  cuda_check(cudaStreamCreateWithFlags(downloads_.out(), cudaStreamNonBlocking), "device");
  cuda_check(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, index), "device");
  // Keep freed blocks in the pool: graphs allocate the same sizes every step.
  cudaMemPool_t pool;
  cuda_check(cudaDeviceGetDefaultMemPool(&pool, index), "device");
  uint64_t keep = UINT64_MAX;
  cuda_check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "device");
  cublas_check(cublasCreate(cublas_.out()), "device");
  cublas_check(cublasSetStream(cublas_, stream_), "device");
  cudnn_check(cudnnCreate(cudnn_.out()), "device");
  cudnn_check(cudnnSetStream(cudnn_, stream_), "device");
}

std::unique_lock<std::recursive_mutex> CudaBackend::enter() const {
  std::unique_lock<std::recursive_mutex> lock(mutex_);
  thread_local int current = -1;
  if (current != index_) {
    cuda_check(cudaSetDevice(index_), "device");
    current = index_;
  }
  return lock;
}

void CudaBackend::synchronize() {
  auto lock = enter();
  cuda_check(cudaStreamSynchronize(stream_), "synchronize");
}

bool CudaFence::reached() {
  const cudaError_t e = cudaEventQuery(event);
  if (e == cudaErrorNotReady) return false;
  cuda_check(e, "device");
  return true;
}

void CudaFence::wait() { cuda_check(cudaEventSynchronize(event), "device"); }

std::shared_ptr<Fence> CudaBackend::fence() {
  auto lock = enter();
  auto f = std::make_shared<CudaFence>();
  // Blocking: a thread waiting on it sleeps; reached() polls without sleeping.
  cuda_check(cudaEventCreateWithFlags(f->event.out(), cudaEventDisableTiming | cudaEventBlockingSync), "device");
  cuda_check(cudaEventRecord(f->event, stream_), "device");
  return f;
}

}  // namespace nngraph
