#pragma once
// Convolutions with the outputs in vector lanes: the filter packed as [block of V outputs]
// [term][V], a tile P consecutive output positions × NV blocks, each position's input value
// broadcast from the zero-padded frame (frame.h). No position is computed but an output's
// own, where the frame kernels (conv_frame.h) fill vectors with an image's positions: those
// waste most where an image has few (deep layers at a small batch: 49 positions take 64
// lanes). An inference graph packs the filter once per change of the weights (PreparedFilters).
#include <cstddef>

#include "backends/cpu/thread_pool.h"
#include "backends/tensor.h"
#include "nngraph/descriptors.h"
#include "ops/conv.h"

namespace nngraph {

// Whether a packed filter pays for this convolution: one group, long sums and few positions
// an image. At batch 1 on ResNet-18's layers the lanes beat the frames at 14² and 7² (strided
// ones too) and lost at 28² and 56² and on short sums (a 1×1 window over 64 channels), where
// the tiles' stores outweigh their products.
inline bool lanes_pay(const ConvGeometry& g, const ImageShape& in, const ImageShape& out) {
  return g.groups == 1 && in.c * g.kh * g.kw >= 256 && out.h * out.w <= 256;
}

// Floats of a packed filter of `outputs` outputs and `terms` terms (input channels · kh · kw).
size_t lanes_floats(int outputs, int terms);

// packed[b][t][v] = w[b·V + v][t] (zero past the outputs): w's rows of `terms` values, OIHW.
void pack_lanes(ThreadPool& pool, const float* w, int outputs, int terms, float* packed);

// y = neuron(x ⊛ w + bias + addend) from the packed filter (one group); addend (of y's shape) may be empty.
void lane_convolution(ThreadPool& pool, const ConvGeometry& g, const Tensor& x, const float* packed,
                      const Tensor& bias, const NeuronDescriptor& neuron, const Tensor& y, const Tensor& addend);

}  // namespace nngraph
