#include "backends/cpu/cpu_backend.h"

#include <cblas.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "nngraph/error.h"

namespace nngraph {
namespace {

int thread_count() {
  if (const char* env = std::getenv("NNGRAPH_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

void free_host(void* p, size_t bytes, const Device&) { cpu_backend().release(p, bytes); }

size_t rounded(size_t bytes) { return ((bytes ? bytes : 1) + 63) / 64 * 64; }  // aligned_alloc wants a multiple

}  // namespace

void* CpuBackend::Kept::take(size_t bytes) {
  if (bytes < kFrom) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto b = blocks_.rbegin(); b != blocks_.rend(); ++b)  // the latest kept first: its pages are warmest
    if (b->first == bytes) {
      void* p = b->second;
      total_ -= bytes;
      blocks_.erase(std::next(b).base());
      return p;
    }
  return nullptr;
}

bool CpuBackend::Kept::keep(void* p, size_t bytes) {
  if (bytes < kFrom || bytes > kMost) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    blocks_.emplace_back(bytes, p);
  } catch (const std::bad_alloc&) {  // called from a buffer's destructor: the caller frees it instead
    return false;
  }
  for (total_ += bytes; total_ > kMost; blocks_.erase(blocks_.begin())) {
    std::free(blocks_.front().second);
    total_ -= blocks_.front().first;
  }
  return true;
}

void CpuBackend::Kept::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& b : blocks_) std::free(b.second);
  blocks_.clear();
  total_ = 0;
}

CpuBackend::CpuBackend() : pool_(thread_count()) { scipy_openblas_set_num_threads(1); }

CpuBackend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

std::shared_ptr<Buffer> CpuBackend::allocate(size_t bytes) {
  // Where the kernel overcommits, a huge allocation "succeeds" and the process is killed
  // when it touches the pages: refuse what physical memory cannot hold.
  static const size_t physical = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  if (bytes > physical)
    fail<OutOfMemory>("[cpu] out of memory: ", bytes, " bytes requested, ", physical, " bytes of RAM");
  const size_t size = rounded(bytes);
  void* p = kept_.take(size);
  if (!p) p = std::aligned_alloc(64, size);
  if (!p) {  // what is kept may be what the system lacks
    kept_.clear();
    p = std::aligned_alloc(64, size);
  }
  if (!p) fail<OutOfMemory>("[cpu] out of memory allocating ", bytes, " bytes");
  const size_t now = current_ += bytes;
  for (size_t seen = peak_; now > seen && !peak_.compare_exchange_weak(seen, now);) {
  }
  return std::make_shared<Buffer>(p, bytes, Device(), &free_host);
}

void CpuBackend::release(void* p, size_t bytes) {
  if (!kept_.keep(p, rounded(bytes))) std::free(p);
  current_ -= bytes;
}

void CpuBackend::copy_from_host(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::copy(void* dst, const void* src, size_t bytes) {
  if (dst != src) std::memcpy(dst, src, bytes);
}

float* thread_scratch(Scratch use, size_t floats) {
  thread_local std::vector<float> buffers[static_cast<int>(Scratch::Count)];
  std::vector<float>& b = buffers[static_cast<int>(use)];
  if (b.size() < floats) b.resize(floats);
  return b.data();
}

void gemm(ThreadPool* pool, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
          const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  const double flops = 2.0 * m * n * k;
  const int parts = pool ? pool->size() : 1;
  // Worth splitting: enough arithmetic, or a large operand to stream (a fully connected layer
  // applied to a few images reads its weights once whatever the arithmetic).
  const double floats = static_cast<double>(k) * std::max(m, n);
  const bool split = parts > 1 && (flops >= 4e6 || floats >= 2.5e5);
  if (m == 1) {  // one row (a fully connected layer on one image): B times a vector (sgemm packs B first)
    const int inc = trans_a ? lda : 1;
    auto columns = [&](size_t c0, size_t c1) {
      const int count = static_cast<int>(c1 - c0);
      if (trans_b)
        scipy_cblas_sgemv(CblasRowMajor, CblasNoTrans, count, k, alpha, b + c0 * ldb, ldb, a, inc, beta, c + c0, 1);
      else
        scipy_cblas_sgemv(CblasRowMajor, CblasTrans, k, count, alpha, b + c0, ldb, a, inc, beta, c + c0, 1);
    };
    if (split)
      pool->parallel_for(static_cast<size_t>(n), columns);
    else
      columns(0, static_cast<size_t>(n));
    return;
  }
  if (!split) {
    scipy_cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Split the larger of M and N: row blocks of A and C, or column blocks of B and C.
  if (m >= n) {
    pool->parallel_for(static_cast<size_t>(m), [&](size_t r0, size_t r1) {
      const float* ab = trans_a ? a + r0 : a + r0 * lda;
      scipy_cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(r1 - r0), n, k, alpha, ab, lda,
                        b, ldb, beta, c + r0 * ldc, ldc);
    });
  } else {
    pool->parallel_for(static_cast<size_t>(n), [&](size_t c0, size_t c1) {
      const float* bb = trans_b ? b + c0 * ldb : b + c0;
      scipy_cblas_sgemm(CblasRowMajor, ta, tb, m, static_cast<int>(c1 - c0), k, alpha, a, lda,
                        bb, ldb, beta, c + c0, ldc);
    });
  }
}

}  // namespace nngraph
