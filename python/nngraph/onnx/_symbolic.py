"""Shape computations that involve the batch size: the operators between a Shape and the
Reshape, Expand or ConstantOfShape it feeds, on integer arrays holding a Sym, and on
constants of one value (Filled) whose shape holds one."""

from __future__ import annotations

import numpy as np

from nngraph.onnx._layout import Filled, Sym, axes_in, in_range, ints, perm_of, symbolic

BIG = 2**62  # ends at or beyond this mean "to the end"


def _obj(a) -> np.ndarray:
    return np.asarray(a, dtype=object) if not isinstance(a, np.ndarray) or a.dtype != object else a


def _slice_len(dim, start: int, end: int, step: int):
    if isinstance(dim, Sym):
        if step == 1 and start == 0 and end >= BIG:
            return dim
        raise ValueError("slicing the batch axis")
    return len(range(*slice(start, end, step).indices(dim)))


def slice_args(node_inputs: list, rank: int, attrs: dict) -> list:
    """(axis, start, end, step) per sliced axis, from Slice's inputs (opset 10+) or attributes."""
    if len(node_inputs) > 1:
        starts, ends = (np.asarray(v).astype(np.int64).ravel() for v in node_inputs[1:3])
        axes = np.asarray(node_inputs[3]).ravel() if len(node_inputs) > 3 and node_inputs[3] is not None \
            else np.arange(len(starts))
        steps = np.asarray(node_inputs[4]).ravel() if len(node_inputs) > 4 and node_inputs[4] is not None \
            else np.ones(len(starts), np.int64)
    else:
        starts, ends = np.array(attrs["starts"]), np.array(attrs["ends"])
        axes = np.array(attrs.get("axes", range(len(starts))))
        steps = np.ones(len(starts), np.int64)
    return [(in_range(a, rank), int(s), int(e), int(t)) for a, s, e, t in zip(axes, starts, ends, steps)]


def _axes(inputs: list, attrs: dict):
    """Squeeze's and Unsqueeze's axes: their second input (opset 13+) or attribute; None: absent."""
    a = inputs[1] if len(inputs) > 1 and inputs[1] is not None else attrs.get("axes")
    return None if a is None else np.asarray(a)


def evaluate(op: str, inputs: list, attrs: dict, batch: int | None = None) -> list:
    """One operator on symbolic integer arrays and Filled constants (the other inputs numpy).
    `batch`: a model's fixed batch size, which a constant's dim may stand for where it meets N."""
    x = inputs[0]
    if isinstance(x, Filled) or any(isinstance(v, Filled) for v in inputs):
        return [_filled(op, inputs, attrs, batch)]
    if op in ("Identity", "Cast"):
        return [x]
    if op == "Shape":
        return [ints(list(_obj(x).shape))]
    if op == "Gather":
        return [ints(np.take(_obj(x), np.asarray(inputs[1]).astype(np.int64), axis=attrs.get("axis", 0)))]
    if op == "Slice":
        a = _obj(x)
        index = [slice(None)] * a.ndim
        for axis, start, end, step in slice_args(inputs, a.ndim, attrs):
            index[axis] = slice(start, min(end, BIG), step)
        return [ints(a[tuple(index)])]
    if op == "Concat":
        return [ints(np.concatenate([_obj(v) for v in inputs], axis=attrs["axis"]))]
    if op == "Unsqueeze":
        a, axes = _obj(x), _axes(inputs, attrs)
        for axis in axes_in(axes, a.ndim + axes.size):
            a = np.expand_dims(a, axis)
        return [ints(a)]
    if op == "Squeeze":
        a, axes = _obj(x), _axes(inputs, attrs)
        return [ints(np.squeeze(a, axis=tuple(axes_in(axes, a.ndim)) if axes is not None else None))]
    if op == "Reshape":
        return [ints(_obj(x).reshape([int(v) for v in np.asarray(inputs[1]).ravel()]))]
    if op in ("Mul", "Add", "Sub", "Div"):
        a, b = _obj(inputs[0]), _obj(inputs[1])
        f = {"Mul": np.multiply, "Add": np.add, "Sub": np.subtract, "Div": np.floor_divide}[op]
        return [ints(f(a, b))]
    if op == "Equal":
        a, b = np.broadcast_arrays(_obj(inputs[0]), _obj(inputs[1]))
        return [np.array([_equal(p, q) for p, q in zip(a.flat, b.flat)]).reshape(a.shape)]
    if op == "Where":
        return [ints(np.where(np.asarray(inputs[0], bool), _obj(inputs[1]), _obj(inputs[2])))]
    if op == "ConstantOfShape":
        value = attrs.get("value")
        return [Filled(float(value.ravel()[0]) if value is not None else 0.0, ints(x))]
    if op == "Expand":
        v = np.asarray(x)
        if v.size and (v != v.ravel()[0]).any():
            raise ValueError("expanding a constant of several values to a batch-sized shape")
        return [Filled(float(v.ravel()[0]), broadcast(ints(v.shape), ints(inputs[1]), batch))]
    raise ValueError(f"{op} on a shape that holds the batch size")


