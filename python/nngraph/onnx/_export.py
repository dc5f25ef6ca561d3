"""Export: an inference graph's forward nodes as ONNX operators, weights as initializers."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from nngraph._core import Graph, InvalidInputError, NeuronDescriptor, UnsupportedError
from nngraph.onnx._layout import unique
from nngraph.onnx._rnn import export_rnn

BATCH = "N"
ARITHMETIC = {"addition": "Add", "subtraction": "Sub", "multiplication": "Mul", "division": "Div"}


class _Writer:
    """Collects nodes and initializers under unique names."""

    def __init__(self, opset: int):
        self.opset = opset
        self.nodes: list = []
        self.initializers: list = []
        self.names: set = set()

    def name(self, base: str) -> str:
        return unique(base or "value", self.names)

    def constant(self, base: str, value) -> str:
        name = self.name(base)
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def ints(self, base: str, values) -> str:
        return self.constant(base, np.asarray(values, np.int64))

    def op(self, op_type: str, inputs: list, base: str, **attrs) -> str:
        out = self.name(base)
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def scalar(self, base: str, v: float) -> str:
        return self.constant(base, np.float32(v))

    def axes(self, op_type: str, x: str, axes: list, base: str, since: int, **attrs) -> str:
        """An op taking axes as an attribute before opset `since` and as an input from it."""
        if self.opset >= since:
            return self.op(op_type, [x, self.ints(base + "_axes", axes)], base, **attrs)
        return self.op(op_type, [x], base, axes=axes, **attrs)


def export(graph: Graph, opset: int, input_shapes) -> onnx.ModelProto:
    if graph.is_training:
        graph = graph.inference()
    sources = list(graph.source_image_handles)  # held, so their ids stay theirs
    shapes = _source_shapes(sources, input_shapes)
    order = _forward_order(graph.result_images)
    w = _Writer(opset)
    names, inputs, image_shapes = {}, [], {}
    for i, (s, shape) in enumerate(zip(sources, shapes)):
        names[_key(s)] = w.name(s.label or f"input_{i}")
        image_shapes[_key(s)] = shape
        inputs.append(helper.make_tensor_value_info(names[_key(s)], TensorProto.FLOAT, [BATCH, *shape]))
    for node in order:
        srcs = node.sources
        if any(_key(s) not in names for s in srcs):
            raise InvalidInputError(f"[{node.label}] reads an image that is neither a source of the graph nor made "
                                    "by one of its nodes")
        in_shapes = [image_shapes[_key(s)] for s in srcs]
        out_shape = tuple(node.infer(in_shapes))
        names[_key(node)] = _emit(w, node, [names[_key(s)] for s in srcs], in_shapes, out_shape)
        image_shapes[_key(node)] = out_shape
    outputs = []
    for i, r in enumerate(graph.result_images):
        name = names[_key(r)]
        if name in {n.name for n in inputs} or name in {o.name for o in outputs}:
            name = w.op("Identity", [name], f"output_{i}")
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [BATCH, *image_shapes[_key(r)]]))
    model = helper.make_model(helper.make_graph(w.nodes, "nngraph", inputs, outputs, w.initializers),
                              opset_imports=[helper.make_opsetid("", opset)], producer_name="nngraph")
    model.ir_version = min(model.ir_version, onnx.helper.find_min_ir_version_for([helper.make_opsetid("", opset)]))
    return model


def _key(image_or_node):
    """A filter node's result, or a graph source, by the node or source it is: Python wrappers
    of one C++ image differ once released, those of the nodes (held in the order) do not."""
    producer = getattr(image_or_node, "producer", image_or_node)
    return ("node", id(producer)) if producer is not None else ("source", id(image_or_node))


def _source_shapes(sources: list, given) -> list:
    if given is not None:
        given = list(given)
        if len(given) != len(sources):
            raise InvalidInputError(f"[onnx] input_shapes has {len(given)} shapes for {len(sources)} graph sources")
        return [tuple(int(d) for d in s) for s in given]
    shapes = []
    for i, s in enumerate(sources):
        if s.shape is None:
            raise InvalidInputError(f"[onnx] source {i} '{s.label}' declares no shape: pass "
                                    "input_shapes=[(C, H, W), ...] or ImageNode(shape=...)")
        shapes.append(tuple(s.shape))
    return shapes


def _forward_order(results: list) -> list:
    """Filter nodes producing the results, each after its sources' producers (iteratively:
    deep networks exceed Python's recursion limit)."""
    order, done, keep = [], set(), []
    for r in results:
        stack = [(r.producer, False)]
        while stack:
            node, expanded = stack.pop()
            if node is None or id(node) in done:
                continue
            keep.append(node)  # the wrapper stays alive, so its id stays its own
            if expanded:
                done.add(id(node))
                order.append(node)
                continue
            stack.append((node, True))
            stack.extend((s.producer, False) for s in reversed(node.sources) if s.producer is not None)
    return order


