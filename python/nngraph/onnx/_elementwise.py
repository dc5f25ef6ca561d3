"""Import handlers of elementwise operators (neurons, arithmetic), normalizations,
softmax and dropout."""

from __future__ import annotations

import numpy as np

from nngraph._core import (
    Addition,
    ArrayDataSource,
    BatchNormalization,
    Convolution,
    ConvolutionDescriptor,
    Division,
    Dropout,
    GroupNormalization,
    InstanceNormalization,
    LayerNormalization,
    LogSoftMax,
    Multiplication,
    Neuron,
    NormalizationDescriptor,
    SoftMax,
    Subtraction,
)
from nngraph.onnx._constants import constant_act
from nngraph.onnx._layout import Act, Filled, Unsupported, fixed_map, in_range, infer, unused

NEURONS = {
    "Relu": ("relu", {}), "Sigmoid": ("sigmoid", {}), "Tanh": ("tanh", {}), "Abs": ("absolute", {}),
    "Softplus": ("softplus", {}), "HardSwish": ("hard_swish", {}), "Neg": ("linear", {"a": -1.0, "b": 0.0}),
    "Exp": ("exponential", {"a": 1.0, "b": 0.0, "c": -1.0}), "Log": ("logarithm", {"a": 1.0, "b": 0.0, "c": -1.0}),
    "Sqrt": ("power", {"a": 0.0, "b": 1.0, "c": 0.5}), "Reciprocal": ("power", {"a": 0.0, "b": 1.0, "c": -1.0}),
}


def _neuron(imp, n, x: Act, name: str, **params) -> list:
    node = Neuron(x.image, name, label=imp.label(n.name or n.op_type), **params)
    return [Act(node, x.shape, x.axes, x.split)]


def neuron(imp, n) -> list:
    op = n.op_type
    x = imp.act(n, 1 if op == "Pow" and not isinstance(imp.get(n.input[0]), Act) else 0)
    a = imp.attrs(n)
    if op in NEURONS:
        name, params = NEURONS[op]
        return _neuron(imp, n, x, name, **params)
    if op == "LeakyRelu":
        return _neuron(imp, n, x, "leaky_relu", a=a.get("alpha", 0.01))
    if op == "Elu":
        return _neuron(imp, n, x, "elu", a=a.get("alpha", 1.0))
    if op == "HardSigmoid":
        return _neuron(imp, n, x, "hard_sigmoid", a=a.get("alpha", 0.2), b=a.get("beta", 0.5))
    if op == "Gelu":
        return _neuron(imp, n, x, "gelu" if a.get("approximate", "none") == "none" else "gelu_tanh")
    if op == "Clip":
        lo, hi = a.get("min", -np.inf), a.get("max", np.inf)
        if len(n.input) > 1 and n.input[1]:
            lo = float(imp.const(n, 1))
        if len(n.input) > 2 and n.input[2]:
            hi = float(imp.const(n, 2))
        return _clip(imp, n, x, lo, hi)
    if op == "Selu":  # γ·elu(x; α)
        alpha, gamma = a.get("alpha", 1.6732632423543772), a.get("gamma", 1.0507009873554805)
        return _chain(imp, n, x, [("elu", alpha), ("linear", gamma)])
    if op == "Celu":  # α·elu(x/α; 1)
        alpha = a.get("alpha", 1.0)
        if alpha <= 0:  # max(0, x) + min(0, α·(exp(x/α) − 1)) is α·elu(x/α) for α > 0 alone
            raise Unsupported(f"with alpha {alpha} is not supported (alpha > 0)")
        return _chain(imp, n, x, [("linear", 1.0 / alpha), ("elu", 1.0), ("linear", alpha)])
    if op == "Softsign":  # x / (1 + |x|)
        d = _chain(imp, n, x, [("absolute", None), ("shift", 1.0)], last=False)[0]
        return [_two_images(imp, n, x, d, Division)]
    if op == "Mish":  # x·tanh(softplus(x))
        t = _chain(imp, n, x, [("softplus", None), ("tanh", None)], last=False)[0]
        return [Act(Multiplication(x.image, t.image, label=imp.label(n.name or op)), x.shape, x.axes, x.split)]
    if op == "Pow" and not isinstance(imp.get(n.input[0]), Act):  # c^x
        c = imp.const(n, 0)
        if c.size != 1 or float(c.ravel()[0]) <= 0:
            raise Unsupported("of a base other than one positive constant is not supported")
        return _neuron(imp, n, imp.act(n, 1), "exponential", a=1.0, b=0.0, c=float(c.ravel()[0]))
    if op == "Pow":
        e = imp.const(n, 1)
        if e.size != 1:
            raise Unsupported("with an exponent per element is not supported")
        return _neuron(imp, n, x, "power", a=0.0, b=1.0, c=float(e.ravel()[0]))
    raise Unsupported("is not supported")


