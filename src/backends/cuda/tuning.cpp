// Autotuning: the device time of candidate launches, and matrix products through whichever
// of cuBLAS's default, cuBLASLt's algorithms and our kernels was quickest on a shape.
#include <algorithm>
#include <cstdint>
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

namespace {
enum { kUndecided, kCublas, kTensor, kThin, kLt };  // kLt + i: cuBLASLt's i-th algorithm
constexpr int kLtAlgorithms = 6;
constexpr size_t kLtWorkspace = 8u << 20;  // the most scratch an algorithm of cuBLASLt may ask

// The bytes (1 to 16) that every operand's address is a multiple of: cuBLASLt picks its
// algorithms for an alignment, so a shape's choice holds for that alignment alone.
int alignment(const void* a, const void* b, const void* c) {
  const auto bits = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) | reinterpret_cast<uintptr_t>(c);
  int bytes = 16;
  while (bits % bytes) bytes /= 2;
  return bytes;
}

// How the tuning log names a product: "gemm NT 64x128x256 tf32", say.
std::string product_name(bool ta, bool tb, int m, int n, int k, const std::string& types) {
  std::ostringstream what;
  what << "gemm " << (ta ? "T" : "N") << (tb ? "T" : "N") << ' ' << m << "x" << n << "x" << k << ' ' << types;
  return what.str();
}
}  // namespace

CudaBackend::TunedProduct CudaBackend::describe(const Product& p) {
  static const bool enabled = [] {
    const char* e = std::getenv("NNGRAPH_CUBLASLT");
    return !(e && e[0] == '0');
  }();
  TunedProduct lt;
  if (!enabled) return lt;
  if (!lt_) cublas_check(cublasLtCreate(lt_.out()), "gemm");
  // Column-major D (n × m) = op(b) · op(a), as cublasGemmEx is called.
  const cudaDataType scale = p.compute == CUBLAS_COMPUTE_16F ? CUDA_R_16F : CUDA_R_32F;
  cublas_check(cublasLtMatmulDescCreate(lt.desc.out(), p.compute, scale), "gemm");
  cublas_check(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_TRANSA, &p.ob, sizeof(p.ob)), "gemm");
  cublas_check(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_TRANSB, &p.oa, sizeof(p.oa)), "gemm");
  const bool nb = p.ob == CUBLAS_OP_N, na = p.oa == CUBLAS_OP_N;
  cublas_check(cublasLtMatrixLayoutCreate(lt.a.out(), p.type, nb ? p.n : p.k, nb ? p.k : p.n, p.ldb), "gemm");
  cublas_check(cublasLtMatrixLayoutCreate(lt.b.out(), p.type, na ? p.k : p.m, na ? p.m : p.k, p.lda), "gemm");
  cublas_check(cublasLtMatrixLayoutCreate(lt.c.out(), p.type, p.n, p.m, p.ldc), "gemm");
  cuda::LtPreference preference;
  cublas_check(cublasLtMatmulPreferenceCreate(preference.out()), "gemm");
  const uint64_t workspace = kLtWorkspace;
  cublas_check(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                    sizeof(workspace)),
               "gemm");
  const uint32_t align = static_cast<uint32_t>(alignment(p.a, p.b, p.c));
  for (const auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                               CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublas_check(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &align, sizeof(align)), "gemm");
  if (p.type != CUDA_R_32F) {  // half outputs: no split sums added up in half
    const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    cublas_check(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                      sizeof(schemes)),
                 "gemm");
  }
  cublasLtMatmulHeuristicResult_t found[kLtAlgorithms];
  int count = 0;
  // No algorithm for the shape is no error: cublasGemmEx runs it.
  if (cublasLtMatmulAlgoGetHeuristic(lt_, lt.desc, lt.a, lt.b, lt.c, lt.c, preference, kLtAlgorithms, found,
                                     &count) == CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < count; ++i)
      if (found[i].state == CUBLAS_STATUS_SUCCESS) lt.algorithms.push_back(found[i]);
  return lt;
}