def _emit(w: _Writer, node, x: list, in_shapes: list, out_shape: tuple) -> str:
    kind, label = node.kind, node.label
    a = node.attributes(in_shapes)
    if kind in ("convolution", "fully_connected", "convolution_transpose"):
        y = _convolution(w, node, kind, a, x[0], out_shape)
        return _neuron(w, a["neuron"], y, label)
    if kind == "neuron":
        return _neuron(w, a["neuron"], x[0], label)
    if kind == "pooling":
        return _pooling(w, a, x[0], label)
    if kind in ("softmax", "log_softmax"):
        return _softmax(w, kind, a["groups"], x[0], in_shapes[0], label)
    if kind == "matrix_multiplication":
        return _matrix_multiplication(w, a, x, in_shapes, out_shape, label)
    if kind == "dropout":
        return x[0]
    if kind in ("addition", "subtraction", "multiplication", "division"):
        return w.op(ARITHMETIC[kind], x, label)
    if kind == "concatenation":
        return w.op("Concat", x, label, axis=1)
    if kind == "batch_normalization":
        t = _tensors(node)
        params = [w.constant(f"{_label(node)}.{n}", t[n]) for n in ("gamma", "beta", "mean", "variance")]
        return w.op("BatchNormalization", [x[0], *params], label, epsilon=a["epsilon"], momentum=1.0 - a["momentum"])
    if kind == "group_normalization":
        return _group_normalization(w, node, a, x[0], in_shapes[0])
    if kind == "padding":
        return _padding(w, a, x[0], label)
    if kind == "upsampling":
        return _upsampling(w, a, x[0], label)
    if kind == "rnn":
        return export_rnn(w, node, a, x[0], in_shapes[0])
    if kind == "image_copy_to_matrix":
        h = x[0] if a["layout"] == "chw" else w.op("Transpose", x, label + "_hwc", perm=[0, 2, 3, 1])
        return w.op("Reshape", [h, w.ints(label + "_shape", [0, -1, 1, 1])], label)
    if kind == "matrix_copy_to_image":
        c, hh, ww = out_shape
        if a["layout"] == "chw":
            return w.op("Reshape", [x[0], w.ints(label + "_shape", [0, c, hh, ww])], label)
        h = w.op("Reshape", [x[0], w.ints(label + "_shape", [0, hh, ww, c])], label + "_hwc")
        return w.op("Transpose", [h], label, perm=[0, 3, 1, 2])
    raise UnsupportedError(f"[{label}] {kind} has no ONNX export")


def _label(node) -> str:
    sources = node.data_sources
    return sources[0].label() if sources and sources[0].label() else node.label


def _tensors(node) -> dict:
    return node.data_sources[0].tensors()


def _convolution(w: _Writer, node, kind: str, a: dict, x: str, out_shape: tuple) -> str:
    t, base = _tensors(node), _label(node)
    weights = t["weights"]
    bias = [w.constant(f"{base}.biases", t["biases"])] if t.get("biases") is not None else []
    if kind == "fully_connected":
        flat = w.op("Flatten", [x], node.label + "_flat", axis=1)
        wt = w.constant(f"{base}.weights", weights.reshape(weights.shape[0], -1))
        y = w.op("Gemm", [flat, wt, *bias], node.label + "_gemm", transB=1)
        return w.op("Reshape", [y, w.ints(node.label + "_shape", [0, out_shape[0], 1, 1])], node.label)
    top, bottom, left, right = a["padding"]
    attrs = {"kernel_shape": a["kernel"], "strides": a["stride"], "dilations": a["dilation"], "group": a["groups"],
                 "pads": [top, left, bottom, right]}
    wt = w.constant(f"{base}.weights", weights)
    if kind == "convolution_transpose":
        return w.op("ConvTranspose", [x, wt, *bias], node.label, output_padding=a["output_padding"], **attrs)
    return w.op("Conv", [x, wt, *bias], node.label, **attrs)


