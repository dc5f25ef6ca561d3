#pragma once
// Convolutions without im2col. Each image is copied once into a zero-padded frame (split into
// phase planes for strides; small images several to a frame, side by side); term (channel, tap)
// of the product is that frame read at the tap's offset, so the product's rows are read in place.
// Outputs are computed on the frame's pitch, and the columns past each image's width are dropped.
#include "backends/cpu/thread_pool.h"
#include "backends/tensor.h"
#include "nngraph/descriptors.h"
#include "ops/conv.h"

namespace nngraph {

// Whether the frame kernels compute this convolution's gradient (the forward takes any stride).
inline bool frame_gradient_fits(const ConvGeometry& g) { return g.sy == 1 && g.sx == 1; }

// y = neuron(x ⊛ w + bias + addend); addend (of y's shape) may be empty.
void frame_convolution(ThreadPool& pool, const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias,
                       const NeuronDescriptor& neuron, const Tensor& y, const Tensor& addend);

// As ConvolutionGradientKernel: dx, dw and db are each optional and overwritten.
void frame_convolution_gradient(ThreadPool& pool, const ConvGeometry& g, const Tensor& x, const Tensor& w,
                                const Tensor& dy, const Tensor& y, const NeuronDescriptor& neuron, const Tensor& dx,
                                const Tensor& dw, const Tensor& db);

}  // namespace nngraph
