"""Import of operators that pick or resample pixels: Slice (windows, steps, flips) and Resize
(integer factors and their inverses as upsampling and pooling; any other size as a fixed
matrix along each spatial axis)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from nngraph._core import (
    Crop,
    ImageCopyToMatrixNode,
    MatrixCopyToImageNode,
    Pooling,
    Upsampling,
)
from nngraph.onnx import _stacked as stacked
from nngraph.onnx._layout import (
    Act,
    Filled,
    Stacked,
    Sym,
    Unsupported,
    channels_first,
    fixed_map,
    image_axes,
    in_range,
    infer,
)
from nngraph.onnx._symbolic import slice_args


def slice_op(imp, n) -> list:
    values = [imp.get(name) for name in n.input]
    if isinstance(values[0], Stacked):  # parts of a stack, along it
        x = values[0]
        (axis, start, end, step), *rest = slice_args(values, len(x.parts[0].axes) + 1, imp.attrs(n))
        if rest or step != 1:
            raise Unsupported(x.why)
        return [stacked.pick(x, axis, list(range(*slice(start, end).indices(len(x.parts)))), True)]
    x = imp.act(n)
    dims = x.dims()
    ranges, steps, picks = {}, {}, {}
    for axis, start, end, step in slice_args(values, len(dims), imp.attrs(n)):
        if x.norm(x.axes[axis]) == ("N",):
            if start == 0 and end >= 2**31 - 1 and step == 1:
                continue
            raise Unsupported("of the batch axis is not supported")
        if step == 0:
            raise Unsupported("with a step of 0 is not valid")
        r = range(*slice(start, end, step).indices(dims[axis]))
        if not len(r):
            raise Unsupported("to an empty tensor is not supported")
        spatial = x.norm(x.axes[axis]) in (("H",), ("W",))
        if step < 0 or (step > 1 and len(r) > 1 and not spatial):  # a flip, or channel steps: a matrix
            picks[axis] = np.eye(dims[axis], dtype=np.float32)[list(r)]
            continue
        if step > 1 and len(r) > 1:
            steps[x.norm(x.axes[axis])[0]] = step
        if len(r) < dims[axis]:
            ranges[axis] = (r.start, r.start + (len(r) - 1) * step + 1)
    out = crop(imp, n, x, ranges) if ranges else x
    if steps:  # every step-th row and column: a one-tap max pooling of that stride
        stride = (steps.get("H", 1), steps.get("W", 1))
        node = Pooling(out.image, "max", kernel=1, stride=stride, label=imp.label((n.name or "slice") + "_steps"))
        out = Act(node, infer(node, [out]), out.axes, out.split)
    for axis, matrix in picks.items():
        out = _map_axis(imp, n, out, axis, matrix)
    return [out]


def crop(imp, n, x: Act, ranges: dict) -> Act:
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
        if isinstance(sizes, (Act, Filled)):
            raise Unsupported("to sizes computed at run time is not supported")
    factors = [1.0] * rank
    axes = [in_range(v, rank) for v in a.get("axes", range(rank))]
    for given, what in ((scales, "scales"), (sizes, "sizes")):
        count = 0 if given is None else np.asarray(given).size
        if count and count != len(axes):
            raise ValueError(f"{what} holds {count} values for {len(axes)} axes")
    if scales is not None and scales.size:
        for i, s in zip(axes, scales.ravel()):
            factors[i] = float(s)
    elif sizes is not None:
        for i, s in zip(axes, list(np.asarray(sizes).ravel())):
            # The batch keeps its size: a fixed one where the model's batch is fixed, else taken for it.
            if i == 0 and not isinstance(s, Sym) and imp.batch is not None and s != imp.batch:
                raise Unsupported(f"to {s} images of a batch of {imp.batch} is not supported")
            factors[i] = 1.0 if i == 0 else float(s) / dims[i]
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
    cut = crop(imp, n, x, ranges) if ranges else x
    node = Pooling(cut.image, "average", kernel=tuple(kernel), stride=tuple(stride),
                   label=imp.label(n.name or "resize"))
    return channels_first(node, infer(node, [cut]), image_axes(spatial))


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


def tile(imp, n) -> list:
    """Tile (`x.repeat(...)`): copies of an axis one after another, stacked identities (_map_axis)."""
    x, repeats = imp.act(n), [int(r) for r in np.asarray(imp.const(n, 1)).ravel()]
    for axis, r in enumerate(repeats):
        if r != 1:
            x = _map_axis(imp, n, x, axis, np.tile(np.eye(x.dims()[axis], dtype=np.float32), (r, 1)))
    return [x]


def cumulative(imp, n) -> list:
    """CumSum (exclusive and reverse too): a triangular matrix of ones along the axis (_map_axis)."""
    x, a = imp.act(n), imp.attrs(n)
    axis = in_range(np.asarray(imp.const(n, 1)).ravel()[0], len(x.axes))
    i, j = np.indices((x.dims()[axis],) * 2)
    before = j > i if a.get("reverse", 0) else j < i  # the elements summed into element i, but i itself
    return [_map_axis(imp, n, x, axis, before | ((i == j) & (not a.get("exclusive", 0))))]


def _map_axis(imp, n, x: Act, axis: int, matrix) -> Act:
    """x with a fixed (out × in) matrix applied along ONNX axis `axis`: H or W (_along), or all of
    the channels (a frozen 1×1 convolution, fixed_map)."""
    entry, matrix = x.norm(x.axes[axis]), np.asarray(matrix, np.float32)
    if entry in (("H",), ("W",)):
        image, shape = _along(imp, n, x.image, x.shape, entry[0], matrix)
    elif entry and entry == x.channels and x.split == 1:
        image, shape = fixed_map(x.image, matrix, imp.label(n.name or n.op_type)), (matrix.shape[0], *x.shape[1:])
    else:
        raise Unsupported(f"along axis {axis} of a tensor lying as {x.describe()}: only along H, W or the channels")
    return Act(image, shape, x.axes, x.split)


def _along(imp, n, image, shape: tuple, atom: str, matrix: np.ndarray) -> tuple:
    """A fixed (out × in) map along the H or W axis of an image of `shape`: the axis copied into
    the channels, a 1×1 convolution by the matrix (its source frozen), copied back. Returns the
    new image and its shape."""
    c, h, w = shape
    out = matrix.shape[0]
    label = imp.label(f"{n.name or n.op_type}_{atom}")
    if atom == "H":  # (c, h, w) → (h, 1, w·c) → map → (out, w, c) read as (c, out, w)
        rows = MatrixCopyToImageNode(ImageCopyToMatrixNode(image, "hwc", label=label + "_hwc"), (h, 1, w * c), "chw",
                                     label=label + "_rows")
        mapped = fixed_map(rows, matrix, label)
        return MatrixCopyToImageNode(mapped, (c, out, w), "hwc", label=label + "_back"), (c, out, w)
    flat = MatrixCopyToImageNode(image, (c * h, 1, w), "chw", label=label + "_flat")
    columns = MatrixCopyToImageNode(ImageCopyToMatrixNode(flat, "hwc", label=label + "_hwc"), (w, 1, c * h), "chw",
                                    label=label + "_columns")
    mapped = fixed_map(columns, matrix, label)
    back = MatrixCopyToImageNode(mapped, (c * h, 1, out), "hwc", label=label + "_back")
    return MatrixCopyToImageNode(back, (c, h, out), "chw", label=label + "_image"), (c, h, out)