def _neuron(w: _Writer, n: NeuronDescriptor, x: str, label: str) -> str:
    """Operators computing neuron n of x (none for "none")."""
    t, a, b, c = n.type, n.a, n.b, n.c
    if t == "none":
        return x

    def mul(v, k, tag):
        return v if k == 1.0 else w.op("Mul", [v, w.scalar(f"{label}_{tag}", k)], f"{label}_{tag}_mul")

    def add(v, k, tag):
        return v if k == 0.0 else w.op("Add", [v, w.scalar(f"{label}_{tag}", k)], f"{label}_{tag}_add")

    simple = {"relu": "Relu", "sigmoid": "Sigmoid", "absolute": "Abs", "hard_swish": "HardSwish"}
    if t in simple:
        return w.op(simple[t], [x], label)
    if t == "leaky_relu":
        return w.op("LeakyRelu", [x], label, alpha=a)
    if t == "hard_sigmoid":
        return w.op("HardSigmoid", [x], label, alpha=a, beta=b)
    if t == "elu":
        return w.op("Elu", [x], label, alpha=a)
    if t == "tanh":
        return mul(w.op("Tanh", [mul(x, b, "b")], label + "_tanh" if a != 1.0 else label), a, "a")
    if t == "softplus":
        return mul(w.op("Softplus", [mul(x, b, "b")], label + "_softplus" if a != 1.0 else label), a, "a")
    if t == "linear":
        return add(mul(x, a, "a"), b, "b") if (a, b) != (1.0, 0.0) else w.op("Identity", [x], label)
    if t == "silu":
        return w.op("Mul", [x, w.op("Sigmoid", [mul(x, a, "a")], label + "_sigmoid")], label)
    if t in ("gelu", "gelu_tanh"):
        if w.opset >= 20:
            return w.op("Gelu", [x], label, approximate="none" if t == "gelu" else "tanh")
        if t == "gelu":  # x·½·(1 + erf(x/√2))
            e = w.op("Erf", [mul(x, 1 / np.sqrt(2), "scale")], label + "_erf")
        else:  # x·½·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
            cube = w.op("Mul", [x, w.op("Mul", [x, x], label + "_sq")], label + "_cube")
            inner = w.op("Add", [x, mul(cube, 0.044715, "k")], label + "_inner")
            e = w.op("Tanh", [mul(inner, float(np.sqrt(2 / np.pi)), "s")], label + "_tanh")
        return w.op("Mul", [x, mul(add(e, 1.0, "one"), 0.5, "half")], label)
    if t == "relun":
        h = x if a == 0.0 else w.op("LeakyRelu", [x], label + "_leaky", alpha=a)
        lo = w.scalar(label + "_min", 0.0) if a == 0.0 else ""
        return w.op("Clip", [h, lo, w.scalar(label + "_max", b)], label)
    if t == "power":
        return w.op("Pow", [add(mul(x, b, "b"), a, "a"), w.scalar(label + "_c", c)], label)
    if t == "exponential":
        z = add(mul(x, a, "a"), b, "b")
        return w.op("Exp", [z], label) if c == -1.0 else w.op("Pow", [w.scalar(label + "_c", c), z], label)
    if t == "logarithm":
        log = w.op("Log", [add(mul(x, a, "a"), b, "b")], label if c == -1.0 else label + "_ln")
        return log if c == -1.0 else mul(log, 1.0 / np.log(c), "base")
    raise UnsupportedError(f"[{label}] neuron {t} has no ONNX export")


def _pooling(w: _Writer, a: dict, x: str, label: str) -> str:
    maximum = a["mode"] == "max"
    if a["global"]:
        return w.op("GlobalMaxPool" if maximum else "GlobalAveragePool", [x], label)
    top, bottom, left, right = a["padding"]
    attrs = {"kernel_shape": a["kernel"], "strides": a["stride"], "pads": [top, left, bottom, right]}
    if a["dilation"] != [1, 1]:
        if not maximum and w.opset < 19:
            raise UnsupportedError(f"[{label}] dilated average pooling needs opset 19 or later")
        attrs["dilations"] = a["dilation"]
    if maximum:
        return w.op("MaxPool", [x], label, **attrs)
    return w.op("AveragePool", [x], label, count_include_pad=a["count_include_pad"], **attrs)


