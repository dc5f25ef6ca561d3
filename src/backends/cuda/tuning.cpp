// Autotuning: the device time of candidate launches, and matrix products through whichever
// of cuBLAS and our kernels was quickest on a shape.
#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"

namespace nngraph {

float CudaBackend::time_ms(const std::function<void()>& work) {
  cuda::Event start, stop;
  cuda_check(cudaEventCreate(start.out()), "timing");
  cuda_check(cudaEventCreate(stop.out()), "timing");
  work();
  constexpr int runs = 3;
  // The runs queue up behind a wait long enough to enqueue them: their device time, not the
  // host's launch overhead, which a captured step does not pay.
  cuda::hold(stream_, 300);
  cuda_check(cudaEventRecord(start, stream_), "timing");
  for (int i = 0; i < runs; ++i) work();
  cuda_check(cudaEventRecord(stop, stream_), "timing");
  cuda_check(cudaEventSynchronize(stop), "timing");
  float ms = 0;
  cuda_check(cudaEventElapsedTime(&ms, start, stop), "timing");
  return ms / runs;
}

// Rounds that take turns between the candidates, each keeping its least time: the first
// calls of a process meet a GPU whose clocks still ramp, which a single pass in turn
// charged to whichever candidate ran first.
int CudaBackend::quickest(const Candidates& candidates, const std::string& what,
                          const std::function<std::string(int)>& name) {
  if (candidates.size() == 1) return candidates.front().first;
  constexpr int kRounds = 3;
  std::vector<float> best(candidates.size(), std::numeric_limits<float>::infinity());
  for (int round = 0; round < kRounds; ++round)
    for (size_t i = 0; i < candidates.size(); ++i) best[i] = std::min(best[i], time_ms(candidates[i].second));
  const int choice = candidates[std::min_element(best.begin(), best.end()) - best.begin()].first;
  const char* log = std::getenv("NNGRAPH_TUNING_LOG");  // read at each tuning, which is rare
  if (log && std::string(log) == "1") {  // the profiles show only the winners; this shows how close the others came
    std::ostringstream line;
    line << "nngraph tuning " << what << ":";
    for (size_t i = 0; i < candidates.size(); ++i)
      line << (i ? ", " : " ") << name(candidates[i].first) << ' ' << std::fixed << std::setprecision(4) << best[i]
           << " ms";
    line << "; chose " << name(choice) << '\n';
    std::cerr << line.str() << std::flush;
  }
  return choice;
}

void CudaBackend::gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                       float* c, int ldc, bool tf32, float alpha, float beta, GemmBatch batch) {
  const auto oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const auto compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  auto cublas = [&] {
    if (batch.count == 1)
      cublas_check(cublasGemmEx(cublas_, ob, oa, n, m, k, &alpha, b, CUDA_R_32F, ldb, a, CUDA_R_32F, lda, &beta, c,
                                CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT),
                   "gemm");
    else
      cublas_check(cublasGemmStridedBatchedEx(cublas_, ob, oa, n, m, k, &alpha, b, CUDA_R_32F, ldb, batch.b, a,
                                              CUDA_R_32F, lda, batch.a, &beta, c, CUDA_R_32F, ldc, batch.c,
                                              batch.count, compute, CUBLAS_GEMM_DEFAULT),
                   "gemm");
  };
  // Ours compute C = op(A)·op(B) alone; which runs a shape is timed once, as for convolutions.
  enum { kUndecided, kCublas, kTensor, kThin };
  Candidates candidates{{kCublas, cublas}};
  if (batch.count == 1 && alpha == 1.f && beta == 0.f) {
    if (cuda::tensor_product_fits(ta, tb, m, n, k, a, lda, b, ldb, ldc))
      candidates.push_back({kTensor, [&] {
                              const size_t floats = cuda::tensor_product_partial(m, n, k);
                              const auto partial = floats ? allocate(floats * sizeof(float)) : nullptr;
                              cuda::tensor_product(stream_, !tf32, ta, tb, m, n, k, a, lda, b, ldb, c,
                                                   partial ? static_cast<float*>(partial->data()) : nullptr);
                            }});
    if (cuda::thin_product_fits(ta, tb, m, n, k))
      candidates.push_back({kThin, [&] { cuda::thin_product(stream_, ta, tb, m, n, k, a, lda, b, ldb, c, ldc); }});
  }
  if (candidates.size() == 1) return cublas();
  int& choice = gemm_choices_[{ta, tb, m, n, k, lda, ldb, tf32}];
  if (choice == kUndecided && !recording_) {
    std::ostringstream what;
    what << "gemm " << (ta ? "T" : "N") << (tb ? "T" : "N") << ' ' << m << "x" << n << "x" << k
         << (tf32 ? " tf32" : " float32");
    choice = quickest(candidates, what.str(), [](int id) -> std::string {
      return id == kCublas ? "cublas" : id == kTensor ? "tensor" : "thin";
    });
  }
  for (const auto& [id, run] : candidates)
    if (id == choice) return run();
  cublas();  // undecided while capturing, or the one chosen does not fit these operands
}

void CudaBackend::gemm(DType t, bool ta, bool tb, int m, int n, int k, const void* a, int lda, const void* b, int ldb,
                       void* c, int ldc, bool tf32, float alpha, float beta, GemmBatch batch, bool half) {
  if (t == DType::Float32)
    return gemm(ta, tb, m, n, k, static_cast<const float*>(a), lda, static_cast<const float*>(b), ldb,
                static_cast<float*>(c), ldc, tf32, alpha, beta, batch);
  const auto oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cudaDataType type = t == DType::Float16 ? CUDA_R_16F : CUDA_R_16BF;
  half = half && t == DType::Float16;
  // A float16 computation takes its scalars in float16.
  const __half alpha16 = __float2half(alpha), beta16 = __float2half(beta);
  const void* pa = half ? static_cast<const void*>(&alpha16) : &alpha;
  const void* pb = half ? static_cast<const void*>(&beta16) : &beta;
  const cublasComputeType_t compute = half ? CUBLAS_COMPUTE_16F : CUBLAS_COMPUTE_32F;
  if (batch.count == 1)
    cublas_check(cublasGemmEx(cublas_, ob, oa, n, m, k, pa, b, type, ldb, a, type, lda, pb, c, type, ldc, compute,
                              CUBLAS_GEMM_DEFAULT),
                 "gemm");
  else
    cublas_check(cublasGemmStridedBatchedEx(cublas_, ob, oa, n, m, k, pa, b, type, ldb, batch.b, a, type, lda,
                                            batch.a, pb, c, type, ldc, batch.c, batch.count, compute,
                                            CUBLAS_GEMM_DEFAULT),
                 "gemm");
}

}  // namespace nngraph