def _clip(imp, n, x: Act, lo: float, hi: float) -> list:
    """min(max(x, lo), hi), hi throughout where lo > hi (as ONNX defines Clip): ReLU or ReLUN
    where lo is 0 or −∞ (ReLUN with a slope of 1 below zero is min(x, hi)), else
    lo + ReLUN(x − lo) up to hi − lo."""
    if lo == -np.inf and hi == np.inf:
        return [x]
    if lo == 0 and hi == np.inf:
        return _neuron(imp, n, x, "relu")
    if lo == 0 or lo == -np.inf:
        return _neuron(imp, n, x, "relun", a=0.0 if lo == 0 else 1.0, b=hi)
    clipped = ("relu", None) if hi == np.inf else ("relun", hi - lo)
    return _chain(imp, n, x, [("shift", -lo), clipped, ("shift", lo)])


def _chain(imp, n, x: Act, steps: list, last: bool = True) -> list:
    """Neurons one after another, each (kind, parameter): elu's α, linear's scale, shift's
    offset, relun's ceiling (its slope 0); the last labelled as the node where `last`."""
    image, base = x.image, imp.label(n.name or n.op_type) if last else None
    for i, (kind, p) in enumerate(steps):
        params = {"elu": {"a": p}, "linear": {"a": p, "b": 0.0}, "shift": {"a": 1.0, "b": p},
                  "relun": {"a": 0.0, "b": p}}.get(kind, {})
        label = base if last and i == len(steps) - 1 else imp.label(f"{n.name or n.op_type}_{kind}")
        image = Neuron(image, "linear" if kind == "shift" else kind, label=label, **params)
    return [Act(image, x.shape, x.axes, x.split)]


def extremum(imp, n) -> list:
    """Max and Min of tensors and scalar constants: max(p, q) = q + relu(p − q) and
    min(p, q) = p − relu(p − q) (broadcast as Add's operands); against a constant, a Clip."""
    values = [imp.get(name) for name in n.input if name]
    acts = [v for v in values if isinstance(v, Act)]
    consts = [np.asarray(v, np.float32) for v in values if not isinstance(v, Act)]
    if any(c.size != 1 for c in consts):
        raise Unsupported("with a constant other than a scalar is not supported")
    top = n.op_type == "Max"
    out = acts[0]
    for q in acts[1:]:
        excess = _two_images(imp, n, out, q, Subtraction)
        excess = Act(Neuron(excess.image, "relu", label=imp.label(f"{n.name or n.op_type}_excess")), excess.shape,
                     excess.axes, excess.split)
        out = _two_images(imp, n, q, excess, Addition) if top else _two_images(imp, n, out, excess, Subtraction)
    if not consts:
        return [out]
    bounds = [float(v.ravel()[0]) for v in consts]
    return _clip(imp, n, out, max(bounds), np.inf) if top else _clip(imp, n, out, -np.inf, min(bounds))


ARITHMETIC = {"Add": Addition, "Sub": Subtraction, "Mul": Multiplication, "Div": Division}


