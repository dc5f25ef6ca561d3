"""Recurrent layers both ways: ONNX's LSTM, GRU and RNN operators against nngraph's RNN node.

ONNX stacks each direction's gate matrices in its own order (LSTM i o f c, GRU z r h) with
separate input and recurrent biases; nngraph's layer source holds [W | U (| P)] rows in cuDNN's
order (LSTM i f g o, GRU r z n) and one bias (their sum), or one source per gate matrix where
the recurrent bias must stay apart (a GRU's reset-after candidate)."""

from __future__ import annotations

import numpy as np
from onnx import helper

from nngraph._core import (
    GRU,
    LSTM,
    RNN,
    ArrayDataSource,
    Concatenation,
    Crop,
    MatrixDescriptor,
    NeuronDescriptor,
    SingleGate,
    UnsupportedError,
)
from nngraph.onnx._layout import Act, Filled, Unsupported

ONNX_CELL = {"lstm": "LSTM", "gru": "GRU", "single_gate": "RNN"}
# Our gate index at each of ONNX's gate positions.
GATE_ORDER = {"lstm": [0, 3, 1, 2], "gru": [1, 0, 2], "single_gate": [0]}
# ONNX's default activations per direction, and which parameters each activation takes.
DEFAULTS = {"lstm": ["Sigmoid", "Tanh", "Tanh"], "gru": ["Sigmoid", "Tanh"], "single_gate": ["Tanh"]}
PARAMS = {"affine": 2, "leakyrelu": 1, "scaledtanh": 2, "hardsigmoid": 2, "elu": 1, "thresholdedrelu": 1}


def onnx_activation(n: NeuronDescriptor, where: str) -> tuple[str, tuple]:
    """ONNX's name and (alpha, beta) for a recurrent layer's neuron."""
    t, a, b = n.type, n.a, n.b
    if t == "sigmoid":
        return "Sigmoid", ()
    if t == "relu":
        return "Relu", ()
    if t == "tanh":
        return ("Tanh", ()) if (a, b) == (1.0, 1.0) else ("ScaledTanh", (a, b))
    if t == "linear":
        return "Affine", (a, b)
    if t == "leaky_relu":
        return "LeakyRelu", (a,)
    if t == "hard_sigmoid":
        return "HardSigmoid", (a, b)
    if t == "elu":
        return "Elu", (a,)
    if t == "softplus" and (a, b) == (1.0, 1.0):
        return "Softplus", ()
    raise UnsupportedError(f"[{where}] a recurrent layer's {t} neuron has no ONNX activation")


def _our_neuron(name: str, params: list) -> NeuronDescriptor:
    key = name.lower()
    simple = {"sigmoid": "sigmoid", "tanh": "tanh", "relu": "relu", "softplus": "softplus"}
    if key in simple:
        return NeuronDescriptor(simple[key])
    if key == "leakyrelu":
        return NeuronDescriptor("leaky_relu", a=params[0] if params else 0.01)
    if key == "elu":
        return NeuronDescriptor("elu", a=params[0] if params else 1.0)
    if key == "hardsigmoid":
        return NeuronDescriptor("hard_sigmoid", *(params or (0.2, 0.5)))
    if key in ("affine", "scaledtanh") and len(params) == 2:
        return NeuronDescriptor("linear" if key == "affine" else "tanh", *params)
    raise Unsupported(f"activation {name} is not supported")


def _activations(a: dict, cell: str, directions: int) -> list:
    """Our neurons per direction, alphas and betas consumed in order as ONNX does."""
    names = a.get("activations") or DEFAULTS[cell] * directions
    alphas, betas = list(a.get("activation_alpha", [])), list(a.get("activation_beta", []))
    out = []
    for name in names:
        k = PARAMS.get(name.lower(), 0)
        params = []
        if k >= 1 and alphas:
            params.append(alphas.pop(0))
        if k >= 2 and betas:
            params.append(betas.pop(0))
        out.append(_our_neuron(name, params))
    per = len(DEFAULTS[cell])
    return [out[d * per:(d + 1) * per] for d in range(directions)]


def _zero_state(v, what: str) -> None:
    if v is None:
        return
    value = v.value if isinstance(v, Filled) else v
    if isinstance(v, Act) or np.any(np.asarray(value) != 0):
        raise Unsupported(f"with a {what} other than zeros is not supported")


