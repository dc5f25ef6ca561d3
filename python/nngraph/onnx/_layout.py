"""How an ONNX tensor lies in an nngraph image, and shape arithmetic with a symbolic batch.

An activation (`Act`) is an image N×C×H×W and, per ONNX axis, the image axes ("atoms") it
runs over, outermost first: "N", "D" and "E" (the channels, C = D·E: a bidirectional
recurrent layer's directions and their hidden units; D is 1 elsewhere), "H", "W". Transpose,
Reshape, Flatten, Squeeze and Unsqueeze relabel those axes without moving data; operators
that compute check that their input lies as they read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from nngraph._core import ArrayDataSource, Convolution, ConvolutionDescriptor

CANONICAL = ("N", "D", "E", "H", "W")


def unique(base: str, taken: set) -> str:
    """`base`, or `base_2`, `base_3`... the first not taken; now taken."""
    name, i = base, 1
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    taken.add(name)
    return name


class Unsupported(Exception):
    """An operator, attribute or tensor layout that nngraph's nodes do not express."""


class Sym:
    """k·N: a multiple of the batch size in shape computations."""

    __slots__ = ("k",)

    def __init__(self, k: int = 1):
        self.k = int(k)

    def __mul__(self, o):
        if isinstance(o, Sym):
            raise ValueError("the batch size squared")
        return Sym(self.k * int(o))

    __rmul__ = __mul__

    def __floordiv__(self, o):
        if isinstance(o, Sym):
            if self.k % o.k:
                raise ValueError("a batch multiple over another")
            return self.k // o.k
        if self.k % int(o):
            raise ValueError(f"{self} over {o}")
        return Sym(self.k // int(o))

    __truediv__ = __floordiv__

    def __add__(self, o):
        if isinstance(o, Sym):
            return Sym(self.k + o.k)
        if int(o) == 0:
            return self
        raise ValueError("the batch size plus a constant")

    __radd__ = __add__

    def __sub__(self, o):
        return self + (-o if not isinstance(o, Sym) else Sym(-o.k))

    def __neg__(self):
        return Sym(-self.k)

    def __eq__(self, o):
        return isinstance(o, Sym) and o.k == self.k

    def __hash__(self):
        return hash(("N", self.k))

    def __int__(self):
        raise ValueError("the batch size is not known until run time")

    __index__ = __int__

    def __repr__(self):
        return "N" if self.k == 1 else f"{self.k}·N"


def in_range(v, size: int, what: str = "axis") -> int:
    """v as one of `size` places, a negative one counting from the end, as ONNX gives axes and
    indices; a ValueError naming `what` where v lies outside [-size, size)."""
    v = int(v)
    if not -size <= v < size:
        raise ValueError(f"{what} {v} is outside [{-size}, {size - 1}]")
    return v % size


def axes_in(values, rank: int) -> list:
    """ONNX axes (a list, or a tensor of one dim) of a tensor of `rank` axes, sorted; a ValueError
    where they are not a vector, lie out of range or repeat one."""
    a = np.asarray(values)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise ValueError(f"axes of shape {list(a.shape)} and type {a.dtype}, not a vector of integers")
    out = [in_range(v, rank) for v in a]
    if len(set(out)) != len(out):
        raise ValueError(f"axes {a.tolist()} name an axis twice")
    return sorted(out)


def perm_of(attrs: dict, rank: int) -> list:
    """Transpose's perm (reversing the axes where absent); a ValueError unless it orders all `rank` axes."""
    perm = list(attrs.get("perm", range(rank - 1, -1, -1)))
    if sorted(perm) != list(range(rank)):
        raise ValueError(f"perm {perm} is not an order of the {rank} axes")
    return perm


def symbolic(a) -> bool:
    """Whether an integer array holds a Sym."""
    return isinstance(a, np.ndarray) and a.dtype == object


def ints(a) -> np.ndarray:
    """Integers as int64, or as an object array where one is a Sym."""
    a = np.asarray(a, dtype=object)
    if a.ndim > 32:  # beyond what numpy iterates
        raise ValueError(f"a shape computation makes a tensor of {a.ndim} dims")
    if any(isinstance(v, Sym) for v in a.flat):
        return a
    return a.astype(np.int64)


@dataclass
class Filled:
    """A constant of one value throughout, of a shape that may hold the batch size (zero
    initial states made from a Shape)."""

    value: float
    dims: np.ndarray  # int64 or object (with Sym)


@dataclass
class Act:
    """An image node (or filter node) and the atoms of each ONNX axis."""

    image: object
    shape: tuple  # (C, H, W)
    axes: tuple  # one tuple of atoms per ONNX axis
    split: int = 1  # D
    # For an Expand of one value per image over the channels: that value, which an elementwise
    # operator broadcasts itself where the channels it was spread over lie otherwise.
    repeats: Act | None = None

    def size(self, atom: str):
        c, h, w = self.shape
        return {"N": Sym(), "D": self.split, "E": c // self.split, "H": h, "W": w}[atom]

    def norm(self, entry: tuple) -> tuple:
        """The atoms of an entry that are not 1 (N always is not)."""
        return tuple(a for a in entry if a == "N" or self.size(a) != 1)

    def entries(self) -> list:
        return [self.norm(e) for e in self.axes]

    def dims(self) -> list:
        out = []
        for e in self.axes:
            d = 1
            for a in e:
                d = self.size(a) * d
            out.append(d)
        return out

    @property
    def channels(self) -> tuple:
        return self.norm(("D", "E"))

    def relabel(self, axes, split=None) -> Act:
        return Act(self.image, self.shape, tuple(tuple(e) for e in axes), self.split if split is None else split)

    def flat(self) -> list:
        return [a for e in self.axes for a in self.norm(e)]

    def spatial_form(self, what: str, rank: int | None = None) -> list:
        """For operators reading (N, C, spatial...): the image axis of each spatial ONNX axis
        ("H", "W", or None where it is 1), checked: (N, C, H, W), (N, C, L) or (N, C)."""
        e = self.entries()
        ok = (rank is None or len(e) == rank) and 2 <= len(e) <= 4 and e[0] == ("N",) and e[1] == self.channels
        spatial = [x[0] if x else None for x in e[2:]]
        if ok and len(e) == 4:
            ok = e[2] in (("H",), ()) and e[3] in (("W",), ())
        elif ok and len(e) == 3:
            ok = e[2] in (("H",), ("W",), ()) and (self.shape[1] == 1 or self.shape[2] == 1)
        if not ok:
            raise ValueError(f"{what} reads (N, C, H, W) tensors; this one lies as {self.describe()}")
        return spatial

    def channels_along(self) -> bool:
        """Whether the tensor lies as (N, 1, C, H, W): the channels as the first of three spatial
        axes, as PyTorch's LocalResponseNorm exports its window over the channels."""
        e = self.entries()
        return len(e) == 5 and e[:2] == [("N",), ()] and e[2] == self.channels and bool(e[2]) and \
            e[3] in (("H",), ()) and e[4] in (("W",), ())

    def describe(self) -> str:
        return "(" + ", ".join("·".join(x) or "1" for x in self.entries()) + ")"


# What an ONNX axis of pixels holds: no atom (a length of 1), the rows, the columns, or both.
POSITIONS = {(), ("H",), ("W",), ("H", "W")}


@dataclass
class Moved:
    """Values of an (N, C, H, W) image moved within each image by Reshape and Transpose where no
    image holds them as they lie (PixelUnshuffle's 6-D view): per element, the index into the
    source's (C, H, W) values that it reads, over every ONNX axis but the batch. `why` is the
    first Reshape's refusal, raised if anything but Reshape and Transpose reads it."""

    source: Act
    index: np.ndarray
    why: str
    readers: ClassVar[tuple] = ("Reshape", "Transpose")


@dataclass
class Stacked:
    """Equal parts of an image's channels stacked along ONNX axis `axis`, where a Reshape splits
    the channels three ways or more (a fused projection's queries, keys and values as
    (N, T, 3, heads, d)): each part an Act over a Crop of its channels. Operators that relabel or
    pick along the stack read it; `why` is the Reshape's refusal, raised for any other."""

    parts: list
    axis: int
    why: str
    readers: ClassVar[tuple] = ("Transpose", "Squeeze", "Unsqueeze", "Gather", "Split", "Slice")


def _dims_text(dims) -> str:
    return "[" + ", ".join(str(d) if isinstance(d, Sym) else str(int(d)) for d in dims) + "]"


def reshape(act: Act, target: list) -> Act:
    """The same image under new ONNX dims (each int or Sym, already resolved): consecutive
    atoms group into each dim; whole channels may split into an outer dim (D) and the rest."""
    flat, split = act.flat(), act.split
    c = act.shape[0]

    def size(atom):
        return Act(act.image, act.shape, (), split).size(atom)

    out, i = [], 0
    for d in target:
        # k·N takes the batch and atoms of k beside it (attention's batch × heads, a
        # sequence's steps × batch); an integer, atoms of its size.
        batch, k = isinstance(d, Sym), d.k if isinstance(d, Sym) else d
        if not batch and k == 1:
            out.append(())
            continue
        group, prod = [], 1
        while i < len(flat) and (prod < k or (batch and "N" not in group)):
            if flat[i] == "N" and (not batch or "N" in group):
                break
            if flat[i] != "N":
                prod *= size(flat[i])
            group.append(flat[i])
            i += 1
        if prod != k and group[-1:] == ["E"] and split == 1 and k % (prod // size("E")) == 0 and \
                c % (k // (prod // size("E"))) == 0:
            split = k // (prod // size("E"))  # whole channels as (split, c/split): D is the outer part
            flat[i - 1:i] = ["D", "E"]
            group[-1], prod = "D", k
        if prod != k or (batch and "N" not in group):
            raise ValueError(f"cannot reshape {act.describe()} to {_dims_text(target)}")
        out.append(tuple(group))
    if i != len(flat):
        raise ValueError(f"cannot reshape {act.describe()} to {_dims_text(target)}")
    return Act(act.image, act.shape, tuple(out), split)


def resolve_target(dims: list, target: np.ndarray, allowzero: int = 0, batch: int | None = None) -> list:
    """An ONNX Reshape's shape input against the input's dims: 0 copies, N stays N, -1 infers.
    `batch`: a model's fixed batch size, which a target dim equal to it stands for where N lies
    (as many values before it as before the input's N: `x.view(x.size(0), -1)` exported for
    one batch size)."""
    target = list(target.flat)
    out = [dims[i] if (not isinstance(t, Sym) and t == 0 and not allowzero) else t for i, t in enumerate(target)]
    at = next((i for i, d in enumerate(dims) if isinstance(d, Sym)), None)
    if batch is not None and at is not None and dims[at] == Sym() and not any(isinstance(t, Sym) for t in out):
        before, run = int(np.prod(np.array(dims[:at], dtype=np.int64))), 1
        for k, t in enumerate(out):
            if t == -1:
                break
            if t == batch and run == before:
                out[k] = Sym()
                break
            run *= int(t)
    if sum(1 for t in out if not isinstance(t, Sym) and t == -1) > 1:
        raise ValueError("two -1 dims")
    if any(not isinstance(t, Sym) and t == -1 for t in out):
        total = np.prod(np.array(dims, dtype=object))
        known = np.prod(np.array([t for t in out if isinstance(t, Sym) or t != -1] or [1], dtype=object))
        rest = total // known
        out = [rest if (not isinstance(t, Sym) and t == -1) else t for t in out]
    return out


def _atoms(act: Act) -> list:
    return [a for e in act.axes for a in e]


def to_image(array: np.ndarray, act: Act) -> np.ndarray:
    """An array shaped as the ONNX tensor `act` stands for, as the (N, C, H, W) image."""
    names = _atoms(act)
    static = [act.size(a) for a in names if a != "N"]
    n = array.size // max(1, int(np.prod(static)))
    a = array.reshape([n if x == "N" else act.size(x) for x in names])
    for x in CANONICAL:
        if x not in names:
            a, names = a[..., None], names + [x]
    c, h, w = act.shape
    return a.transpose([names.index(x) for x in CANONICAL]).reshape(n, c, h, w)


def from_image(image: np.ndarray, act: Act) -> np.ndarray:
    """The (N, C, H, W) image as the ONNX tensor `act` stands for."""
    n = image.shape[0]
    names = _atoms(act)
    a = image.reshape(n, act.split, act.shape[0] // act.split, act.shape[1], act.shape[2])
    a = a.reshape([d for x, d in zip(CANONICAL, a.shape) if x in names])
    order = [x for x in CANONICAL if x in names]
    dims = [d if not isinstance(d, Sym) else d.k * n for d in act.dims()]
    return a.transpose([order.index(x) for x in names]).reshape(dims)


def infer(node, acts: list) -> tuple:
    return tuple(node.infer([a.shape for a in acts]))


def channels_first(image, shape: tuple, spatial: list) -> Act:
    """An Act of (N, C, spatial...) over the image axes in `spatial`."""
    return Act(image, shape, (("N",), ("D", "E")) + tuple((a,) for a in spatial))


def image_axes(spatial: list) -> list:
    """The image axis each spatial ONNX axis runs over: (H, W) for 2-D windows, one of them for 1-D."""
    return ["H", "W"] if len(spatial) == 2 else [spatial[0] or "W"] if spatial else []


def fixed_map(image, matrix, label: str):
    """A fixed (out × in) map over an image's channels: a 1×1 convolution whose weights sit in a
    frozen data source of its own, labelled `label`, so fine-tuning leaves them."""
    m = np.asarray(matrix, np.float32)
    ds = ArrayDataSource(ConvolutionDescriptor(1, m.shape[1], m.shape[0]), weights=m[:, :, None, None], biases=None,
                         label=label, frozen=["weights"])
    return Convolution(image, ds, label=label)


def unused(what: str):
    """An output nngraph does not compute: reading it raises."""
    def fail():
        raise Unsupported(f"reads {what}, which nngraph does not compute")
    return fail
