"""MatMul of two computed tensors (attention's scores and weighted values): each operand's
batch axes hold the batch and the heads (the channels' outer part, D), its two matrix axes the
channels of a head (E) and the pixels, in either order. One MatrixMultiplication node computes
the product, a head to a group, laid out so that the product's last axis lies in the channels
where it can (a Softmax over it then runs over each group of channels)."""

from __future__ import annotations

from nngraph._core import MatrixMultiplication
from nngraph.onnx._layout import POSITIONS, Act, Unsupported, infer


def _matrix(x: Act, which: str, groups: int):
    """(batch entries, whether the ONNX rows are the pixels, the pixels' entry) of an operand."""
    e = x.entries()
    if len(e) < 2:
        raise Unsupported(f"of a {len(e)}-D {which} operand is not supported")
    batch, rows, cols = [b for b in e[:-2] if b], e[-2], e[-1]
    within = ("E",) if groups > 1 else x.channels
    atoms = {a for b in batch for a in b}
    if not atoms <= {"N", "D"} or "N" not in atoms:
        raise Unsupported(f"with the {which} operand lying as {x.describe()}: the batch and the heads "
                          "must be its leading axes")
    for positions_first, (p, c) in ((True, (rows, cols)), (False, (cols, rows))):
        if c == within and p in POSITIONS:
            return batch, positions_first, p
    raise Unsupported(f"with the {which} operand lying as {x.describe()}: its last two axes must be the "
                      "channels of a head and the pixels")


def matmul(imp, n) -> list:
    left, right = imp.act(n, 0), imp.act(n, 1)
    groups = left.split if any("D" in b for b in left.entries()[:-2]) else 1
    if groups != (right.split if any("D" in b for b in right.entries()[:-2]) else 1):
        raise Unsupported(f"of operands in different numbers of heads: {left.describe()} and {right.describe()}")
    lb, l_rows_pixels, lp = _matrix(left, "left", groups)
    rb, r_rows_pixels, rp = _matrix(right, "right", groups)
    if lb != rb:
        raise Unsupported(f"of operands whose batch axes differ: {left.describe()} and {right.describe()}")
    # ONNX's product is L·R (M×P). It is laid out as its transpose Rᵀ·Lᵀ, P in the channels and
    # M in the pixels, unless both operands' rows are channels: then as L·R itself, read as both lie.
    within = ("E",) if groups > 1 else ("D", "E")
    if l_rows_pixels or r_rows_pixels:
        node = MatrixMultiplication(right.image, left.image, groups=groups, transpose_left=not r_rows_pixels,
                                    transpose_right=not l_rows_pixels, label=imp.label(n.name or "matmul"))
        operands, matrix = [right, left], [lp if l_rows_pixels else ("W",), within]
    else:
        node = MatrixMultiplication(left.image, right.image, groups=groups, label=imp.label(n.name or "matmul"))
        operands, matrix = [left, right], [within, rp]
    batch = max(left.axes[:-2], right.axes[:-2], key=len)
    return [Act(node, infer(node, operands), tuple(batch) + tuple(matrix), groups)]