def import_rnn(imp, n) -> list:
    cell = {"LSTM": "lstm", "GRU": "gru", "RNN": "single_gate"}[n.op_type]
    x = imp.act(n)
    a = imp.attrs(n)
    if a.get("clip") is not None or a.get("input_forget", 0):
        raise Unsupported("with clip or input_forget is not supported")
    layout = a.get("layout", 0)
    e = x.entries()
    if len(e) != 3:
        raise Unsupported(f"reads (T, N, C) sequences; this tensor lies as {x.describe()}")
    time, batch, chan = (x.axes[0], e[1], e[2]) if layout == 0 else (x.axes[1], e[0], e[2])
    if batch != ("N",) or chan != x.channels or x.norm(time) not in ((), ("H",), ("W",), ("H", "W")):
        raise Unsupported(f"reads {'(T, N, C)' if layout == 0 else '(N, T, C)'} sequences; this tensor lies as "
                          f"{x.describe()}")
    w, r = imp.const(n, 1), imp.const(n, 2)
    b = imp.const(n, 3, optional=True) if len(n.input) > 3 and n.input[3] else None
    steps = x.shape[1] * x.shape[2]
    lens = imp.get(n.input[4]) if len(n.input) > 4 and n.input[4] else None
    if lens is not None and (not isinstance(lens, np.ndarray) or np.any(lens != steps)):
        raise Unsupported("with sequence lengths other than the whole sequence is not supported")
    for i, what in ((5, "initial state"), (6, "initial cell state")):
        if len(n.input) > i and n.input[i] and (cell == "lstm" or i == 5):
            _zero_state(imp.get(n.input[i]), what)
    p = imp.const(n, 7, optional=True) if cell == "lstm" and len(n.input) > 7 and n.input[7] else None
    directions = w.shape[0]
    hidden, inputs = r.shape[-1], w.shape[-1]
    gates = len(GATE_ORDER[cell])
    if a.get("hidden_size", hidden) != hidden or w.shape[1:] != (gates * hidden, inputs) or \
            r.shape != (directions, gates * hidden, hidden) or \
            (b is not None and b.shape != (directions, 2 * gates * hidden)):
        raise ValueError(f"W of shape {list(w.shape)}, R of shape {list(r.shape)} and B disagree with "
                         f"hidden_size {a.get('hidden_size', hidden)} and {gates} gates")
    neurons = _activations(a, cell, directions)
    base = imp.source_label(n)
    kind = a.get("direction", "forward")
    stage = []
    for d in range(directions):
        direction = "backward" if kind == "reverse" or d == 1 else "forward"
        label = base if directions == 1 else f"{base}_{direction}"
        stage.append(_descriptor(imp, cell, label, direction, w[d], r[d], None if b is None else b[d],
                                 None if p is None else p[d], neurons[d], hidden, inputs, gates,
                                 bool(a.get("linear_before_reset", 0))))
    node = RNN(x.image, [stage], label=imp.label(base))
    shape = (directions * hidden, x.shape[1], x.shape[2])
    out = (time, ("D",), ("N",), ("E",)) if layout == 0 else (("N",), time, ("D",), ("E",))
    y = Act(node, shape, out, directions)
    return [y, lambda: _final_state(imp, node, y, stage, layout), lambda: _no_cell_states()]


def _no_cell_states():
    raise Unsupported("reads an LSTM's final cell state (Y_c), which nngraph's RNN node does not give")


