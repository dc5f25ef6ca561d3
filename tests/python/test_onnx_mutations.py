"""Models broken on purpose: two small networks' attributes, initializers and wiring changed at
random (seeded). Each must either fail to import with an error naming what is wrong, or run and
agree with onnxruntime wherever onnxruntime runs it too; never a crash or another exception."""

import random

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import nngraph as ng  # noqa: E402
import nngraph.onnx as ngx  # noqa: E402


def network() -> onnx.ModelProto:
    """Conv → batch norm → relu → max pool → a transpose there and back → split and concat →
    flatten → Gemm → softmax: many of the importer's handlers and attributes, for (N, 3, 8, 8)."""
    rng = np.random.default_rng(0)
    inits = {"w": rng.standard_normal((4, 3, 3, 3)), "b": rng.standard_normal(4),
             "scale": rng.uniform(0.5, 1.5, 4), "shift": rng.standard_normal(4), "mean": rng.standard_normal(4),
             "var": rng.uniform(0.5, 2, 4), "fc": rng.standard_normal((5, 64)), "fcb": rng.standard_normal(5),
             "parts": np.array([1, 3], np.int64)}
    h = helper.make_node
    nodes = [h("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
             h("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["n"], name="norm", epsilon=1e-5),
             h("Relu", ["n"], ["r"], name="relu"),
             h("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2], ceil_mode=0),
             h("Transpose", ["p"], ["t"], name="to_last", perm=[0, 2, 3, 1]),
             h("Transpose", ["t"], ["u"], name="to_first", perm=[0, 3, 1, 2]),
             h("Split", ["u", "parts"], ["s1", "s2"], name="split", axis=1),
             h("Concat", ["s2", "s1"], ["k"], name="concat", axis=1),
             h("Flatten", ["k"], ["f"], name="flatten", axis=1),
             h("Gemm", ["f", "fc", "fcb"], ["g"], name="fc", transB=1, alpha=0.5, beta=1.0),
             h("Softmax", ["g"], ["y"], name="softmax", axis=-1)]
    graph = helper.make_graph(nodes, "mutant", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
                              [numpy_helper.from_array(np.asarray(v, np.float32 if v.dtype.kind == "f" else v.dtype), k)
                               for k, v in inits.items()])
    opsets = [helper.make_opsetid("", 17)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))


def attention() -> onnx.ModelProto:
    """Self-attention over (N, 5, 8) sequences → residual → layer norm → mean over time → Gemm:
    the products, transposes, softmax and reductions, for (N, 5, 8)."""
    rng = np.random.default_rng(1)
    weights = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)  # noqa: E731
    inits = {"wq": weights(8, 8), "wk": weights(8, 8), "wv": weights(8, 8), "scale": np.array(8 ** 0.5, np.float32),
             "gamma": rng.uniform(0.5, 1.5, 8).astype(np.float32), "beta": weights(8), "head": weights(3, 8),
             "hb": weights(3), "axes": np.array([1], np.int64)}
    h = helper.make_node
    nodes = [h("MatMul", ["x", "wq"], ["q"], name="q"), h("MatMul", ["x", "wk"], ["k"], name="k"),
             h("MatMul", ["x", "wv"], ["v"], name="v"), h("Transpose", ["k"], ["kt"], name="kt", perm=[0, 2, 1]),
             h("MatMul", ["q", "kt"], ["s"], name="scores"), h("Div", ["s", "scale"], ["sd"], name="scaled"),
             h("Softmax", ["sd"], ["p"], name="softmax", axis=-1), h("MatMul", ["p", "v"], ["a"], name="attend"),
             h("Add", ["x", "a"], ["r"], name="residual"),
             h("LayerNormalization", ["r", "gamma", "beta"], ["n"], name="norm", axis=-1, epsilon=1e-5),
             h("ReduceMean", ["n", "axes"], ["m"], name="pool", keepdims=0),
             h("Gemm", ["m", "head", "hb"], ["y"], name="head", transB=1)]
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    opsets = [helper.make_opsetid("", 18)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))


BASES = {"convolutions": (network, (2, 3, 8, 8)), "attention": (attention, (2, 5, 8))}


def mutated(base: onnx.ModelProto, rng: random.Random) -> tuple[str, onnx.ModelProto]:
    """One random change to a copy of `base`, and what it was."""
    m = onnx.ModelProto()
    m.CopyFrom(base)
    nodes, inits = m.graph.node, m.graph.initializer
    kind = rng.choice(["attribute", "initializer", "rewire", "drop"])
    node = rng.choice(nodes)
    if kind == "attribute" and node.attribute:
        a = rng.choice(node.attribute)
        if a.ints:
            a.ints[rng.randrange(len(a.ints))] = rng.choice([-5, -1, 0, 2, 3, 7])
        elif a.type == onnx.AttributeProto.INT:
            a.i = rng.choice([-5, -1, 0, 2, 3, 7])
        elif a.type == onnx.AttributeProto.FLOAT:
            a.f = rng.choice([0.0, -1.0, 1e-9, 2.0])
        return f"{node.name}.{a.name} = {helper.get_attribute_value(a)}", m
    if kind == "initializer":
        t = rng.choice(inits)
        v = numpy_helper.to_array(t)
        v = v.reshape(-1)[:-1] if rng.random() < 0.5 and v.size > 1 else v.reshape((-1,) + (1,) * rng.randrange(1, 3))
        t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(v), t.name))
        return f"{t.name} of shape {list(v.shape)}", m
    if kind == "rewire" and node.input:
        names = [o for n in nodes for o in n.output] + [t.name for t in inits] + ["x"]
        i = rng.randrange(len(node.input))
        node.input[i] = rng.choice(names)
        return f"{node.name} input {i} = {node.input[i]}", m
    if len(node.input) > 1:
        del node.input[-1]
    return f"{node.name} without its last input", m


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("name", list(BASES))
def test_mutated_models_fail_clearly_or_agree_with_onnxruntime(name, seed):
    make, shape = BASES[name]
    rng = random.Random(seed)
    base = make()
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    outcomes = {"refused": 0, "agreed": 0}
    for _ in range(25):
        what, model = mutated(base, rng)
        data = model.SerializeToString()
        try:
            ours = ngx.run(ngx.load(data), [x])[0]
        except (ng.InvalidInputError, ng.UnsupportedError) as e:
            assert str(e).startswith("["), f"{what}: the error names no node or file: {e}"
            outcomes["refused"] += 1
            continue
        try:
            session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
            want = session.run(None, {"x": x})[0]
        except Exception:
            continue  # onnxruntime refuses what we run: lenient, not wrong
        assert ours.shape == want.shape, what
        np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-6, err_msg=what)
        outcomes["agreed"] += 1
    assert outcomes["refused"] and outcomes["agreed"], outcomes  # the mutations reach both ways
