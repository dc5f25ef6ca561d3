"""Operator patterns imported as one node: GELU written out with Erf, as exporters write it
for opsets before 20 (x·½·(1 + erf(x/√2)), the products in either order), and a MatMul by
weights followed by the Add of a bias (a Linear layer on tokens), as one Gemm-like product."""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper


def _constants(graph) -> dict:
    """The graph's one-value constants (what GELU's pattern compares), by name."""
    out = {i.name: numpy_helper.to_array(i) for i in graph.initializer if np.prod(i.dims) == 1}
    for n in graph.node:
        if n.op_type != "Constant" or not n.attribute or n.attribute[0].name != "value":
            continue
        if np.prod(n.attribute[0].t.dims) == 1:
            try:
                out[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
            except Exception:  # unreadable: its node raises, naming itself, when imported
                continue
    return out


def fuse_gelu(graph) -> list:
    """The graph's nodes with each written-out GELU replaced by one Gelu node."""
    nodes = list(graph.node)
    consts = _constants(graph)
    producer = {o: n for n in nodes for o in n.output}
    users: dict = {}
    for n in nodes:
        for i in n.input:
            users.setdefault(i, []).append(n)
    for o in graph.output:
        users.setdefault(o.name, []).append(None)

    def is_const(name, value) -> bool:
        v = consts.get(name)
        return v is not None and v.size == 1 and abs(float(v.ravel()[0]) - value) < 1e-4 * abs(value)

    def other(node, name):
        """The input of a two-input node that is not `name`."""
        a, b = node.input
        return b if a == name else a if b == name else None

    def only_user(name, op):
        u = users.get(name, [])
        return u[0] if len(u) == 1 and u[0] is not None and u[0].op_type == op else None

    drop, replace = set(), {}
    for erf in nodes:
        if erf.op_type != "Erf":
            continue
        scaled = producer.get(erf.input[0])
        if scaled is None or len(users.get(erf.input[0], [])) != 1:
            continue
        x = None
        if scaled.op_type == "Div" and is_const(scaled.input[1], np.sqrt(2)):
            x = scaled.input[0]
        elif scaled.op_type == "Mul":
            for i in (0, 1):
                if is_const(scaled.input[1 - i], 1 / np.sqrt(2)):
                    x = scaled.input[i]
        add = only_user(erf.output[0], "Add")
        if x is None or add is None or not is_const(other(add, erf.output[0]), 1.0):
            continue
        m1 = only_user(add.output[0], "Mul")
        if m1 is None:
            continue
        first = other(m1, add.output[0])
        chain = [scaled, erf, add, m1]
        if first == x or is_const(first, 0.5):  # ((1 + erf)·x)·½ or ((1 + erf)·½)·x
            last = only_user(m1.output[0], "Mul")
            second = None if last is None else other(last, m1.output[0])
            if second is None or not (is_const(second, 0.5) if first == x else second == x):
                continue
            chain.append(last)
        else:  # (1 + erf)·(x·½)
            half, last = producer.get(first), m1
            if half is None or half.op_type != "Mul" or other(half, x) is None or \
                    not is_const(other(half, x), 0.5) or len(users.get(first, [])) != 1:
                continue
            chain.append(half)
        drop.update(id(n) for n in chain)
        replace[id(last)] = helper.make_node("Gelu", [x], list(last.output), name=(erf.name or "gelu") + "_gelu")
    return [replace.get(id(n), n) for n in nodes if id(n) in replace or id(n) not in drop]


# The attribute that marks a Gemm made here, whose first input may have any rank (a model's own
# Gemm multiplies matrices; the checker refuses the attribute in a model).
FUSED = "nngraph_fused"


def fuse_bias(graph, nodes: list) -> list:
    """`nodes` (the graph's) with each MatMul by a 2-D initializer whose only reader adds a 1-D
    initializer of its output size replaced by one Gemm of the three (the importer's Gemm reads
    any layout of its first input), named as the MatMul, so its weights keep their label."""
    shapes = {i.name: tuple(i.dims) for i in graph.initializer}
    constants = set(shapes) | {o for n in nodes if n.op_type == "Constant" for o in n.output}
    users: dict = {}
    for n in nodes:
        for i in n.input:
            users.setdefault(i, []).append(n)
    outputs = {o.name for o in graph.output}
    drop, replace = set(), {}
    for mm in nodes:
        if mm.op_type != "MatMul" or len(shapes.get(mm.input[1], ())) != 2 or mm.input[0] in constants or \
                mm.output[0] in outputs:
            continue
        u = users.get(mm.output[0], [])
        add = u[0] if len(u) == 1 and u[0].op_type == "Add" else None
        bias = None if add is None else next((i for i in add.input if i != mm.output[0]), None)
        if bias is None or shapes.get(bias) != (shapes[mm.input[1]][1],):
            continue
        drop.add(id(mm))
        replace[id(add)] = helper.make_node("Gemm", [mm.input[0], mm.input[1], bias], list(add.output),
                                           name=mm.name or "matmul", **{FUSED: 1})
    return [replace.get(id(n), n) for n in nodes if id(n) in replace or id(n) not in drop]