def _descriptor(imp, cell, label, direction, w, r, b, p, neurons, hidden, inputs, gates, reset_after):
    """One direction's RNNDescriptor from ONNX's W (G·H × I), R (G·H × H), B (2·G·H) and P (3·H)."""
    ours = [GATE_ORDER[cell].index(k) for k in range(gates)]  # ONNX position of our gate k

    def block(m, k):
        return m[ours[k] * hidden:(ours[k] + 1) * hidden]

    wb = np.zeros(gates * hidden, np.float32) if b is None else b[:gates * hidden]
    rb = np.zeros(gates * hidden, np.float32) if b is None else b[gates * hidden:]
    neuron_args = {"lstm": lambda: {"gate_neuron": neurons[0], "cell_neuron": neurons[1],
                                        "cell_to_output_neuron": neurons[2]},
                   "gru": lambda: {"gate_neuron": neurons[0], "cell_neuron": neurons[1], "reset_after": reset_after},
                   "single_gate": lambda: {"neuron": neurons[0]}}[cell]()
    make = {"lstm": LSTM, "gru": GRU, "single_gate": SingleGate}[cell]
    if cell == "gru" and reset_after and np.any(block(rb, 2) != 0):
        # The candidate's recurrent bias sits inside r⊙(Uₙh + b_hn): one source per gate matrix.
        def src(tag, m, bias, columns):
            return ArrayDataSource(MatrixDescriptor(hidden, columns), weights=np.ascontiguousarray(m), biases=bias,
                                   label=imp.label(f"{label}.{tag}"))
        names = "rzn"
        return make(inputs, hidden, direction=direction, label=label,
                    input_weights=[src("W_" + names[k], block(w, k), block(wb, k), inputs) for k in range(gates)],
                    recurrent_weights=[src("R_" + names[k], block(r, k), block(rb, k), hidden) for k in range(gates)],
                    **neuron_args)
    rows = []
    for k in range(gates):
        cols = [block(w, k), block(r, k)]
        if p is not None:  # ONNX's peepholes i, o, f; the g block's column is unused
            at = {0: 0, 1: 2, 3: 1}.get(k)
            cols.append((np.zeros(hidden, np.float32) if at is None else p[at * hidden:(at + 1) * hidden])[:, None])
        rows.append(np.concatenate(cols, axis=1))
    bias = np.concatenate([block(wb, k) + block(rb, k) for k in range(gates)])
    columns = inputs + hidden + (1 if p is not None else 0)
    ds = ArrayDataSource(MatrixDescriptor(gates * hidden, columns), weights=np.concatenate(rows), biases=bias,
                         label=imp.label(label))
    extra = {"peephole": True} if p is not None else {}
    return make(inputs, hidden, weights=ds, direction=direction, label=label, **neuron_args, **extra)


def _final_state(imp, node, y: Act, stage: list, layout: int) -> Act:
    """Y_h: each direction's state after its last step (a backward layer's is at the first position)."""
    _, h, w = y.shape
    hidden = stage[0].output_feature_channels
    parts = []
    for d, desc in enumerate(stage):
        at = (h - 1, w - 1) if desc.direction == "forward" else (0, 0)
        parts.append(Crop(node, window=(*at, 1, 1), channels=(d * hidden, hidden),
                          label=imp.label(f"{node.label}_final_{desc.direction}")))
    image = parts[0] if len(parts) == 1 else Concatenation(parts, label=imp.label(f"{node.label}_final"))
    axes = (("D",), ("N",), ("E",)) if layout == 0 else (("N",), ("D",), ("E",))
    return Act(image, (len(stage) * hidden, 1, 1), axes, len(stage))


# --- export ----------------------------------------------------------------------------------

def export_rnn(w, node, a: dict, x: str, shape: tuple) -> str:
    """Positions row by row as ONNX's time axis: (N, C, H, W) → (H·W, N, C), one ONNX
    operator per stage, and back."""
    label = node.label
    c, hh, ww = shape
    seq = w.op("Reshape", [x, w.ints(label + "_rows", [0, c, hh * ww])], label + "_rows")
    seq = w.op("Transpose", [seq], label + "_steps", perm=[2, 0, 1])
    stages = node.layers
    combine = a["combine"]
    for k, stage in enumerate(stages):
        tag = f"{label}_{k}" if len(stages) > 1 else label
        y, yh = _export_stage(w, stage, seq, tag)
        pair = len(stage) == 2
        if a["last_only"] and k == len(stages) - 1:  # Y_h (D, N, Hs) → (N, D·Hs, 1, 1)
            if pair and combine == "concatenate":
                yh = w.op("Transpose", [yh], tag + "_last_t", perm=[1, 0, 2])
                yh = w.op("Reshape", [yh, w.ints(tag + "_last_shape", [0, -1])], tag + "_last")
            elif pair:
                yh = w.axes("ReduceSum", yh, [0], tag + "_last", 13, keepdims=0)
            else:
                yh = w.axes("Squeeze", yh, [0], tag + "_last", 13)
            return w.axes("Unsqueeze", yh, [2, 3], label, 13)
        if pair and combine == "concatenate":  # Y (T, 2, N, Hs) → (T, N, 2·Hs)
            y = w.op("Transpose", [y], tag + "_pair", perm=[0, 2, 1, 3])
            seq = w.op("Reshape", [y, w.ints(tag + "_joined", [0, 0, -1])], tag + "_joined")
        elif pair:
            seq = w.axes("ReduceSum", y, [1], tag + "_seq", 13, keepdims=0)
        else:
            seq = w.axes("Squeeze", y, [1], tag + "_seq", 13)
    out = w.op("Transpose", [seq], label + "_channels", perm=[1, 2, 0])
    return w.op("Reshape", [out, w.ints(label + "_shape", [0, -1, hh, ww])], label)