def arithmetic(imp, n) -> list:
    p, q = imp.get(n.input[0]), imp.get(n.input[1])
    op = n.op_type
    if isinstance(p, Act) and isinstance(q, Act):
        return [_two_images(imp, n, p, q)]
    x, k, first = (p, q, True) if isinstance(p, Act) else (q, p, False)
    if isinstance(k, Filled):  # x + 0, x − 0, x·1, x/1 leave x
        if (op in ("Add", "Sub") and k.value == 0) or (op in ("Mul", "Div") and k.value == 1 and first):
            return [x]
        raise Unsupported("with a batch-sized constant is not supported")
    if isinstance(k, np.ndarray) and k.dtype.kind in "iub":  # ONNX types both operands alike
        raise ValueError(f"of a float tensor and a constant of {k.dtype}")
    k = np.asarray(k, np.float32)
    if k.ndim > len(x.axes):
        raise Unsupported(f"with a constant of shape {k.shape} that enlarges the tensor is not supported")
    if not _per_channel(x, k) or (op == "Div" and not first and k.size > 1):
        # A constant that varies within each image (a position embedding) as an image of its own.
        const = constant_act(imp, k, x, imp.source_label(n, 1 if first else 0))
        return [_two_images(imp, n, x, const) if first else _two_images(imp, n, const, x)]
    if op == "Div" and not first:  # s/x = (x/s)⁻¹
        if float(k.ravel()[0]) == 0:
            raise Unsupported("of zero by a tensor is not supported")
        return _neuron(imp, n, x, "power", a=0.0, b=1.0 / float(k.ravel()[0]), c=-1.0)
    scale, shift = _affine(op, np.float64(k.ravel()[0]) if k.size == 1 else k.ravel(), first)
    return [_scale_shift(imp, imp.label(n.name or op), x, scale, shift)]


def where(imp, n) -> list:
    """Where(condition, x, y) with a constant condition (masked_fill of attention's scores):
    x·c + y·(1 − c), each branch computed or a constant. The masks and the constant part are
    frozen images of their own (constant_act, which takes ±∞ as ±65504). A computed branch the
    other fills only with ±∞ is added to it unmasked: masked_fill(−∞) before a softmax, whose
    exponential of a score less 65504 is 0 as it is of −∞."""
    cond = imp.get(n.input[0])
    if isinstance(cond, (Act, Filled)):
        raise Unsupported("with a computed condition is not supported")
    c = np.asarray(cond, bool)
    branches = [imp.get(n.input[1]), imp.get(n.input[2])]
    if any(isinstance(b, Filled) for b in branches):
        raise Unsupported("with a batch-sized constant branch is not supported")
    chosen = [c, ~c]
    fill = None
    for b, pick in zip(branches, chosen):
        if not isinstance(b, Act):
            v = np.where(pick, np.asarray(b, np.float32), np.float32(0))
            fill = v if fill is None else fill + v
    base = n.name or "Where"
    parts = []
    for i, (b, pick) in enumerate(zip(branches, chosen)):
        if not isinstance(b, Act) or not pick.any():
            continue
        other = branches[1 - i]
        if not isinstance(other, Act):
            values, where_other = np.broadcast_arrays(np.asarray(other, np.float32), ~pick)
            filled_by_infinity = bool(np.isinf(values[where_other]).all())
        else:
            filled_by_infinity = False
        if pick.all() or filled_by_infinity:
            parts.append(b)
        else:
            mask = constant_act(imp, pick.astype(np.float32), b, imp.label(base + "_mask"), frozen=True)
            parts.append(_two_images(imp, n, b, mask, Multiplication))
    if not parts:
        raise Unsupported("whose condition never picks the computed tensor is not supported")
    out = parts[0]
    for p in parts[1:]:
        out = _two_images(imp, n, out, p, Addition)
    if fill is not None and np.any(fill != 0):
        out = _two_images(imp, n, out, constant_act(imp, fill, out, imp.label(base + "_fill"), frozen=True), Addition)
    return [out]


def _per_channel(x: Act, k: np.ndarray) -> bool:
    """Whether the constant k is a scalar or holds one value per channel of x."""
    if k.size == 1:
        return True
    dims = [1] * (len(x.axes) - k.ndim) + list(k.shape)
    varying = [i for i, d in enumerate(dims) if d > 1]
    return len(varying) == 1 and x.entries()[varying[0]] == x.channels


