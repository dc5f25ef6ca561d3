// Casts between storage types, the finite checks and loss scaling on cuda
// (shaders/cuda/elementwise.cu, reduce.cu).
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/cast.h"
#include "ops/loss_scale.h"

namespace nngraph {
namespace {

void cast(Backend& backend, const Tensor& in, const Tensor& out) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  if (in.layout() != out.layout()) {  // permuted and cast in one pass
    const int c = in.shape().c, hw = in.shape().h * in.shape().w, perm[3] = {0, 2, 1};
    const int dims[3] = {in.batch(), in.layout() == Layout::NCHW ? c : hw, in.layout() == Layout::NCHW ? hw : c};
    cuda::with_storage(in.dtype(), [&](auto from) {
      cuda::with_storage(out.dtype(), [&](auto to) {
        cuda::permute(b.stream(), static_cast<const decltype(from)*>(in.data()), static_cast<decltype(to)*>(out.data()),
                      dims, perm);
      });
    });
    return;
  }
  if (in.dtype() == out.dtype()) return b.copy(out.data(), in.data(), in.bytes());
  cuda::cast(b.stream(), in.data(), in.dtype(), out.data(), out.dtype(), in.count());
}

bool all_finite(Backend& backend, const Tensor& x) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  auto flag = b.allocate(sizeof(int));
  cuda::any_nonfinite(b.stream(), x.data(), x.dtype(), x.count(), static_cast<int*>(flag->data()));
  int host = 0;
  b.copy_to_host(&host, flag->data(), sizeof(int));
  return host == 0;
}

void loss_scale_check(Backend& backend, const std::vector<Tensor>& gradients, math::LossScaleState* state) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  std::vector<cuda::Checked> checked;
  for (const Tensor& g : gradients) checked.push_back({g.data(), g.dtype(), g.count()});
  // This step's flag alone, even where an earlier step failed between its check and its update.
  cuda_check(cudaMemsetAsync(&state->found, 0, sizeof state->found, b.stream()), "loss_scale_check");
  cuda::mark_nonfinite(b.stream(), checked, &state->found);
}

void loss_scale_update(Backend& backend, math::LossScaleState* state, const LossScaling& rule) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::advance_loss_scale(b.stream(), state, rule);
}

NNGRAPH_KERNEL(CastKernel, CUDA, cast);
NNGRAPH_KERNEL(LossScaleCheckKernel, CUDA, loss_scale_check);
NNGRAPH_KERNEL(LossScaleUpdateKernel, CUDA, loss_scale_update);
NNGRAPH_KERNEL(AllFiniteKernel, CUDA, all_finite);

}  // namespace
}  // namespace nngraph
