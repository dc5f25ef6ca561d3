"""Import handlers of operators that relabel, cut, join or pad tensors: mostly no data moves,
the Act's axes change (Transpose, Reshape, Squeeze...); windows become Crop nodes. Values moved
within images are followed in _moves; Slice and Resize live in _resample."""

from __future__ import annotations

import numpy as np

from nngraph._core import (
    Addition,
    Concatenation,
    ImageCopyToMatrixNode,
    MatrixCopyToImageNode,
    Padding,
    Upsampling,
)
from nngraph.onnx import _stacked as stacked
from nngraph.onnx._layout import (
    POSITIONS,
    Act,
    Moved,
    Stacked,
    Sym,
    Unsupported,
    axes_in,
    channels_first,
    fixed_map,
    image_axes,
    in_range,
    infer,
    ints,
    perm_of,
    reshape,
    resolve_target,
)
from nngraph.onnx._moves import settled
from nngraph.onnx._resample import crop
from nngraph.onnx._symbolic import broadcast


def identity(imp, n) -> list:
    x = imp.act(n)
    if n.op_type == "Cast" and imp.attrs(n)["to"] not in (1, 10, 11, 16):
        raise Unsupported("to a type other than float is not supported")
    return [x]


def flatten(imp, n) -> list:
    x = imp.act(n)
    rank, axis = len(x.axes), imp.attrs(n).get("axis", 1)
    if not -rank <= axis <= rank:
        raise ValueError(f"axis {axis} is outside [{-rank}, {rank}]")
    axis += rank if axis < 0 else 0
    merge = lambda entries: tuple(a for e in entries for a in e)  # noqa: E731
    return [x.relabel([merge(x.axes[:axis]), merge(x.axes[axis:])])]


def reshape_op(imp, n) -> list:
    x, target = imp.get(n.input[0]), imp.get(n.input[1])
    if not isinstance(target, np.ndarray):
        raise Unsupported("to a computed shape is not supported")
    if target.dtype.kind == "f":
        raise ValueError(f"to a shape of {target.dtype} values (int64 expected)")
    if isinstance(x, Moved):
        dims = resolve_target([x.source.dims()[0], *x.index.shape], ints(target), imp.attrs(n).get("allowzero", 0),
                              imp.batch)
        if not isinstance(dims[0], Sym):
            raise Unsupported(x.why)
        return [settled(imp, n, Moved(x.source, x.index.reshape([int(d) for d in dims[1:]]), x.why))]
    x = imp.act(n)
    dims = resolve_target(x.dims(), ints(target), imp.attrs(n).get("allowzero", 0), imp.batch)
    try:
        out = reshape(x, dims)
        e = out.entries()
        if len(e) == 4 and e[0] == ("N",) and e[1] == out.channels and (e[2] not in (("H",), ()) or
                                                                      e[3] not in (("W",), ())):
            # (N, C, h, w) whose pixels lie otherwise than as H and W (a (C, 4, 4) image read as
            # (C, 1, 16)): copied where it can be, so that the operators reading images read it.
            try:
                return [_copied(imp, n, x, dims, "")]
            except Unsupported:
                pass
        return [out]
    except ValueError as e:
        try:
            return [_copied(imp, n, x, dims, str(e))]
        except Unsupported:
            if not isinstance(dims[0], Sym) or x.split != 1 or len(x.entries()) != 4:
                return [stacked.stack(imp, n, x, dims, str(e))]
            x.spatial_form("Reshape")
            why = f"reads values that [{n.name or n.output[0]}] Reshape moves where no image holds them ({e})"
            return [Moved(x, np.arange(int(np.prod(x.shape))).reshape([int(d) for d in dims[1:]]), why)]


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
        perm = perm_of(imp.attrs(n), x.index.ndim + 1)
        if perm[0] != 0:
            raise Unsupported(x.why)
        return [settled(imp, n, Moved(x.source, x.index.transpose([p - 1 for p in perm[1:]]), x.why))]
    if isinstance(x, Stacked):
        return [stacked.transpose(x, perm_of(imp.attrs(n), len(x.parts[0].axes) + 1))]
    x = imp.act(n)
    return [x.relabel([x.axes[p] for p in perm_of(imp.attrs(n), len(x.axes))])]


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
        out = channels_first(fixed_map(x.image, np.ones((int(dims[1]), 1)), label), (int(dims[1]), 1, 1), [])
        out.repeats = x
        return [out]
    spatial = x.spatial_form("Expand") if len(dims) == len(have) == 4 else None
    channels, area = dims[1] != have[1], dims[2:] != have[2:]
    if spatial is None or (area and x.shape[1:] != (1, 1)):
        raise Unsupported(f"of a tensor lying as {x.describe()} to {dims}: only the channels of (N, 1, H, W) and the "
                          "spatial axes of (N, C, 1, 1) grow")
    node, c = x.image, int(dims[1])
    if channels:
        node = fixed_map(node, np.ones((c, 1)), label + "_channels" if area else label)
    if area:
        node = Upsampling(node, (int(dims[2]), int(dims[3])), mode="nearest", label=label)
    return [channels_first(node, (c, int(dims[2]), int(dims[3])), ["H", "W"])]