void CudaBackend::product(const Product& p, const Candidates& ours, const std::function<std::string()>& what) {
  auto cublas = [&] {
    if (p.batch.count == 1)
      cublas_check(cublasGemmEx(cublas_, p.ob, p.oa, p.n, p.m, p.k, p.alpha, p.b, p.type, p.ldb, p.a, p.type, p.lda,
                                p.beta, p.c, p.type, p.ldc, p.compute, CUBLAS_GEMM_DEFAULT),
                   "gemm");
    else
      cublas_check(cublasGemmStridedBatchedEx(cublas_, p.ob, p.oa, p.n, p.m, p.k, p.alpha, p.b, p.type, p.ldb,
                                              p.batch.b, p.a, p.type, p.lda, p.batch.a, p.beta, p.c, p.type, p.ldc,
                                              p.batch.c, p.batch.count, p.compute, CUBLAS_GEMM_DEFAULT),
                   "gemm");
  };
  // Only plain single products are timed: a timing runs one several times, which would
  // accumulate into C where beta is not zero.
  if (p.batch.count != 1 || !p.plain) return cublas();
  const std::vector<int> key{static_cast<int>(p.type), static_cast<int>(p.compute), p.oa, p.ob, p.m, p.n, p.k,
                             p.lda, p.ldb, p.ldc, alignment(p.a, p.b, p.c)};
  auto found = products_.find(key);
  if (found == products_.end()) found = products_.emplace(key, describe(p)).first;  // kept once whole
  TunedProduct& tuned = found->second;
  const int algorithms = static_cast<int>(tuned.algorithms.size());
  auto lt = [&](int i) {
    const auto& r = tuned.algorithms[i];
    const auto scratch = r.workspaceSize ? allocate(r.workspaceSize) : nullptr;
    cublas_check(cublasLtMatmul(lt_, tuned.desc, p.alpha, p.b, tuned.a, p.a, tuned.b, p.beta, p.c, tuned.c, p.c,
                                tuned.c, &r.algo, scratch ? scratch->data() : nullptr, r.workspaceSize, stream_),
                 "gemm");
  };
  auto has = [&](int id) {
    return id == kCublas || (id >= kLt && id - kLt < algorithms) ||
           std::any_of(ours.begin(), ours.end(), [id](const auto& o) { return o.first == id; });
  };
  // Candidate `id` (undecided: cuBLAS's default, while a capture records the step).
  auto run = [&](int id) {
    if (id >= kLt) return lt(id - kLt);
    for (const auto& [o, work] : ours)
      if (o == id) return work();
    cublas();
  };
  if (forced_.id >= 0 && has(forced_.id)) {
    ++forced_.runs;
    return run(forced_.id);
  }
  if (tuned.choice == kUndecided && !recording_ && (algorithms > 0 || !ours.empty())) {
    Candidates all{{kCublas, cublas}};
    for (int i = 0; i < algorithms; ++i) all.push_back({kLt + i, [&, i] { lt(i); }});
    all.insert(all.end(), ours.begin(), ours.end());
    tuned.choice = quickest(all, what(), [](int id) -> std::string {
      return id == kCublas ? "cublas" : id == kTensor ? "tensor" : id == kThin ? "thin" : "lt" + std::to_string(id - kLt);
    });
  }
  run(tuned.choice);
}

void CudaBackend::gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                       float* c, int ldc, bool tf32, float alpha, float beta, GemmBatch batch) {
  const Product p{ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, a, lda, b, ldb, c, ldc,
                  CUDA_R_32F, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, &alpha, &beta, batch,
                  alpha == 1.f && beta == 0.f};
  // Ours compute C = op(A)·op(B) alone.
  Candidates ours;
  if (batch.count == 1 && p.plain) {
    if (cuda::tensor_product_fits(ta, tb, m, n, k, a, lda, b, ldb, ldc))
      ours.push_back({kTensor, [&] {
                        const size_t floats = cuda::tensor_product_partial(m, n, k);
                        const auto partial = floats ? allocate(floats * sizeof(float)) : nullptr;
                        cuda::tensor_product(stream_, !tf32, ta, tb, m, n, k, a, lda, b, ldb, c,
                                             partial ? static_cast<float*>(partial->data()) : nullptr);
                      }});
    if (cuda::thin_product_fits(ta, tb, m, n, k))
      ours.push_back({kThin, [&] { cuda::thin_product(stream_, ta, tb, m, n, k, a, lda, b, ldb, c, ldc); }});
  }
  product(p, ours, [&] { return product_name(ta, tb, m, n, k, tf32 ? "tf32" : "float32"); });
}

void CudaBackend::gemm(DType t, bool ta, bool tb, int m, int n, int k, const void* a, int lda, const void* b, int ldb,
                       void* c, int ldc, bool tf32, float alpha, float beta, GemmBatch batch, bool half) {
  if (t == DType::Float32)
    return gemm(ta, tb, m, n, k, static_cast<const float*>(a), lda, static_cast<const float*>(b), ldb,
                static_cast<float*>(c), ldc, tf32, alpha, beta, batch);
  half = half && t == DType::Float16;
  // A float16 computation takes its scalars in float16.
  const __half alpha16 = __float2half(alpha), beta16 = __float2half(beta);
  const Product p{ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                  tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                  m, n, k, a, lda, b, ldb, c, ldc,
                  t == DType::Float16 ? CUDA_R_16F : CUDA_R_16BF,
                  half ? CUBLAS_COMPUTE_16F : CUBLAS_COMPUTE_32F,
                  half ? static_cast<const void*>(&alpha16) : &alpha,
                  half ? static_cast<const void*>(&beta16) : &beta,
                  batch,
                  alpha == 1.f && beta == 0.f};
  product(p, {}, [&] {
    return product_name(ta, tb, m, n, k,
                        std::string(t == DType::Float16 ? "float16" : "bfloat16") + (half ? " in float16" : ""));
  });
}

}  // namespace nngraph
