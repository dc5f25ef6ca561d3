"""Constant tensors that vary within an image (a learned position embedding, a class token
expanded over the batch, an attention mask), made for every image from a pixel of ones: a
transposed convolution whose kernel is the constant. Its weights are the constant's, trainable,
as the embedding is a parameter of the model it came from; a mask's are frozen."""

from __future__ import annotations

import numpy as np

from nngraph._core import ArrayDataSource, ConvolutionDescriptor, ConvolutionTranspose, Crop, Neuron
from nngraph.onnx._layout import Act, Sym, Unsupported, to_image


def constant_act(imp, k: np.ndarray, like: Act, label: str, frozen: bool = False) -> Act:
    """k, broadcast to the dims of `like` (1 along the batch), as an image for every image,
    laid out as `like`; `label` (one the importer gave) names its data source, whose weights
    are `frozen` where asked. A constant holding ±∞ (a causal mask added to attention's scores)
    is a mask, frozen, its infinities ±65504, the largest float16, finite in every format a
    graph computes in (an infinite weight would make NaN of the zeros a convolution multiplies
    it by): added to a score, a value whose exponential is 0, as softmax takes −∞."""
    dims = []
    for e, d in zip(like.axes, like.dims()):
        if "N" in like.norm(e) and like.norm(e) != ("N",):
            raise Unsupported(f"of a constant over a tensor lying as {like.describe()} is not supported")
        dims.append(1 if isinstance(d, Sym) else int(d))
    k = np.asarray(k, np.float32)
    if np.isnan(k).any():
        raise Unsupported("with a constant holding NaN is not supported")
    if np.isinf(k).any():
        k, frozen = np.where(np.isinf(k), np.copysign(np.finfo(np.float16).max, k), k).astype(np.float32), True
    if k.ndim > len(dims):
        raise Unsupported(f"with a constant of shape {k.shape} that enlarges the tensor is not supported")
    try:
        full = np.broadcast_to(k.reshape((1,) * (len(dims) - k.ndim) + k.shape), dims)
    except ValueError:
        raise Unsupported(f"with a constant of shape {k.shape} over a tensor lying as {like.describe()}") from None
    image = to_image(np.ascontiguousarray(full), Act(None, like.shape, like.axes, like.split))[0]
    c, h, w = image.shape
    if imp.ones is None:  # one for every constant of the model: the first input's first value, (1 + 0·x)⁰
        pixel = Crop(imp.inputs[0].image, window=(0, 0, 1, 1), channels=(0, 1), label=imp.label("constants_pixel"))
        imp.ones = Neuron(pixel, "power", a=1.0, b=0.0, c=0.0, label=imp.label("constants_one"))
    ds = ArrayDataSource(ConvolutionDescriptor((h, w), 1, c, transposed=True), weights=image[None], biases=None,
                         label=label, frozen=["weights"] if frozen else [])
    return Act(ConvolutionTranspose(imp.ones, ds, label=ds.label()), (c, h, w), like.axes, like.split)


def expanded(imp, n) -> list:
    """Expand of a constant of several values to a shape that holds the batch size (a class
    token expanded over the batch): the constant for every image, the batch its first axis,
    its last axis the channels."""
    k, dims = np.asarray(imp.get(n.input[0]), np.float32), list(imp.get(n.input[1]))
    dims = [1] * (k.ndim - len(dims)) + dims
    k = k.reshape((1,) * (len(dims) - k.ndim) + k.shape)
    if len(dims) < 2 or dims[0] != Sym() or any(isinstance(d, Sym) for d in dims[1:]) or k.shape[0] != 1:
        raise Unsupported(f"of a constant to {dims}: only to (N, ..., C) from (1, ..., C)")
    sizes = np.broadcast_shapes(k.shape[1:], tuple(int(d) for d in dims[1:]))
    if len(sizes) > 3 or int(np.prod(sizes[:-1])) != max(sizes[:-1], default=1):
        raise Unsupported(f"of a constant to {dims}: one axis at most between the batch and the channels")
    spatial = next((i for i, s in enumerate(sizes[:-1]) if s > 1), None)
    axes = [("N",)] + [("W",) if i == spatial else () for i in range(len(sizes) - 1)] + [("D", "E")]
    like = Act(None, (int(sizes[-1]), 1, int(max(sizes[:-1], default=1))), tuple(axes))
    return [constant_act(imp, np.broadcast_to(k, (1, *sizes)), like, imp.source_label(n, 0))]