def _axes_arg(imp, n, rank: int):
    a = imp.const(n, 1, optional=True) if len(n.input) > 1 else imp.attrs(n).get("axes")
    return None if a is None else axes_in(a, rank)


def squeeze(imp, n) -> list:
    x = imp.get(n.input[0])
    if isinstance(x, Stacked):
        axes = _axes_arg(imp, n, len(x.parts[0].axes) + 1)
        if axes is None:
            raise Unsupported("without axes of a tensor whose channels a Reshape split three ways is not supported")
        return [stacked.reindexed(x, axes, [])]
    x = imp.act(n)
    axes = _axes_arg(imp, n, len(x.axes))
    dims = x.dims()
    if axes is None:
        axes = [i for i, d in enumerate(dims) if not x.norm(x.axes[i])]
    if any(x.norm(x.axes[i]) for i in axes):
        raise ValueError(f"squeezes axes {axes} of {x.describe()}, not all of size 1")
    return [x.relabel([e for i, e in enumerate(x.axes) if i not in axes])]


def unsqueeze(imp, n) -> list:
    x = imp.get(n.input[0])
    raw = imp.const(n, 1, optional=True) if len(n.input) > 1 else imp.attrs(n)["axes"]
    rank = (len(x.parts[0].axes) + 1 if isinstance(x, Stacked) else len(imp.act(n).axes)) + np.asarray(raw).size
    axes = axes_in(raw, rank)
    if isinstance(x, Stacked):
        return [stacked.reindexed(x, [], axes)]
    out = list(x.axes)
    for a in axes:
        out.insert(a, ())
    return [x.relabel(out)]


def shape(imp, n) -> list:
    x = imp.act(n)
    a = imp.attrs(n)
    dims = x.dims()
    return [ints(dims[a.get("start", 0):a.get("end", len(dims))] if "end" in a else dims[a.get("start", 0):])]


def gather(imp, n) -> list:
    x, idx = imp.get(n.input[0]), imp.const(n, 1)
    if isinstance(x, Stacked):
        count = len(x.parts)
        axis = in_range(imp.attrs(n).get("axis", 0), len(x.parts[0].axes) + 1)
        return [stacked.pick(x, axis, [in_range(i, count, "index") for i in idx.ravel()], idx.ndim == 1)]
    x = imp.act(n)
    axis = in_range(imp.attrs(n).get("axis", 0), len(x.axes))
    size = x.dims()[axis]
    v = [in_range(i, size, "index") for i in idx.ravel()]
    if not v or v != list(range(v[0], v[0] + len(v))):
        raise Unsupported("of indices that are not consecutive is not supported")
    out = x if len(v) == size else crop(imp, n, x, {axis: (v[0], v[0] + len(v))})  # the whole axis: no cut
    axes = list(out.axes)
    if idx.ndim == 0:
        del axes[axis]
    return [out.relabel(axes)]


