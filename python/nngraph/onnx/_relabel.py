"""Import handlers of operators that relabel, cut, join or pad tensors: mostly no data moves,
the Act's axes change (Transpose, Reshape, Squeeze...); windows become Crop nodes."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from nngraph._core import (
    ArrayDataSource,
    Concatenation,
    Convolution,
    ConvolutionDescriptor,
    ConvolutionTranspose,
    Crop,
    ImageCopyToMatrixNode,
    MatrixCopyToImageNode,
    Padding,
    Pooling,
    Upsampling,
)
from nngraph.onnx._layout import (
    Act,
    Moved,
    Sym,
    Unsupported,
    channels_first,
    image_axes,
    infer,
    ints,
    reshape,
    resolve_target,
)
from nngraph.onnx._symbolic import broadcast, slice_args


def identity(imp, n) -> list:
    x = imp.act(n)
    if n.op_type == "Cast" and imp.attrs(n)["to"] not in (1, 10, 11, 16):
        raise Unsupported("to a type other than float is not supported")
    return [x]


def flatten(imp, n) -> list:
    x = imp.act(n)
    axis = imp.attrs(n).get("axis", 1) % (len(x.axes) + 1)
    merge = lambda entries: tuple(a for e in entries for a in e)  # noqa: E731
    return [x.relabel([merge(x.axes[:axis]), merge(x.axes[axis:])])]


def reshape_op(imp, n) -> list:
    x, target = imp.get(n.input[0]), imp.get(n.input[1])
    if not isinstance(target, np.ndarray):
        raise Unsupported("to a computed shape is not supported")
    if isinstance(x, Moved):
        dims = resolve_target([x.source.dims()[0], *x.index.shape], ints(target), imp.attrs(n).get("allowzero", 0),
                              imp.batch)
        if not isinstance(dims[0], Sym):
            raise Unsupported(x.why)
        return [_settled(imp, n, Moved(x.source, x.index.reshape([int(d) for d in dims[1:]]), x.why))]
    x = imp.act(n)
    dims = resolve_target(x.dims(), ints(target), imp.attrs(n).get("allowzero", 0), imp.batch)
    try:
        return [reshape(x, dims)]
    except ValueError as e:
        try:
            return [_copied(imp, n, x, dims, str(e))]
        except Unsupported:
            if not isinstance(dims[0], Sym) or x.split != 1 or len(x.entries()) != 4:
                raise
            x.spatial_form("Reshape")
            why = f"reads values that [{n.name or n.output[0]}] Reshape moves where no image holds them ({e})"
            return [Moved(x, np.arange(int(np.prod(x.shape))).reshape([int(d) for d in dims[1:]]), why)]


def _settled(imp, n, m: Moved):
    """A Moved tensor that reads as an image a convolution of kernel and stride k by one-hot weights
    makes (its source frozen; in as many groups as the moves keep apart): each output pixel
    (c′, y, x) reads (c, y·k + i, x·k + j) with c, i, j fixed by c′ (space-to-depth; k = 1:
    channels permuted), or (c, y//k, x//k) with c fixed by (c′, y mod k, x mod k) (depth-to-space,
    a transposed convolution). Otherwise m as it is."""
    if m.index.ndim != 3:
        return m
    (c, h, w), (oc, oh, ow) = m.source.shape, m.index.shape
    src_c, rest = np.divmod(m.index, h * w)
    src_y, src_x = np.divmod(rest, w)
    ys, xs = np.arange(oh)[None, :, None], np.arange(ow)[None, None, :]
    label = imp.label(n.name or n.op_type)
    if h % oh == 0 and w % ow == 0 and h // oh == w // ow:
        k = h // oh
        i, j = src_y - ys * k, src_x - xs * k
        if all((v == v[:, :1, :1]).all() for v in (src_c, i, j)) and i.min() >= 0 and i.max() < k and \
                j.min() >= 0 and j.max() < k:
            outs, ins = np.arange(oc), src_c[:, 0, 0]
            g = _groups(ins, outs, c, oc)
            wt = np.zeros((oc, c // g, k, k), np.float32)
            wt[outs, ins % (c // g), i[:, 0, 0], j[:, 0, 0]] = 1
            ds = ArrayDataSource(ConvolutionDescriptor(k, c, oc, stride=k, groups=g), weights=wt, biases=None,
                                 label=label, frozen=["weights"])
            return channels_first(Convolution(m.source.image, ds, label=label), (oc, oh, ow), ["H", "W"])
    elif oh % h == 0 and ow % w == 0 and oh // h == ow // w:
        k = oh // h
        blocks = src_c.reshape(oc, h, k, w, k)
        if (src_y == ys // k).all() and (src_x == xs // k).all() and (blocks == blocks[:, :1, :, :1, :]).all():
            outs, ti, tj = (a.ravel() for a in np.indices((oc, k, k)))
            ins = blocks[:, 0, :, 0, :].ravel()
            g = _groups(ins, outs, c, oc)
            wt = np.zeros((c, oc // g, k, k), np.float32)
            wt[ins, outs % (oc // g), ti, tj] = 1
            desc = ConvolutionDescriptor(k, c, oc, stride=k, groups=g, transposed=True)
            ds = ArrayDataSource(desc, weights=wt, biases=None, label=label, frozen=["weights"])
            return channels_first(ConvolutionTranspose(m.source.image, ds, label=label), (oc, oh, ow), ["H", "W"])
    return m


def depth_space(imp, n) -> list:
    """DepthToSpace (DCR or CRD) and SpaceToDepth by blocks of r × r: the moves the specification
    writes as reshapes and a transpose, applied to the image's value indices, then settled as one
    strided convolution by one-hot weights (PyTorch's PixelShuffle, CRD, in one group a channel)."""
    x = imp.act(n)
    x.spatial_form(n.op_type, 4)
    r, (c, h, w) = imp.attrs(n)["blocksize"], x.shape
    index = np.arange(c * h * w).reshape(c, h, w)
    if n.op_type == "SpaceToDepth":
        if h % r or w % r:
            raise Unsupported(f"by {r} of an image of {h} × {w} is not supported (the block must divide it)")
        index = index.reshape(c, h // r, r, w // r, r).transpose(2, 4, 0, 1, 3).reshape(c * r * r, h // r, w // r)
    else:
        if c % (r * r):
            raise Unsupported(f"by {r} of {c} channels is not supported (r² must divide them)")
        if imp.attrs(n).get("mode", "DCR") == "CRD":
            index = index.reshape(c // (r * r), r, r, h, w).transpose(0, 3, 1, 4, 2)
        else:
            index = index.reshape(r, r, c // (r * r), h, w).transpose(2, 3, 0, 4, 1)
        index = index.reshape(c // (r * r), h * r, w * r)
    return [_settled(imp, n, Moved(x, index, ""))]


def _groups(ins: np.ndarray, outs: np.ndarray, c: int, oc: int) -> int:
    """The most groups (dividing c and oc) that keep every (input, output) channel pair in one."""
    return max(g for g in range(1, min(c, oc) + 1) if c % g == 0 and oc % g == 0 and
               (ins // (c // g) == outs // (oc // g)).all())


def _copied(imp, n, x: Act, dims: list, why: str) -> Act:
    """A Reshape that moves values: each image's values in the ONNX order (as they lie, or
    copied from (H, W, C) order), read back as (C, H, W) or (C, 1, L) images."""
    flat = x.flat()
    order = tuple(flat[1:])
    spatial = tuple(a for a in ("H", "W") if a in order)
    batch_first = isinstance(dims[0], Sym) or dims[0] == imp.batch
    if flat[:1] != ["N"] or not batch_first or len(dims) not in (3, 4) or order not in (x.channels + spatial,
                                                                                        spatial + x.channels):
        raise Unsupported(why)
    label = imp.label(n.name or "reshape")
    row = x.image if order == x.channels + spatial else ImageCopyToMatrixNode(x.image, "hwc", label=label + "_hwc")
    shape = tuple(int(d) for d in dims[1:]) if len(dims) == 4 else (int(dims[1]), 1, int(dims[2]))
    node = MatrixCopyToImageNode(row, shape, "chw", label=label)
    return channels_first(node, shape, ["H", "W"] if len(dims) == 4 else ["W"])


def transpose(imp, n) -> list:
    x = imp.get(n.input[0])
    if isinstance(x, Moved):
        perm = imp.attrs(n).get("perm", list(range(x.index.ndim, -1, -1)))
        if perm[0] != 0:
            raise Unsupported(x.why)
        return [_settled(imp, n, Moved(x.source, x.index.transpose([p - 1 for p in perm[1:]]), x.why))]
    x = imp.act(n)
    perm = imp.attrs(n).get("perm", list(range(len(x.axes) - 1, -1, -1)))
    return [x.relabel([x.axes[p] for p in perm])]


def expand(imp, n) -> list:
    """Expand of a computed tensor: none where it keeps the dims; (N, 1, H, W) or (N, 1) over C
    channels (F.normalize's norm) as a 1×1 convolution by fixed ones (its source frozen);
    (N, C, 1, 1) over H × W (a squeeze-and-excitation block's `y.expand_as(x)`) as nearest upsampling."""
    x, target = imp.act(n), imp.get(n.input[1])
    if not isinstance(target, np.ndarray):
        raise Unsupported("to a computed shape is not supported")
    dims = list(broadcast(x.dims(), ints(target).ravel(), imp.batch))
    have = x.dims()
    if dims == have:
        return [x]
    label = imp.label(n.name or "expand")
    if len(dims) == len(have) == 2 and x.shape == (1, 1, 1):
        out = channels_first(_ones(x.image, int(dims[1]), label), (int(dims[1]), 1, 1), [])
        out.repeats = x
        return [out]
    spatial = x.spatial_form("Expand") if len(dims) == len(have) == 4 else None
    channels, area = dims[1] != have[1], dims[2:] != have[2:]
    if spatial is None or (area and x.shape[1:] != (1, 1)):
        raise Unsupported(f"of a tensor lying as {x.describe()} to {dims}: only the channels of (N, 1, H, W) and the "
                          "spatial axes of (N, C, 1, 1) grow")
    node, c = x.image, int(dims[1])
    if channels:
        node = _ones(node, c, label + "_channels" if area else label)
    if area:
        node = Upsampling(node, (int(dims[2]), int(dims[3])), mode="nearest", label=label)
    return [channels_first(node, (c, int(dims[2]), int(dims[3])), ["H", "W"])]


def _ones(image, c: int, label: str):
    """A one-channel image repeated over c channels: a 1×1 convolution by ones, its source frozen."""
    ds = ArrayDataSource(ConvolutionDescriptor(1, 1, c), weights=np.ones((c, 1, 1, 1), np.float32), biases=None,
                         label=label, frozen=["weights"])
    return Convolution(image, ds, label=label)


def _axes_arg(imp, n, rank: int):
    a = imp.const(n, 1, optional=True) if len(n.input) > 1 else imp.attrs(n).get("axes")
    return None if a is None else sorted({int(v) % rank for v in np.asarray(a).ravel()})


def squeeze(imp, n) -> list:
    x = imp.act(n)
    axes = _axes_arg(imp, n, len(x.axes))
    dims = x.dims()
    if axes is None:
        axes = [i for i, d in enumerate(dims) if not x.norm(x.axes[i])]
    if any(x.norm(x.axes[i]) for i in axes):
        raise ValueError(f"squeezes axes {axes} of {x.describe()}, not all of size 1")
    return [x.relabel([e for i, e in enumerate(x.axes) if i not in axes])]


def unsqueeze(imp, n) -> list:
    x = imp.act(n)
    raw = imp.const(n, 1, optional=True) if len(n.input) > 1 else imp.attrs(n)["axes"]
    rank = len(x.axes) + np.asarray(raw).size
    axes = sorted(int(v) % rank for v in np.asarray(raw).ravel())
    out = list(x.axes)
    for a in axes:
        out.insert(a, ())
    return [x.relabel(out)]


def shape(imp, n) -> list:
    x = imp.act(n)
    a = imp.attrs(n)
    dims = x.dims()
    return [ints(dims[a.get("start", 0):a.get("end", len(dims))] if "end" in a else dims[a.get("start", 0):])]


def _crop(imp, n, x: Act, ranges: dict) -> Act:
    """The Act cut to [start, end) along single-atom axes: {axis: (start, end)}."""
    c, h, w = x.shape
    y0, x0, hh, ww, c0, cc, split = 0, 0, h, w, 0, c, x.split
    for axis, (start, end) in ranges.items():
        e = x.norm(x.axes[axis])
        if len(e) != 1 or e[0] == "N":
            raise Unsupported(f"along axis {axis} of a tensor lying as {x.describe()} is not supported")
        atom = e[0]
        if atom == "H":
            y0, hh = start, end - start
        elif atom == "W":
            x0, ww = start, end - start
        elif atom == "D":
            inner = c // x.split
            c0, cc, split = start * inner, (end - start) * inner, end - start
        elif x.split == 1:
            c0, cc = start, end - start
        else:
            raise Unsupported("of part of each direction's channels is not supported")
    node = Crop(x.image, window=(y0, x0, hh, ww), channels=(c0, cc), label=imp.label(n.name or n.op_type))
    return Act(node, infer(node, [x]), x.axes, split)


def gather(imp, n) -> list:
    x, idx = imp.act(n), imp.const(n, 1)
    axis = imp.attrs(n).get("axis", 0) % len(x.axes)
    size = x.dims()[axis]
    v = [int(i) % size for i in idx.ravel()]
    if not v or v != list(range(v[0], v[0] + len(v))):
        raise Unsupported("of indices that are not consecutive is not supported")
    out = x if len(v) == size else _crop(imp, n, x, {axis: (v[0], v[0] + len(v))})  # the whole axis: no cut
    axes = list(out.axes)
    if idx.ndim == 0:
        del axes[axis]
    return [out.relabel(axes)]


def slice_op(imp, n) -> list:
    x = imp.act(n)
    dims = x.dims()
    values = [imp.get(name) for name in n.input]
    ranges, steps, picks = {}, {}, {}
    for axis, start, end, step in slice_args(values, len(dims), imp.attrs(n)):
        if x.norm(x.axes[axis]) == ("N",):
            if start == 0 and end >= 2**31 - 1 and step == 1:
                continue
            raise Unsupported("of the batch axis is not supported")
        if step == 0:
            raise Unsupported("with a step of 0 is not valid")
        r = range(*slice(start, end, step).indices(dims[axis]))
        if step < 0:  # backwards (a flip): the pixels picked, as a matrix along that axis
            if x.norm(x.axes[axis]) not in (("H",), ("W",)) or not len(r):
                raise Unsupported(f"with a negative step along axis {axis} of a tensor lying as {x.describe()}: "
                                  "only the spatial axes run backwards")
            picks[x.norm(x.axes[axis])[0]] = np.eye(dims[axis], dtype=np.float32)[list(r)]
            continue
        if step > 1 and len(r) > 1:
            if x.norm(x.axes[axis]) not in (("H",), ("W",)):
                raise Unsupported(f"with a step along axis {axis} of a tensor lying as {x.describe()}: "
                                  "only the spatial axes take steps")
            steps[x.norm(x.axes[axis])[0]] = step
        if len(r) < dims[axis]:
            ranges[axis] = (r.start, r.start + (len(r) - 1) * step + 1)
    out = _crop(imp, n, x, ranges) if ranges else x
    if steps:  # every step-th row and column: a one-tap max pooling of that stride
        stride = (steps.get("H", 1), steps.get("W", 1))
        node = Pooling(out.image, "max", kernel=1, stride=stride, label=imp.label((n.name or "slice") + "_steps"))
        out = Act(node, infer(node, [out]), out.axes, out.split)
    for atom, matrix in picks.items():
        image, shape = _along(imp, n, out.image, out.shape, atom, matrix)
        out = Act(image, shape, out.axes, out.split)
    return [out]


def _shrink(imp, n, x: Act, spatial: list, ks: list, scale32: list, a: dict) -> Act:
    """A Resize by 1/k (k an integer dividing the axis) as a crop to the first pixel read and a
    one- or two-tap average pooling at stride k. Linear reads i·k + (k − 1)/2 (half pixel; i·k
    asymmetric): that pixel, or for even k the two about it. Nearest's picks are onnxruntime's
    (_nearest_matrix); where they do not step by k, Unsupported (the caller maps the axes instead)."""
    mode = a.get("mode", "nearest")
    coords = a.get("coordinate_transformation_mode", "half_pixel")
    if coords not in ("asymmetric", "half_pixel", "pytorch_half_pixel") or mode not in ("nearest", "linear") or \
            a.get("antialias", 0):
        raise Unsupported(f"down by {ks} in mode '{mode}' with coordinate_transformation_mode '{coords}'")
    ranges, kernel, stride = {}, [1, 1], [1, 1]
    for i, (atom, k, scale) in enumerate(zip(image_axes(spatial), ks, scale32)):
        size = x.dims()[2 + i]
        if coords == "pytorch_half_pixel" and size == k:  # one output pixel: it reads pixel 0
            first, taps = 0, 1
        elif mode == "nearest":
            picks = _nearest_matrix(size, size // k, scale, coords, a.get("nearest_mode", "round_prefer_floor"))
            picks = picks.argmax(1)
            first, taps = int(picks[0]), 1
            if (picks != first + k * np.arange(len(picks))).any():
                raise Unsupported(f"down by {k} picks pixels that are not k apart")
        else:
            centre = 0.0 if coords == "asymmetric" else (k - 1) / 2
            first, taps = int(centre // 1), 1 if centre == int(centre) else 2
        j = 0 if atom == "H" else 1
        kernel[j], stride[j] = taps, k
        if first:
            ranges[2 + i] = (first, size)
    cut = _crop(imp, n, x, ranges) if ranges else x
    node = Pooling(cut.image, "average", kernel=tuple(kernel), stride=tuple(stride),
                   label=imp.label(n.name or "resize"))
    return channels_first(node, infer(node, [cut]), image_axes(spatial))


def split(imp, n) -> list:
    x = imp.act(n)
    a = imp.attrs(n)
    axis = a.get("axis", 0) % len(x.axes)
    size = x.dims()[axis]
    parts = imp.const(n, 1, optional=True) if len(n.input) > 1 else a.get("split")
    if parts is None:
        count = a.get("num_outputs", len(n.output))
        step = -(-size // count)
        parts = [min(step, size - i * step) for i in range(count)]
    out, start = [], 0
    for p in np.asarray(parts).ravel():
        out.append(_crop(imp, n, x, {axis: (start, start + int(p))}))
        start += int(p)
    return out


def concat(imp, n) -> list:
    xs = [imp.get(name) for name in n.input]
    if not all(isinstance(x, Act) for x in xs):
        raise Unsupported("of computed tensors and constants is not supported")
    axis = imp.attrs(n)["axis"] % len(xs[0].axes)
    first = xs[0].entries()
    for x in xs:
        e = x.entries()
        if len(e) != len(first) or e[axis] != x.channels or x.split != 1 or \
                any(p != q for i, (p, q) in enumerate(zip(e, first)) if i != axis):
            raise Unsupported(f"along axis {axis} of tensors lying as {', '.join(x.describe() for x in xs)}: "
                              "only along the channels")
    node = Concatenation([x.image for x in xs], label=imp.label(n.name or "concat"))
    axes = list(xs[0].axes)
    axes[axis] = ("D", "E")
    return [Act(node, infer(node, xs), tuple(axes))]


def pad(imp, n) -> list:
    x = imp.act(n)
    along = x.channels_along()  # (N, 1, C, H, W): axis 2's pads are the channels'
    spatial = [e[0] if e else None for e in x.entries()[3:]] if along else x.spatial_form("Pad")
    a = imp.attrs(n)
    rank = len(x.axes)
    pads = imp.const(n, 1) if len(n.input) > 1 else np.asarray(a["pads"])
    pads = [int(v) for v in np.asarray(pads).ravel()]
    value = float(imp.const(n, 2)) if len(n.input) > 2 and n.input[2] else a.get("value", 0.0)
    axes = list(range(rank))
    if len(n.input) > 3 and n.input[3]:
        axes = [int(v) % rank for v in imp.const(n, 3).ravel()]
    full = [0] * (2 * rank)
    for i, axis in enumerate(axes):
        full[axis], full[axis + rank] = pads[i], pads[i + len(axes)]
    if full[0] or full[rank]:
        raise Unsupported("along the batch axis is not supported")
    if along and (full[1] or full[1 + rank]):
        raise Unsupported(f"along axis 1 of a tensor lying as {x.describe()} is not supported")
    c = 2 if along else 1
    amounts = [0, 0, 0, 0]
    for i, atom in enumerate(image_axes(spatial)):
        j = 0 if atom == "H" else 2
        amounts[j], amounts[j + 1] = full[c + 1 + i], full[c + 1 + i + rank]
    mode = a.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise Unsupported(f"mode '{mode}' is not supported")
    node = Padding(x.image, tuple(amounts), mode=mode if mode != "constant" else "constant", value=value,
                   channels=(full[c], full[c + rank]), label=imp.label(n.name or "pad"))
    if along:
        return [Act(node, infer(node, [x]), x.axes, x.split)]
    return [channels_first(node, infer(node, [x]), image_axes(spatial))]


def resize(imp, n) -> list:
    x = imp.act(n)
    spatial = x.spatial_form(n.op_type)
    a = imp.attrs(n)
    rank = len(x.axes)
    dims = x.dims()
    if n.op_type == "Upsample" or imp.opset < 11:
        scales, sizes = imp.const(n, 1), None
    else:
        scales = imp.const(n, 2, optional=True) if len(n.input) > 2 and n.input[2] else None
        sizes = imp.get(n.input[3]) if len(n.input) > 3 and n.input[3] else None
    factors = [1.0] * rank
    axes = [int(v) % rank for v in a.get("axes", range(rank))]
    if scales is not None and scales.size:
        for i, s in zip(axes, scales.ravel()):
            factors[i] = float(s)
    elif sizes is not None:
        for i, s in zip(axes, list(np.asarray(sizes).ravel())):
            factors[i] = float(s) / dims[i] if i >= 2 else (1.0 if i == 0 else float(s) / dims[i])
    else:
        raise Unsupported("needs scales or sizes")
    given_scales = scales is not None and scales.size > 0
    # Each axis's output length as onnxruntime reckons it (size·scale in float32, floored), and
    # the float32 scale its coordinates divide by.
    lengths, scale32 = [None, None], [None, None]
    for d, f in zip(dims[2:], factors[2:]):
        lengths.append(int(np.floor(np.float32(d) * np.float32(f))) if given_scales else int(round(f * d)))
        scale32.append(np.float32(f) if given_scales else np.float32(lengths[-1]) / np.float32(d))
    try:
        return [_by_factors(imp, n, x, spatial, factors, scale32)]
    except Unsupported:
        if n.op_type != "Resize" or imp.opset < 11 or factors[:2] != [1.0, 1.0]:
            raise
    # Any other Resize, axis by axis as a matrix: nearest's picks as onnxruntime makes them, the
    # other modes' weights from ONNX's reference run on unit vectors.
    coords = a.get("coordinate_transformation_mode", "half_pixel")
    if coords == "tf_crop_and_resize" or a.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise Unsupported("with tf_crop_and_resize or a kept aspect ratio is not supported")
    image, shape = x.image, x.shape
    for i, atom in enumerate(image_axes(spatial), 2):
        if factors[i] == 1:
            continue
        size, length = dims[i], lengths[i]
        if coords == "pytorch_half_pixel" and length == 1:  # reads pixel 0, whatever the mode
            matrix = np.eye(1, size, dtype=np.float32)
        elif a.get("mode", "nearest") == "nearest":
            matrix = _nearest_matrix(size, length, scale32[i], coords, a.get("nearest_mode", "round_prefer_floor"))
        else:  # the reference takes a scale where the coordinates read it, else the length
            by_scale = given_scales and coords != "align_corners" and length == int(np.floor(size * factors[i]))
            given = ("scales", np.array([1, 1, factors[i], 1], np.float32)) if by_scale \
                else ("sizes", np.array([1, size, length, 1], np.int64))
            matrix = _resize_matrix(imp, n, size, given)
        image, shape = _along(imp, n, image, shape, atom, matrix)
    return [channels_first(image, shape, image_axes(spatial))]


def _nearest_matrix(size: int, length: int, scale: np.float32, coords: str, rounding: str) -> np.ndarray:
    """Nearest Resize along one axis as a (length × size) matrix of ones, its coordinates taken in
    float32 as onnxruntime takes them: a coordinate that is a whole or half number only up to
    rounding (7 → 1 at half pixel reads 2.9999998) falls the way it falls there."""
    i = np.arange(length, dtype=np.float32)
    half = np.float32(0.5)
    if coords == "asymmetric":
        x = i / scale
    elif coords == "align_corners":
        x = i * np.float32(size - 1) / np.float32(max(length - 1, 1))
    elif coords == "tf_half_pixel_for_nn":
        x = (i + half) / scale
    else:  # half_pixel, pytorch_half_pixel (a length of 1 is handled before)
        x = (i + half) / scale - half
    if rounding == "floor":
        k = np.floor(x)
    elif rounding == "ceil":
        k = np.ceil(x)
    elif rounding == "round_prefer_ceil":
        k = np.floor(x + half)
    else:  # round_prefer_floor
        k = np.ceil(x - half)
    matrix = np.zeros((length, size), np.float32)
    matrix[np.arange(length), np.clip(k, 0, size - 1).astype(np.int64)] = 1
    return matrix


def _resize_matrix(imp, n, size: int, given: tuple) -> np.ndarray:
    """The (out × size) matrix of the node's Resize along one axis of `size` pixels, from ONNX's
    reference implementation run on unit vectors; `given` is ("scales" | "sizes", that input)."""
    attrs = {k: v for k, v in imp.attrs(n).items() if k not in ("axes", "keep_aspect_ratio_policy")}
    inputs = ["x", "", "scales"] if given[0] == "scales" else ["x", "", "", "sizes"]
    node = helper.make_node("Resize", inputs, ["y"], **attrs)
    graph = helper.make_graph([node], "axis", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(given[1], given[0])])
    model = helper.make_model(graph, opset_imports=imp.model.opset_import)
    units = np.eye(size, dtype=np.float32).reshape(1, size, size, 1)
    out = ReferenceEvaluator(model).run(None, {"x": units})[0]
    return np.ascontiguousarray(out[0, :, :, 0].T)


def _along(imp, n, image, shape: tuple, atom: str, matrix: np.ndarray) -> tuple:
    """A fixed (out × in) map along the H or W axis of an image of `shape`: the axis copied into
    the channels, a 1×1 convolution by the matrix (its source frozen), copied back. Returns the
    new image and its shape."""
    c, h, w = shape
    out = matrix.shape[0]
    label = imp.label(f"{n.name or n.op_type}_{atom}")
    ds = ArrayDataSource(ConvolutionDescriptor(1, matrix.shape[1], out), weights=matrix[:, :, None, None],
                         biases=None, label=label, frozen=["weights"])
    if atom == "H":  # (c, h, w) → (h, 1, w·c) → map → (out, w, c) read as (c, out, w)
        rows = MatrixCopyToImageNode(ImageCopyToMatrixNode(image, "hwc", label=label + "_hwc"), (h, 1, w * c), "chw",
                                     label=label + "_rows")
        mapped = Convolution(rows, ds, label=label)
        return MatrixCopyToImageNode(mapped, (c, out, w), "hwc", label=label + "_back"), (c, out, w)
    flat = MatrixCopyToImageNode(image, (c * h, 1, w), "chw", label=label + "_flat")
    columns = MatrixCopyToImageNode(ImageCopyToMatrixNode(flat, "hwc", label=label + "_hwc"), (w, 1, c * h), "chw",
                                    label=label + "_columns")
    mapped = Convolution(columns, ds, label=label)
    back = MatrixCopyToImageNode(mapped, (c * h, 1, out), "hwc", label=label + "_back")
    return MatrixCopyToImageNode(back, (c, h, out), "chw", label=label + "_image"), (c, h, out)


def _by_factors(imp, n, x: Act, spatial: list, factors: list, scale32: list) -> Act:
    """Resize and Upsample by integer factors (Upsampling) or their inverses (_shrink)."""
    a, dims = imp.attrs(n), x.dims()
    mode = a.get("mode", "nearest")
    coords = a.get("coordinate_transformation_mode", "half_pixel" if n.op_type == "Resize" else "asymmetric")
    nearest = a.get("nearest_mode", "round_prefer_floor")
    shrink = [round(1 / f) if 0 < f < 1 else 1 for f in factors]
    if factors[:2] == [1, 1] and all(f <= 1 for f in factors[2:]) and \
            all(abs(f * k - 1) < 1e-6 and d % k == 0 for f, k, d in zip(factors[2:], shrink[2:], dims[2:])):
        return _shrink(imp, n, x, spatial, shrink[2:], scale32[2:], a)
    if factors[0] != 1 or factors[1] != 1 or any(f < 1 or f != int(f) for f in factors[2:]):
        raise Unsupported(f"by {factors}: only integer factors of the spatial axes (or their inverses) are "
                          "supported")
    scale = [1, 1]
    for atom, f in zip(image_axes(spatial), factors[2:]):
        scale[0 if atom == "H" else 1] = int(f)
    if mode == "nearest":
        ok = (coords == "asymmetric" and (nearest == "floor" or n.op_type == "Upsample")) or \
             (coords in ("half_pixel", "pytorch_half_pixel") and nearest in ("round_prefer_floor", "round_prefer_ceil"))
        if not ok:
            raise Unsupported(f"nearest with coordinate_transformation_mode '{coords}' and nearest_mode '{nearest}' "
                              "is not supported")
        node = Upsampling(x.image, tuple(scale), mode="nearest", label=imp.label(n.name or "resize"))
    elif mode == "linear" and coords in ("half_pixel", "pytorch_half_pixel", "align_corners"):
        node = Upsampling(x.image, tuple(scale), mode="bilinear", align_corners=coords == "align_corners",
                          label=imp.label(n.name or "resize"))
    else:
        raise Unsupported(f"mode '{mode}' with coordinate_transformation_mode '{coords}' is not supported")
    return channels_first(node, infer(node, [x]), image_axes(spatial))