def _export_stage(w, stage: list, x: str, tag: str) -> tuple[str, str]:
    d0 = stage[0]
    cell = d0.cell
    if cell not in ONNX_CELL:
        raise UnsupportedError(f"[{tag}] {cell} layers have no ONNX operator")
    if len(stage) == 2 and (stage[1].cell != cell or stage[1].output_feature_channels != d0.output_feature_channels
                            or stage[1].peephole != d0.peephole or stage[1].reset_after != d0.reset_after):
        raise UnsupportedError(f"[{tag}] a bidirectional ONNX layer needs the same cell, size and options both ways")
    ws, rs, bs, ps, acts = [], [], [], [], []
    order = GATE_ORDER[cell]
    for d in stage:
        wt, rt, wb, rb, p = _gate_matrices(d)
        ws.append(np.concatenate([wt[g] for g in order]))
        rs.append(np.concatenate([rt[g] for g in order]))
        bs.append(np.concatenate([wb[g] for g in order] + [rb[g] for g in order]))
        if p is not None:
            ps.append(p)
        acts += [onnx_activation(n, tag) for n in _neurons(d)]
    direction = "bidirectional" if len(stage) == 2 else ("forward" if d0.direction == "forward" else "reverse")
    inputs = [x, w.constant(tag + ".W", np.stack(ws)), w.constant(tag + ".R", np.stack(rs)),
              w.constant(tag + ".B", np.stack(bs))]
    if ps:
        inputs += ["", "", "", w.constant(tag + ".P", np.stack(ps))]
    attrs = {"hidden_size": d0.output_feature_channels, "direction": direction, "activations": [n for n, _ in acts]}
    alphas = [p[0] for _, p in acts if p]
    betas = [p[1] for _, p in acts if len(p) > 1]
    if alphas:
        attrs["activation_alpha"] = alphas
    if betas:
        attrs["activation_beta"] = betas
    if cell == "gru":
        attrs["linear_before_reset"] = int(d0.reset_after)
    y, yh = w.name(tag + "_Y"), w.name(tag + "_Y_h")
    w.nodes.append(helper.make_node(ONNX_CELL[cell], inputs, [y, yh], name=w.name(tag), **attrs))
    return y, yh


def _neurons(d) -> list:
    if d.cell == "lstm":
        return [d.gate_neuron, d.cell_neuron, d.cell_to_output_neuron]
    if d.cell == "gru":
        return [d.gate_neuron, d.cell_neuron]
    return [d.cell_neuron]


def _gate_matrices(d) -> tuple:
    """Per gate, in our order: W (H × I), U (H × H), input and recurrent biases (H); and the
    peepholes in ONNX's order i, o, f (3·H) or None."""
    g, h, i = d.gates, d.output_feature_channels, d.input_feature_channels
    zero = np.zeros(h, np.float32)
    eye = np.eye(h, dtype=np.float32)
    if d.layer_weights is not None:
        t = d.layer_weights.tensors()
        m = t["weights"].reshape(g * h, -1)
        width = 0 if d.use_layer_input_unit_transform else i
        wt = [eye if width == 0 else m[k * h:(k + 1) * h, :width] for k in range(g)]
        rt = [m[k * h:(k + 1) * h, width:width + h] for k in range(g)]
        b = t.get("biases")
        wb = [zero if b is None else b[k * h:(k + 1) * h] for k in range(g)]
        p = np.concatenate([m[k * h:(k + 1) * h, -1] for k in (0, 3, 1)]) if d.peephole else None
        return wt, rt, wb, [zero] * g, p

    def mats(sources):
        return [s.tensors()["weights"].reshape(h, -1) for s in sources]

    def biases(sources):
        return [zero if s.tensors().get("biases") is None else s.tensors()["biases"] for s in sources]

    unit = d.use_layer_input_unit_transform
    p = None
    if d.peephole:  # memory weights of i, f, o: diagonals
        diag = [s.tensors()["weights"].reshape(h) for s in d.memory_weights]
        p = np.concatenate([diag[0], diag[2], diag[1]])
    return ([eye] * g if unit else mats(d.input_weights), mats(d.recurrent_weights),
            [zero] * g if unit else biases(d.input_weights), biases(d.recurrent_weights), p)