def _scale_shift(imp, label: str, x: Act, scale, shift) -> Act:
    """scale·x + shift: a linear neuron for scalars; for one value per channel a 1×1 depthwise
    convolution whose weights (a data source labelled `label`) train like any others."""
    if np.ndim(scale) == 0:
        node = Neuron(x.image, "linear", a=float(scale), b=float(shift), label=label)
        return Act(node, x.shape, x.axes, x.split)
    c = x.shape[0]
    ds = ArrayDataSource(ConvolutionDescriptor(1, c, c, groups=c), weights=np.reshape(scale, (c, 1, 1, 1)),
                         biases=shift, label=label)
    return Act(Convolution(x.image, ds, label=label), x.shape, x.axes, x.split)


def prelu(imp, n) -> list:
    """max(x, 0) + slope·min(x, 0): a slope per channel is a depthwise convolution's data source
    labelled from its initializer, so it fine-tunes; one shared slope is a fixed linear neuron."""
    x, slope = imp.act(n), np.asarray(imp.const(n, 1), np.float32)
    if not _per_channel(x, slope):
        raise Unsupported(f"with slopes of shape {slope.shape} over a tensor lying as {x.describe()}: only one "
                          "slope or one per channel is supported")
    source = imp.source_label(n)  # first, so that the slopes keep their initializer's name
    positive = Neuron(x.image, "relu", label=imp.label(source + "_positive"))
    negative = Subtraction(x.image, positive, label=imp.label(source + "_negative"))
    scale = np.float64(slope.ravel()[0]) if slope.size == 1 else slope.ravel()
    scaled = _scale_shift(imp, source, Act(negative, x.shape, x.axes, x.split), scale, np.zeros_like(scale))
    node = Addition(positive, scaled.image, label=imp.label(n.name or "PRelu"))
    return [Act(node, x.shape, x.axes, x.split)]


def _affine(op: str, v, first: bool) -> tuple:
    """x op v (or v op x, where not `first`) as scale·x + shift: v a scalar or one value per channel."""
    if op == "Add":
        return np.ones_like(v), v
    if op == "Sub":
        return (np.ones_like(v), -v) if first else (-np.ones_like(v), v)
    if op == "Mul":
        return v, np.zeros_like(v)
    if np.any(v == 0):
        raise Unsupported("by a constant holding zeros is not supported")
    return 1.0 / v, np.zeros_like(v)


def total(imp, n) -> list:
    """Sum and Mean of any number of computed tensors: additions in turn (Mean then scales by 1/k)."""
    xs = [imp.get(name) for name in n.input]
    if not all(isinstance(x, Act) for x in xs):
        raise Unsupported("of constants is not supported")
    out = xs[0]
    for x in xs[1:]:
        out = _two_images(imp, n, out, x, Addition)
    if n.op_type == "Mean" and len(xs) > 1:
        return _neuron(imp, n, out, "linear", a=1.0 / len(xs), b=0.0)
    return [out]


def _two_images(imp, n, p: Act, q: Act, kind=None) -> Act:
    try:
        return _combined(imp, n, p, q, kind)
    except Unsupported:  # one value per image spread over channels that lie otherwise: broadcast it
        if p.repeats is None and q.repeats is None:
            raise
        return _combined(imp, n, p.repeats or p, q.repeats or q, kind)


def _entry(x: Act, e: tuple) -> tuple:
    """An axis's atoms, all the channels as ("C",) whatever their split into D and E."""
    ne = x.norm(e)
    return ("C",) if ne and ne == x.channels else ne


def _whole_channels(x: Act) -> bool:
    """Whether the channels lie only whole along single axes (their split then does not matter)."""
    return all(_entry(x, e) == ("C",) or not {"D", "E"} & set(x.norm(e)) for e in x.axes)


