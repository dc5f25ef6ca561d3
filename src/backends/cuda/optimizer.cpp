// The built-in optimizers on cuda: every tensor of a step in one launch (shaders/cuda/optimizer.cu),
// re-pointed from step to step in a captured step.
#include "backends/cuda/cuda_backend.h"
#include "kernels.cuh"
#include "ops/optimizer.h"

namespace nngraph {
namespace {

void optimizer(Backend& backend, const OptimizerStep& s, const std::vector<TensorUpdate>& tensors) {
  CudaBackend& b = cuda_of(backend);
  auto lock = b.enter();
  cuda::optimizer_steps(b.step_launch(), s, tensors.data(), tensors.size());
}

NNGRAPH_KERNEL(OptimizerKernel, CUDA, optimizer);

}  // namespace
}  // namespace nngraph
