"""Import handlers of operators over windows and products: convolutions, pooling,
reductions, fully connected layers. Each takes the importer and the NodeProto and returns
the node's outputs."""

from __future__ import annotations

import math

import numpy as np

from nngraph._core import (
    Addition,
    ArrayDataSource,
    Convolution,
    ConvolutionDescriptor,
    ConvolutionTranspose,
    Crop,
    FullyConnected,
    GlobalAveragePooling,
    GlobalMaxPooling,
    ImageCopyToMatrixNode,
    MatrixCopyToImageNode,
    Neuron,
    Pooling,
    Subtraction,
)
from nngraph.onnx._layout import (
    Act,
    Unsupported,
    axes_in,
    channels_first,
    fixed_map,
    image_axes,
    infer,
    unused,
)
from nngraph.onnx._patterns import FUSED
from nngraph.onnx._products import matmul as products


def _window(a: dict, sizes: list, kernel: list, ceil: bool = False) -> list:
    """(kernel, stride, dilation, before, after) per spatial axis from Conv/Pool attributes."""
    k = len(kernel)
    strides, dil = a.get("strides", [1] * k), a.get("dilations", [1] * k)
    pads = a.get("pads", [0] * (2 * k))
    auto = a.get("auto_pad", "NOTSET")
    out = []
    for i in range(k):
        span = (kernel[i] - 1) * dil[i] + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            total = max(0, (math.ceil(sizes[i] / strides[i]) - 1) * strides[i] + span - sizes[i])
            before = total // 2 if auto == "SAME_UPPER" else total - total // 2
            after = total - before
        elif auto == "VALID":
            before = after = 0
        else:
            before, after = pads[i], pads[i + k]
        if ceil:
            full = sizes[i] + before + after - span
            n = -(-full // strides[i]) + 1
            if (n - 1) * strides[i] >= sizes[i] + before:
                n -= 1  # a window starting in the padding after the image is dropped
            after += max(0, (n - 1) * strides[i] + span - (sizes[i] + before + after))
        out.append((kernel[i], strides[i], dil[i], before, after))
    return out


def _place(axes: list, geo: list) -> tuple:
    """kernel, stride, dilation (each (y, x)) and padding (top, bottom, left, right) on the image."""
    kernel, stride, dil, pads = [1, 1], [1, 1], [1, 1], [0, 0, 0, 0]
    for axis, (k, s, d, b, e) in zip(axes, geo):
        i = 0 if axis == "H" else 1
        kernel[i], stride[i], dil[i] = k, s, d
        pads[2 * i], pads[2 * i + 1] = b, e
    return tuple(kernel), tuple(stride), tuple(dil), tuple(pads)


def _checked(a: dict, w: np.ndarray, b, outputs: int) -> None:
    """A ValueError where kernel_shape disagrees with the weights, or the bias is not `outputs` values."""
    if "kernel_shape" in a and list(a["kernel_shape"]) != list(w.shape[2:]):
        raise ValueError(f"kernel_shape {list(a['kernel_shape'])} disagrees with weights of shape {list(w.shape)}")
    if b is not None and b.shape != (outputs,):
        raise ValueError(f"bias of shape {list(b.shape)} where {outputs} output channels want [{outputs}]")


def conv(imp, n) -> list:
    x, w, b, a = imp.act(n), imp.const(n, 1), imp.const(n, 2, optional=True), imp.attrs(n)
    _checked(a, w, b, w.shape[0])
    spatial = x.spatial_form("Conv", w.ndim)
    axes = image_axes(spatial)
    geo = _window(a, [x.size(axis) for axis in axes], list(w.shape[2:]))
    kernel, stride, dil, pads = _place(axes, geo)
    g = a.get("group", 1)
    desc = ConvolutionDescriptor(kernel, w.shape[1] * g, w.shape[0], stride=stride, dilation=dil, groups=g)
    label = imp.source_label(n)
    ds = ArrayDataSource(desc, weights=w.reshape(w.shape[0], w.shape[1], *kernel), biases=b, label=label)
    node = Convolution(x.image, ds, padding=pads, label=label)
    return [channels_first(node, infer(node, [x]), axes)]


def conv_transpose(imp, n) -> list:
    x, w, b, a = imp.act(n), imp.const(n, 1), imp.const(n, 2, optional=True), imp.attrs(n)
    _checked(a, w, b, w.shape[1] * a.get("group", 1))
    spatial = x.spatial_form("ConvTranspose", w.ndim)
    axes = image_axes(spatial)
    k = w.ndim - 2
    sizes, kernel = [x.size(ax) for ax in axes], list(w.shape[2:])
    strides, dil = a.get("strides", [1] * k), a.get("dilations", [1] * k)
    extra = list(a.get("output_padding", [0] * k))
    pads = list(a.get("pads", [0] * (2 * k)))
    auto, wanted = a.get("auto_pad", "NOTSET"), a.get("output_shape")
    if wanted is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        wanted = [s * st for s, st in zip(sizes, strides)]
    if wanted is not None:  # the padding that gives that size, as ONNX divides it
        wanted = list(wanted)[-k:]
        for i in range(k):
            total = strides[i] * (sizes[i] - 1) + extra[i] + (kernel[i] - 1) * dil[i] + 1 - wanted[i]
            half = total // 2
            pads[i], pads[i + k] = (half, total - half) if auto == "SAME_UPPER" else (total - half, half)
    geo = [(kernel[i], strides[i], dil[i], pads[i], pads[i + k]) for i in range(k)]
    kern, stride, dilation, padding = _place(axes, geo)
    out_pad = [0, 0]
    for axis, e in zip(axes, extra):
        out_pad[0 if axis == "H" else 1] = e
    g = a.get("group", 1)
    desc = ConvolutionDescriptor(kern, w.shape[0], w.shape[1] * g, stride=stride, dilation=dilation, groups=g,
                                 transposed=True)
    label = imp.source_label(n)
    ds = ArrayDataSource(desc, weights=w.reshape(w.shape[0], w.shape[1], *kern), biases=b, label=label)
    node = ConvolutionTranspose(x.image, ds, padding=padding, output_padding=tuple(out_pad), label=label)
    return [channels_first(node, infer(node, [x]), axes)]


def pool(imp, n) -> list:
    x = imp.act(n)
    if x.channels_along():
        return [_channel_windows(imp, n, x), unused("max pooling's indices")]
    spatial = x.spatial_form(n.op_type)
    if not spatial:
        raise Unsupported("needs a spatial axis")
    a = imp.attrs(n)
    axes = image_axes(spatial)
    kernel = list(a["kernel_shape"])
    maximum = n.op_type == "MaxPool"
    sizes = [x.size(ax) for ax in axes]
    geo = _window(a, sizes, kernel, ceil=bool(a.get("ceil_mode", 0)))
    plain = _window(a, sizes, kernel)
    # Padded taps count only where the model pads; ceil mode's extra windows never count them.
    include = bool(a.get("count_include_pad", 0)) and any(g[3] or g[4] for g in plain)
    if include and geo != plain:
        raise Unsupported("with ceil_mode, padding and count_include_pad over partial windows is not supported")
    k, s, d, p = _place(axes, geo)
    node = Pooling(x.image, "max" if maximum else "average", kernel=k, stride=s, padding=p, count_include_pad=include,
                   dilation=d, label=imp.label(n.name or n.op_type))
    return [channels_first(node, infer(node, [x]), axes), unused("max pooling's indices")]


def _channel_windows(imp, n, x: Act) -> Act:
    """An average over windows of k channels of a tensor lying as (N, 1, C, H, W), kernel (k, 1, 1)
    at stride 1 (PyTorch's LocalResponseNorm, its channels padded first): a 1×1 convolution by a
    fixed band of 1/k (its source frozen) to C − k + 1 channels."""
    a = imp.attrs(n)
    kernel = list(a["kernel_shape"])
    k, c = kernel[0], x.shape[0]
    plain = all(v == 1 for v in [*kernel[1:], *a.get("strides", [1]), *a.get("dilations", [1])])
    if n.op_type != "AveragePool" or len(kernel) != 3 or not plain or any(a.get("pads", [0])) or \
            a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID") or a.get("ceil_mode", 0) or k > c:
        raise Unsupported(f"over a tensor lying as {x.describe()}: only averages over windows of channels "
                          "(kernel (k, 1, 1), stride 1, unpadded)")
    i = np.arange(c - k + 1)[:, None]
    band = ((np.arange(c)[None, :] >= i) & (np.arange(c)[None, :] < i + k)) / np.float32(k)
    node = fixed_map(x.image, band, imp.source_label(n))
    return Act(node, infer(node, [x]), x.axes, x.split)


def global_pool(imp, n) -> list:
    x = imp.act(n)
    spatial = x.spatial_form(n.op_type)
    f = GlobalMaxPooling if "Max" in n.op_type else GlobalAveragePooling
    node = f(x.image, label=imp.label(n.name or n.op_type))
    return [channels_first(node, infer(node, [x]), image_axes(spatial))]


# Reductions of an elementwise form of x: (the neuron before, the reduction, the neuron after),
# each neuron (name, parameters): −x, |x|, x², √x.
_NEGATED, _SQUARED = ("linear", {"a": -1.0, "b": 0.0}), ("power", {"a": 0.0, "b": 1.0, "c": 2.0})
DERIVED_REDUCTIONS = {
    "ReduceMin": (_NEGATED, "ReduceMax", _NEGATED),
    "ReduceL1": (("absolute", {}), "ReduceSum", None),
    "ReduceSumSquare": (_SQUARED, "ReduceSum", None),
    "ReduceL2": (_SQUARED, "ReduceSum", ("power", {"a": 0.0, "b": 1.0, "c": 0.5})),
}


def reduce(imp, n) -> list:
    """ReduceMean, ReduceMax, ReduceSum, ReduceLogSumExp and ReduceMin, ReduceL1, ReduceL2,
    ReduceSumSquare (the first three of −x, |x|, x²) over the spatial axes (global pooling), over
    the channels or both, and the sum or mean over a bidirectional layer's directions."""
    x = imp.act(n)
    a = imp.attrs(n)
    axes = imp.const(n, 1, optional=True) if len(n.input) > 1 else a.get("axes")
    if axes is None:
        raise Unsupported("over every axis is not supported")
    rank = len(x.axes)
    axes = axes_in(axes, rank)
    entries = x.entries()
    keep = a.get("keepdims", 1)
    out = tuple((() if i in axes else e) for i, e in enumerate(x.axes) if keep or i not in axes)
    label = imp.label(n.name or n.op_type)
    before, op, after = DERIVED_REDUCTIONS.get(n.op_type, (None, n.op_type, None))
    if before:
        first = Neuron(x.image, before[0], label=imp.label(label + "_" + before[0]), **before[1])
        x = Act(first, x.shape, x.axes, x.split)
    if [entries[i] for i in axes] == [("D",)] and op in ("ReduceSum", "ReduceMean"):
        inner = x.shape[0] // x.split
        parts = [Crop(x.image, channels=(d * inner, inner), label=f"{label}_{d}") for d in range(x.split)]
        node = parts[0]
        for d, part in enumerate(parts[1:], 1):
            node = Addition(node, part, label=label if d == len(parts) - 1 else f"{label}_sum{d}")
        if op == "ReduceMean":
            node = Neuron(node, "linear", a=1.0 / x.split, b=0.0, label=label + "_mean")
        shape = (inner, *x.shape[1:])
    elif op == "ReduceLogSumExp":  # m + log Σ exp(x − m), m the maximum, so that no exp overflows
        top, shape = _reduced("ReduceMax", x, axes, label + "_max")
        shifted = Subtraction(x.image, top, label=label + "_shifted")
        exps = Act(Neuron(shifted, "exponential", label=label + "_exp"), x.shape, x.axes, x.split)
        total, _ = _reduced("ReduceSum", exps, axes, label + "_sum")
        node = Addition(Neuron(total, "logarithm", label=label + "_log"), top, label=label)
    else:
        node, shape = _reduced(op, x, axes, label)
    if after:
        node = Neuron(node, after[0], label=imp.label(label + "_" + after[0]), **after[1])
    return [Act(node, shape, out, x.split if shape[0] == x.shape[0] else 1)]


def _reduced(op: str, x: Act, axes: list, label: str) -> tuple:
    """(node, image shape) of ReduceMax, ReduceMean or ReduceSum over the channels, the spatial
    axes or both, each whole (neither: axes of size 1, x itself)."""
    entries = x.entries()
    atoms, channels = {a for i in axes for a in entries[i]}, set(x.channels)
    spatial = {a for e in entries for a in e} & {"H", "W"}
    if atoms - channels - spatial or atoms & channels not in (set(), channels) or \
            atoms & spatial not in (set(), spatial):
        raise Unsupported(f"over axes {axes} of a tensor lying as {x.describe()}: only the spatial axes, the "
                          "channels or the directions reduce")
    node, shape = x.image, x.shape
    if atoms & channels:
        node, shape = _over_channels(op, x, label + "_channels" if atoms & spatial else label), (1, *shape[1:])
    if atoms & spatial:
        node = (GlobalMaxPooling if op == "ReduceMax" else GlobalAveragePooling)(node, label=label)
        if op == "ReduceSum":
            node = Neuron(node, "linear", a=float(shape[1] * shape[2]), b=0.0, label=label + "_sum")
        shape = (shape[0], 1, 1)
    return node, shape


def _over_channels(op: str, x: Act, label: str):
    """The one-channel image of a reduction over the channels (CBAM's and channels-first layer
    norms' x.mean(1)). A sum or mean is a 1×1 convolution by fixed weights (1 or 1/C, its source
    frozen); a maximum copies the values into (H·W, C) order, max-pools each row of C and reads
    the result back as (1, H, W)."""
    c, h, w = x.shape
    if op == "ReduceMax":
        rows = MatrixCopyToImageNode(ImageCopyToMatrixNode(x.image, "hwc", label=label + "_hwc"), (1, h * w, c), "chw",
                                     label=label + "_rows")
        pooled = Pooling(rows, "max", kernel=(1, c), label=label + "_max")
        return MatrixCopyToImageNode(pooled, (1, h, w), "chw", label=label)
    return fixed_map(x.image, np.full((1, c), 1.0 / c if op == "ReduceMean" else 1.0), label)


# --- products ------------------------------------------------------------------------------

def gemm(imp, n) -> list:
    x, b = imp.act(n), imp.const(n, 1)
    a = imp.attrs(n)
    if (len(x.axes) != 2 and not a.get(FUSED)) or b.ndim != 2:
        raise ValueError(f"multiplies matrices; A has {len(x.axes)} dims and B {b.ndim}")
    if a.get("transA", 0):
        raise Unsupported("with transA is not supported")
    w = (b if a.get("transB", 0) else b.T) * np.float32(a.get("alpha", 1.0))
    c = imp.const(n, 2, optional=True)
    bias = None
    if c is not None:
        if c.dtype.kind != "f":
            raise ValueError(f"adds a bias of {c.dtype} to float products")
        if c.ndim > 2 or (c.ndim == 2 and c.shape[0] != 1) or c.shape[-1:] not in ((), (1,), (w.shape[0],)):
            # (M, 1) or (M, N) add a value per row of the batch
            raise Unsupported(f"with a bias of shape {list(c.shape)} (one per output expected: [{w.shape[0]}])")
        bias = np.broadcast_to(c.ravel() * np.float32(a.get("beta", 1.0)), (w.shape[0],)).astype(np.float32)
    return [_dense(imp, n, x, np.ascontiguousarray(w, np.float32), bias)]


def matmul(imp, n) -> list:
    x = imp.act(n)
    if isinstance(imp.get(n.input[1]), Act):
        return products(imp, n)
    b = imp.const(n, 1)
    if b.ndim != 2:
        raise Unsupported(f"by a {b.ndim}-D constant is not supported")
    return [_dense(imp, n, x, np.ascontiguousarray(b.T, np.float32), None)]


def _dense(imp, n, x: Act, w: np.ndarray, bias) -> Act:
    """x times wᵀ (w: outputs × inputs): a fully connected layer over each image's values, or
    a 1×1 convolution where the product runs over the channels of each position."""
    entries, label = x.entries(), imp.source_label(n)
    c, h, wd = x.shape
    out = w.shape[0]
    spatial = tuple(a for a, s in (("H", h), ("W", wd)) if s > 1)
    if len(entries) == 2 and entries[0] == ("N",) and entries[1] in (x.channels + spatial, spatial + x.channels):
        image, kernel = x.image, (h, wd)
        if entries[1] != x.channels + spatial:  # features in (H, W, C) order: copy them into that order
            image, kernel = ImageCopyToMatrixNode(x.image, "hwc", label=imp.label(label + "_hwc")), (1, 1)
        cin = x.shape[0] * (h * wd if kernel == (1, 1) else 1)
        desc = ConvolutionDescriptor(kernel, cin, out)
        ds = ArrayDataSource(desc, weights=w.reshape(out, cin, *kernel), biases=bias, label=label)
        node = FullyConnected(image, ds, label=label)
        return Act(node, (out, 1, 1), (("N",), ("D", "E")))
    if entries and entries[-1] == x.channels and x.channels:
        ds = ArrayDataSource(ConvolutionDescriptor(1, c, out), weights=w.reshape(out, c, 1, 1), biases=bias,
                             label=label)
        node = Convolution(x.image, ds, label=label)
        axes = list(x.axes)
        axes[-1] = ("D", "E")
        return Act(node, infer(node, [x]), tuple(axes))
    raise Unsupported(f"over a tensor lying as {x.describe()} is not supported")