def _combined(imp, n, p: Act, q: Act, kind) -> Act:
    rank = max(len(p.axes), len(q.axes))
    pa, qa = [()] * (rank - len(p.axes)) + list(p.axes), [()] * (rank - len(q.axes)) + list(q.axes)
    out = []
    for e, f in zip(pa, qa):
        ne, nf = _entry(p, e), _entry(q, f)
        if ne == ("C",) and nf in (ne, ()) or nf == ("C",) and not ne:
            out.append(("D", "E"))
        elif ne == nf or not nf:
            out.append(e)
        elif not ne:
            out.append(f)
        else:
            raise Unsupported(f"of tensors lying as {p.describe()} and {q.describe()} is not supported")
    atoms = [a for e in out for a in p.norm(e) or q.norm(e)]
    if len(set(atoms)) != len(atoms) or (p.split != q.split and not (_whole_channels(p) and _whole_channels(q))):
        raise Unsupported(f"of tensors lying as {p.describe()} and {q.describe()} is not supported")
    node = (kind or ARITHMETIC[n.op_type])(p.image, q.image, label=imp.label(n.name or n.op_type))
    return Act(node, infer(node, [p, q]), tuple(out), p.split)


# --- normalization -------------------------------------------------------------------------

def batch_norm(imp, n) -> list:
    x = imp.act(n)
    x.spatial_form("BatchNormalization")
    a = imp.attrs(n)
    if a.get("training_mode", 0):
        raise Unsupported("in training mode is not supported")
    scale, bias, mean, var = (imp.const(n, i) for i in range(1, 5))
    for what, v in zip(("scale", "B", "input_mean", "input_var"), (scale, bias, mean, var)):
        if v.shape != (x.shape[0],):
            raise ValueError(f"{what} of shape {list(v.shape)} where {x.shape[0]} channels want [{x.shape[0]}]")
    label = imp.source_label(n)
    ds = ArrayDataSource(NormalizationDescriptor(x.shape[0]), label=label,
                         tensors={"gamma": scale, "beta": bias, "mean": mean, "variance": var})
    node = BatchNormalization(x.image, ds, epsilon=a.get("epsilon", 1e-5), momentum=1.0 - a.get("momentum", 0.9),
                              label=label)
    return [Act(node, x.shape, x.axes), unused("batch statistics"), unused("batch statistics")]


def _norm_source(imp, n, c: int, gamma, beta) -> ArrayDataSource:
    return ArrayDataSource(NormalizationDescriptor(c, statistics=False), label=imp.source_label(n),
                           tensors={"gamma": np.asarray(gamma, np.float32), "beta": np.asarray(beta, np.float32)})