def _equal(p, q) -> bool:
    if isinstance(p, Sym) or isinstance(q, Sym):
        s, o = (p, q) if isinstance(p, Sym) else (q, p)
        if isinstance(o, Sym):
            return s == o
        if int(o) <= 0:
            return False
        raise ValueError("comparing the batch size with a constant")
    return p == q


def broadcast(a, b, batch: int | None = None) -> np.ndarray:
    """The dims two shapes broadcast to (numpy's rule); a dim equal to `batch` meets N as N."""
    a, b = list(a), list(b)
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    out = []
    for p, q in zip(a, b):
        if not isinstance(p, Sym) and p == 1:
            out.append(q)
        elif not isinstance(q, Sym) and q == 1 or p == q:
            out.append(p)
        elif batch is not None and any(isinstance(u, Sym) and u.k == 1 and not isinstance(v, Sym) and v == batch
                                       for u, v in ((p, q), (q, p))):
            out.append(Sym())
        else:
            raise ValueError(f"shapes {a} and {b} do not broadcast")
    return ints(out)


def _filled(op: str, inputs: list, attrs: dict, batch: int | None) -> Filled:
    x = inputs[0]
    if op == "Concat":
        if not all(isinstance(v, Filled) for v in inputs) or len({v.value for v in inputs}) != 1:
            raise ValueError("joining constants of different values")
        axis = in_range(attrs["axis"], len(x.dims))
        dims = list(x.dims)
        dims[axis] = sum((v.dims[axis] for v in inputs[1:]), x.dims[axis])
        return Filled(x.value, ints(dims))
    if not isinstance(x, Filled):
        raise ValueError(f"{op} reading a batch-sized constant")
    dims = list(x.dims)
    if op in ("Identity", "Cast"):
        return x
    if op == "Unsqueeze":
        axes = _axes(inputs, attrs)
        for axis in axes_in(axes, len(dims) + axes.size):
            dims.insert(axis, 1)
    elif op == "Squeeze":
        axes = _axes(inputs, attrs)
        axes = None if axes is None else axes_in(axes, len(dims))
        dims = [d for i, d in enumerate(dims) if (axes is not None and i not in axes)
                or (axes is None and (isinstance(d, Sym) or d != 1))]
    elif op == "Transpose":
        dims = [dims[p] for p in perm_of(attrs, len(dims))]
    elif op == "Slice":
        for axis, start, end, step in slice_args(inputs, len(dims), attrs):
            dims[axis] = _slice_len(dims[axis], start, end, step)
    elif op == "Gather":
        axis = in_range(attrs.get("axis", 0), len(dims))
        dims[axis:axis + 1] = list(np.asarray(inputs[1]).shape)
    elif op == "Expand":
        dims = list(broadcast(ints(dims), ints(inputs[1]), batch))
    elif op == "Reshape":
        raise ValueError("reshaping a batch-sized constant")
    else:
        raise ValueError(f"{op} reading a batch-sized constant")
    return Filled(x.value, ints(dims))


def is_symbolic(v) -> bool:
    return isinstance(v, Filled) or symbolic(v)
