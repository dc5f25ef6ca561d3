#pragma once
// 3×3 stride-1 convolutions as Winograd F(2×2, 3×3) products (conv_winograd.cpp).
#include "backends/cpu/thread_pool.h"
#include "backends/tensor.h"
#include "nngraph/descriptors.h"
#include "ops/conv.h"

namespace nngraph {

// Whether the Winograd form computes this convolution (of n images): 3×3, stride and dilation
// 1, one group, and enough tiles to repay transforming the weights.
bool winograd_fits(const ConvGeometry& g, const ImageShape& in, const ImageShape& out, int n);

// y = neuron(x ⊛ w + bias + addend) where winograd_fits; addend (of y's shape) may be empty.
void winograd_convolution(ThreadPool& pool, const ConvGeometry& g, const Tensor& x, const Tensor& w,
                          const Tensor& bias, const NeuronDescriptor& neuron, const Tensor& y, const Tensor& addend);

}  // namespace nngraph
