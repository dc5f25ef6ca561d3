// The cuda bias + neuron epilogue against a host reference, value for value (skipped without a
// GPU): each value's channel found from its place in NHWC (hw = 1) and NCHW images, in 16-byte
// packs where the layout allows and one value a thread where it does not.
#ifdef NNGRAPH_HAVE_CUDA
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <algorithm>
#include <random>
#include <vector>

#include "cuda_vs_cpu.h"

using namespace nngraph;

namespace {

class CudaElementwise : public testing_cuda::OnGpu {};

// Float and bfloat16 values of n = 6 images; channels × hw of 16 × 1 and 64 × 1 (packs of
// pixels' channels), 12 × 1 (bfloat16's packs of 8 would mix pixels), 16 × 64 (packs of a
// channel's pixels) and 5 × 9 (no packs).
TEST_F(CudaElementwise, BiasAndReluFindEachValuesChannel) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  NeuronDescriptor relu;
  relu.type = NeuronType::ReLU;
  for (const auto& [channels, hw] : {std::pair{16, 1}, std::pair{64, 1}, std::pair{12, 1}, std::pair{16, 64},
                                     std::pair{5, 9}}) {
    const size_t count = static_cast<size_t>(6) * channels * hw;
    std::vector<float> x(count), bias(channels);
    for (auto& v : x) v = d(rng);
    for (auto& v : bias) v = d(rng);
    std::vector<__nv_bfloat16> half(count);
    std::transform(x.begin(), x.end(), half.begin(), [](float v) { return __float2bfloat16(v); });
    auto wide = gpu().allocate(count * 4), narrow = gpu().allocate(count * 2), b = gpu().allocate(channels * 4);
    gpu().copy_from_host(wide->data(), x.data(), count * 4);
    gpu().copy_from_host(narrow->data(), half.data(), count * 2);
    gpu().copy_from_host(b->data(), bias.data(), channels * 4);
    const float* bs = static_cast<const float*>(b->data());
    cuda::bias_neuron(gpu().stream(), static_cast<float*>(wide->data()), count, channels, hw, bs, relu);
    cuda::bias_neuron(gpu().stream(), static_cast<__nv_bfloat16*>(narrow->data()), count, channels, hw, bs, relu);
    std::vector<float> got(count);
    std::vector<__nv_bfloat16> got_half(count);
    gpu().copy_to_host(got.data(), wide->data(), count * 4);
    gpu().copy_to_host(got_half.data(), narrow->data(), count * 2);
    for (size_t i = 0; i < count; ++i) {
      const float b_i = bias[i / hw % channels];
      ASSERT_EQ(got[i], std::max(x[i] + b_i, 0.f)) << channels << "x" << hw << " at " << i;
      const float want = __bfloat162float(__float2bfloat16(std::max(__bfloat162float(half[i]) + b_i, 0.f)));
      ASSERT_EQ(__bfloat162float(got_half[i]), want) << channels << "x" << hw << " at " << i;
    }
  }
}

}  // namespace
#endif