def _group_normalization(w: _Writer, node, a: dict, x: str, shape: tuple) -> str:
    label, base, t = node.label, _label(node), _tensors(node)
    c = shape[0]
    gamma, beta = (t[n].reshape(c, 1, 1) for n in ("gamma", "beta"))
    eps = a["epsilon"]
    if a["per_position"] and w.opset >= 17:  # each position over its channels: the last axis, channels-last
        last = w.op("Transpose", [x], label + "_nhwc", perm=[0, 2, 3, 1])
        norm = w.op("LayerNormalization", [last, w.constant(f"{base}.gamma", t["gamma"]),
                                           w.constant(f"{base}.beta", t["beta"])], label + "_normal", axis=-1,
                    epsilon=eps)
        return w.op("Transpose", [norm], label, perm=[0, 3, 1, 2])
    if a["per_position"]:
        mean = w.axes("ReduceMean", x, [1], label + "_mean", 18, keepdims=1)
        d = w.op("Sub", [x, mean], label + "_centred")
        var = w.axes("ReduceMean", w.op("Mul", [d, d], label + "_sq"), [1], label + "_var", 18, keepdims=1)
        dev = w.op("Sqrt", [w.op("Add", [var, w.scalar(label + "_eps", eps)], label + "_vareps")], label + "_dev")
        h = w.op("Div", [d, dev], label + "_normal")
    elif a["groups"] == c:
        return w.op("InstanceNormalization", [x, w.constant(f"{base}.gamma", t["gamma"]),
                                              w.constant(f"{base}.beta", t["beta"])], label, epsilon=eps)
    else:  # groups of channels: instance normalization of (N, G, C/G·H·W), then gamma and beta
        g = a["groups"]
        grouped = w.op("Reshape", [x, w.ints(label + "_groups", [0, g, -1])], label + "_grouped")
        normal = w.op("InstanceNormalization", [grouped, w.constant(label + "_ones", np.ones(g, np.float32)),
                                                w.constant(label + "_zeros", np.zeros(g, np.float32))],
                      label + "_normal", epsilon=eps)
        h = w.op("Reshape", [normal, w.ints(label + "_shape", [0, *shape])], label + "_ungrouped")
    scaled = w.op("Mul", [h, w.constant(f"{base}.gamma", gamma)], label + "_scaled")
    return w.op("Add", [scaled, w.constant(f"{base}.beta", beta)], label)


def _softmax(w: _Writer, kind: str, groups: int, x: str, shape: tuple, label: str) -> str:
    op = "Softmax" if kind == "softmax" else "LogSoftmax"
    if groups == 1:
        return w.op(op, [x], label, axis=1)
    c, h, wd = shape
    grouped = w.op("Reshape", [x, w.ints(label + "_groups", [0, groups, c // groups, h, wd])], label + "_grouped")
    y = w.op(op, [grouped], label + "_grouped_" + op.lower(), axis=2)
    return w.op("Reshape", [y, w.ints(label + "_shape", [0, *shape])], label)


def _matrix_multiplication(w: _Writer, a: dict, x: list, shapes: list, out_shape: tuple, label: str) -> str:
    """Each operand as (N, groups, channels in a group, pixels), then one batched MatMul of the
    product's transpose, op(right)ᵀ·op(left)ᵀ, transposed back: the order an import lays out as
    this node again (the product's last axis in the channels)."""
    g = a["groups"]
    operands = []
    for side, name, (c, h, wd) in zip(("left", "right"), x, shapes):
        m = w.op("Reshape", [name, w.ints(f"{label}_{side}_shape", [0, g, c // g, h * wd])], f"{label}_{side}")
        if not a[f"transpose_{side}"]:
            m = w.op("Transpose", [m], f"{label}_{side}_t", perm=[0, 1, 3, 2])
        operands.append(m)
    y = w.op("MatMul", operands[::-1], label + "_product")
    y = w.op("Transpose", [y], label + "_product_t", perm=[0, 1, 3, 2])
    return w.op("Reshape", [y, w.ints(label + "_shape", [0, *out_shape])], label)


def _padding(w: _Writer, a: dict, x: str, label: str) -> str:
    front, back, top, bottom, left, right = a["padding"]
    pads = w.ints(label + "_pads", [0, front, top, left, 0, back, bottom, right])
    if a["mode"] != "constant":
        return w.op("Pad", [x, pads], label, mode=a["mode"])
    return w.op("Pad", [x, pads, w.scalar(label + "_value", a["value"])], label, mode="constant")


def _upsampling(w: _Writer, a: dict, x: str, label: str) -> str:
    scales = w.constant(label + "_scales", np.array([1, 1, *a["scale"]], np.float32))
    if a["mode"] == "nearest":
        attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    else:
        attrs = {"mode": "linear",
                     "coordinate_transformation_mode": "align_corners" if a["align_corners"] else "pytorch_half_pixel"}
    return w.op("Resize", [x, "", scales], label, **attrs)
