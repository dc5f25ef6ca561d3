"""Import of channels split three ways or more by a Reshape (`Stacked`): the parts of the
outermost split become Crops of their own, and the operators that relabel or pick along the
stack act on them."""

from __future__ import annotations

from nngraph._core import Crop
from nngraph.onnx._layout import Act, Stacked, Sym, Unsupported, infer, reshape


def stack(imp, n, x: Act, dims: list, why: str) -> Stacked:
    """x reshaped to `dims`, where a dim splits off the outermost part of whole channels and the
    rest is a reshape of each part; else Unsupported(why)."""
    flat, c = x.flat(), x.shape[0]
    if x.split != 1 or "E" not in flat:
        raise Unsupported(why)
    before = 1
    for a in flat[:flat.index("E")]:
        before = x.size(a) * before
    prod, axis = 1, 0
    while axis < len(dims) and prod != before:
        prod = dims[axis] * prod
        axis += 1
    k = dims[axis] if prod == before and axis < len(dims) else 0
    if isinstance(k, Sym) or not 1 < int(k) < c or c % int(k):
        raise Unsupported(why)
    k, (_, h, w) = int(k), x.shape
    inner = c // k
    rest = dims[:axis] + dims[axis + 1:]
    parts = []
    for p in range(k):
        node = Crop(x.image, window=(0, 0, h, w), channels=(p * inner, inner),
                    label=imp.label(f"{n.name or 'reshape'}_{p}"))
        part = Act(node, infer(node, [x]), x.axes)
        try:
            parts.append(reshape(part, rest))
        except ValueError:
            raise Unsupported(why) from None
    return Stacked(parts, axis, why)


def transpose(x: Stacked, perm: list) -> Stacked:
    inner = [p - (p > x.axis) for p in perm if p != x.axis]
    return Stacked([part.relabel([part.axes[p] for p in inner]) for part in x.parts], perm.index(x.axis), x.why)


def reindexed(x: Stacked, removed: list, inserted: list) -> Stacked:
    """The stack after Squeeze (`removed` axes, none of them the stack's) or Unsqueeze
    (`inserted` axes of the result)."""
    if x.axis in removed:
        raise Unsupported(x.why)
    axis = x.axis - sum(a < x.axis for a in removed)
    for a in sorted(inserted):
        axis += a <= axis
    parts = []
    for part in x.parts:
        own = [e for i, e in enumerate([*part.axes[:x.axis], None, *part.axes[x.axis:]]) if i not in removed]
        for a in sorted(inserted):
            own.insert(a, ())
        parts.append(part.relabel([e for e in own if e is not None]))
    return Stacked(parts, axis, x.why)


def pick(x: Stacked, axis: int, chosen: list, keep_axis: bool):
    """The parts `chosen` along the stack: one part (its axis kept as 1 where asked), or a stack."""
    if axis != x.axis:
        raise Unsupported(x.why)
    if len(chosen) > 1:
        return Stacked([x.parts[i] for i in chosen], x.axis, x.why)
    part = x.parts[chosen[0]]
    return part.relabel([*part.axes[:axis], (), *part.axes[axis:]]) if keep_axis else part