def split(imp, n) -> list:
    x = imp.get(n.input[0])
    a = imp.attrs(n)
    if isinstance(x, Stacked):
        axis, size = in_range(a.get("axis", 0), len(x.parts[0].axes) + 1), len(x.parts)
    else:
        x = imp.act(n)
        axis = in_range(a.get("axis", 0), len(x.axes))
        size = x.dims()[axis]
    parts = imp.const(n, 1, optional=True) if len(n.input) > 1 else a.get("split")
    if parts is not None and np.asarray(parts).ndim != 1:
        raise ValueError(f"split of shape {list(np.asarray(parts).shape)}, not a vector")
    if parts is None:
        if imp.opset >= 18 and "num_outputs" not in a:
            raise ValueError("takes a split input or num_outputs from opset 18")
        count = a.get("num_outputs", len(n.output))
        step = -(-size // count)
        parts = [min(step, size - i * step) for i in range(count)]
    parts = [int(p) for p in np.asarray(parts).ravel()]
    if isinstance(size, (int, np.integer)) and (min(parts, default=0) < 0 or sum(parts) != size):
        raise ValueError(f"split {parts} does not add up to the axis's {size}")
    out, start = [], 0
    for p in parts:
        span = (start, start + p)
        out.append(stacked.pick(x, axis, list(range(*span)), True) if isinstance(x, Stacked) else
                   crop(imp, n, x, {axis: span}))
        start += p
    return out


def concat(imp, n) -> list:
    xs = [imp.get(name) for name in n.input]
    if not all(isinstance(x, Act) for x in xs):
        raise Unsupported("of computed tensors and constants is not supported")
    axis = in_range(imp.attrs(n)["axis"], len(xs[0].axes))
    first = xs[0].entries()
    if first[axis] != xs[0].channels and all(x.entries()[axis] in POSITIONS for x in xs):
        return [_positions(imp, n, xs, axis)]
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


def _positions(imp, n, xs: list, axis: int) -> Act:
    """Concat along the pixels of tensors lying as (N, pixels, C) (a class token before a
    sequence of patches): each as a (C, 1, L) row, padded with zeros to the whole length
    where the others lie, and the rows summed."""
    entries = [x.entries() for x in xs]
    if any(len(e) != 3 or e[0] != ("N",) or e[2] != x.channels or x.split != 1 or axis != 1
           or x.shape[0] != xs[0].shape[0] for x, e in zip(xs, entries)):
        raise Unsupported(f"along axis {axis} of tensors lying as {', '.join(x.describe() for x in xs)}: only "
                          "along the channels, or along the pixels of (N, pixels, C) tensors")
    label = imp.label(n.name or "concat")
    lengths = [x.shape[1] * x.shape[2] for x in xs]
    total, start, out = sum(lengths), 0, None
    for i, (x, length) in enumerate(zip(xs, lengths)):
        row = x.image if x.shape[1] == 1 else MatrixCopyToImageNode(x.image, (x.shape[0], 1, length), "chw",
                                                                     label=imp.label(f"{label}_row{i}"))
        part = Padding(row, (0, 0, start, total - start - length), mode="constant", value=0.0,
                       label=imp.label(f"{label}_part{i}"))
        out = part if out is None else Addition(out, part, label=label if i == len(xs) - 1 else
                                                imp.label(f"{label}_sum{i}"))
        start += length
    return Act(out, (xs[0].shape[0], 1, total), (("N",), ("W",), ("D", "E")))


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
        axes = [in_range(v, rank) for v in imp.const(n, 3).ravel()]
    if len(pads) != 2 * len(axes) or any(abs(p) >= 1 << 31 for p in pads):
        raise ValueError(f"pads {pads} are not two 32-bit amounts for each of {len(axes)} axes")
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