def instance_norm(imp, n) -> list:
    x, scale, bias = imp.act(n), imp.const(n, 1), imp.const(n, 2)
    eps = imp.attrs(n).get("epsilon", 1e-5)
    e = x.entries()
    c = x.shape[0]
    try:
        x.spatial_form("InstanceNormalization")
        ds = _norm_source(imp, n, c, scale, bias)
        node = InstanceNormalization(x.image, ds, epsilon=eps, label=ds.label())
    except ValueError:  # (N, G, C/G·H·W): each group of channels normalized, group normalization
        groups = x.split if e[1] == ("D",) else 1 if e[1] == () else 0
        rest = [a for entry in e[2:] for a in entry]
        if not groups or rest != [a for a in ("E", "H", "W") if a in rest] or scale.size != groups:
            raise Unsupported(f"over a tensor lying as {x.describe()} is not supported") from None
        ds = _norm_source(imp, n, c, np.repeat(scale, c // groups), np.repeat(bias, c // groups))
        node = GroupNormalization(x.image, groups, ds, epsilon=eps, label=ds.label())
    return [Act(node, x.shape, x.axes, x.split)]


def group_norm(imp, n) -> list:
    x, scale, bias = imp.act(n), imp.const(n, 1), imp.const(n, 2)
    x.spatial_form("GroupNormalization")
    a = imp.attrs(n)
    g, c = a["num_groups"], x.shape[0]
    if scale.size == g and g != c:  # opsets 18–20: one value per group
        scale, bias = np.repeat(scale, c // g), np.repeat(bias, c // g)
    ds = _norm_source(imp, n, c, scale, bias)
    node = GroupNormalization(x.image, g, ds, epsilon=a.get("epsilon", 1e-5), label=ds.label())
    return [Act(node, x.shape, x.axes)]


def layer_norm(imp, n) -> list:
    x, scale = imp.act(n), imp.const(n, 1)
    bias = imp.const(n, 2, optional=True)
    bias = np.zeros_like(scale) if bias is None else bias
    a = imp.attrs(n)
    axis = in_range(a.get("axis", -1), len(x.axes))
    normalized = x.dims()[axis:]
    for t, what in ((scale, "scale"), (bias, "bias")):
        if t.ndim > len(normalized) or any(s != 1 and s != d for s, d in zip(t.shape[::-1], normalized[::-1])):
            raise ValueError(f"{what} of shape {list(t.shape)} does not broadcast to the normalized dims {normalized}")
    e = x.entries()
    c = x.shape[0]
    eps = a.get("epsilon", 1e-5)
    if e[axis:] == [x.channels] and scale.size == c:
        over = "c"
    else:
        x.spatial_form("LayerNormalization")
        per_channel = scale.reshape(c, -1)
        if axis != 1 or (per_channel != per_channel[:, :1]).any():
            raise Unsupported(f"over axis {axis} of a tensor lying as {x.describe()} is not supported")
        over, scale, bias = "chw", per_channel[:, 0], np.broadcast_to(bias, scale.shape).reshape(c, -1)[:, 0]
    ds = _norm_source(imp, n, c, scale.ravel(), bias.ravel())
    node = LayerNormalization(x.image, ds, epsilon=eps, over=over, label=ds.label())
    return [Act(node, x.shape, x.axes, x.split), unused("the mean"), unused("the inverse deviation")]


def local_response_norm(imp, n) -> list:
    """LRN: x / (bias + α/size · Σ x²)^β, the sum over `size` channels about each. The sum is a
    1×1 convolution by a fixed band of ones (its source frozen, so fine-tuning leaves it) of x·x,
    the divisor a power neuron: kernels every backend has, forward and gradient."""
    x = imp.act(n)
    x.spatial_form("LRN")
    a = imp.attrs(n)
    size, c = a["size"], x.shape[0]
    if size < 1:
        raise Unsupported(f"with size {size} is not supported")
    below = (size - 1) // 2  # the window's channels below each; the rest, ⌈(size − 1)/2⌉, above
    i = np.arange(c)
    band = ((i[None, :] >= i[:, None] - below) & (i[None, :] <= i[:, None] + size - 1 - below)).astype(np.float32)
    label = imp.source_label(n)
    squares = Multiplication(x.image, x.image, label=imp.label(label + "_squares"))
    sums = fixed_map(squares, band, label)
    divisor = Neuron(sums, "power", a=float(a.get("bias", 1.0)), b=float(a.get("alpha", 1e-4)) / size,
                     c=-float(a.get("beta", 0.75)), label=imp.label(label + "_scale"))
    node = Multiplication(x.image, divisor, label=imp.label(n.name or "LRN"))
    return [Act(node, x.shape, x.axes, x.split)]


def softmax(imp, n) -> list:
    x = imp.act(n)
    rank = len(x.axes)
    axis = in_range(imp.attrs(n).get("axis", -1 if imp.opset >= 13 else 1), rank)
    e = x.entries()
    over = e[axis] if imp.opset >= 13 else tuple(a for entry in e[axis:] for a in entry)
    groups = x.split if over == ("E",) and x.split > 1 else 1  # over each head's channels
    if (over != x.channels or not over) and groups == 1:
        raise Unsupported(f"over axis {axis} of a tensor lying as {x.describe()}: only over the channels "
                          "or over each head's")
    node = (SoftMax if n.op_type == "Softmax" else LogSoftMax)(x.image, groups=groups,
                                                               label=imp.label(n.name or n.op_type))
    return [Act(node, x.shape, x.axes, x.split)]


def dropout(imp, n) -> list:
    x = imp.act(n)
    ratio = imp.attrs(n).get("ratio", 0.5)
    if len(n.input) > 1 and n.input[1]:
        ratio = float(imp.const(n, 1))
    if len(n.input) > 2 and n.input[2] and bool(imp.const(n, 2)):
        raise Unsupported("in training mode is not supported")
    if ratio == 0:
        return [x, unused("a dropout mask")]
    node = Dropout(x.image, keep_probability=1.0 - ratio, label=imp.label(n.name or "dropout"))
    return [Act(node, x.shape, x.axes, x.split), unused("a dropout mask")]
