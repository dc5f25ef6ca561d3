"""ONNX import of attention's forms, built by hand against onnxruntime: channels split three
ways and picked, products of two tensors in either layout, constants added and masked, a
MatMul and its bias as one product."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from test_onnx import one_input_model, onnxruntime  # noqa: E402

import nngraph as ng  # noqa: E402
import nngraph.onnx as ngx  # noqa: E402


def _tokens(rng, channels=12, length=5):
    """Tokens (N, L, C) (an input the importer reads as a sequence: C channels along L pixels)."""
    return [helper.make_node("Identity", ["x"], ["t"])], rng.standard_normal((3, length, channels))


@pytest.mark.parametrize("pick", ["Gather", "Split", "Slice"])
def test_channels_split_three_ways_then_picked(pick, device, rng):
    """A fused projection's (N, L, 3·C) reshaped (N, L, 3, heads, d), moved (3, N, heads, L, d)
    and picked apart (Gather as TorchScript writes unbind, Slice as dynamo does, or Split): each
    part a crop of the channels; the parts' product q·kᵀ with a softmax, against onnxruntime."""
    nodes, x = _tokens(rng)
    consts = {"shape": np.array([0, 0, 3, 2, 2], np.int64)}
    nodes += [helper.make_node("Reshape", ["t", "shape"], ["r"]),
              helper.make_node("Transpose", ["r"], ["p"], perm=[2, 0, 3, 1, 4])]
    if pick == "Gather":
        for i, name in enumerate("qkv"):
            consts[f"i{i}"] = np.array(i, np.int64)
            nodes.append(helper.make_node("Gather", ["p", f"i{i}"], [name], axis=0))
    else:
        if pick == "Split":
            consts["parts"] = np.array([1, 1, 1], np.int64)
            nodes.append(helper.make_node("Split", ["p", "parts"], ["q1", "k1", "v1"], axis=0))
        else:
            for i, name in enumerate("qkv"):
                consts[f"s{i}"], consts[f"e{i}"] = np.array([i], np.int64), np.array([i + 1], np.int64)
                nodes.append(helper.make_node("Slice", ["p", f"s{i}", f"e{i}", "zero"], [name + "1"]))
            consts["zero"] = np.array([0], np.int64)
        consts["axis0"] = np.array([0], np.int64)
        nodes += [helper.make_node("Squeeze", [n + "1", "axis0"], [n]) for n in "qkv"]
    nodes += [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Softmax", ["s"], ["a"], axis=-1),
              helper.make_node("MatMul", ["a", "v"], ["y"])]
    model = one_input_model(nodes, ["N", 5, 12], ["N", 2, 5, 2], consts)
    x = x.astype(np.float32)
    want = onnxruntime(model, x)
    got = ngx.run(ngx.load(model, device=device), [x])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_squeeze_without_axes_of_channels_split_three_ways_is_refused(rng):
    nodes, _ = _tokens(rng)
    nodes += [helper.make_node("Reshape", ["t", "shape"], ["r"]), helper.make_node("Squeeze", ["r"], ["y"])]
    model = one_input_model(nodes, ["N", 5, 12], ["N", 5, 3, 2, 2], {"shape": np.array([0, 0, 3, 2, 2], np.int64)})
    with pytest.raises(ng.UnsupportedError, match=r"Squeeze without axes of a tensor whose channels a Reshape split"):
        ngx.load(model)


@pytest.mark.parametrize("rows", ["channels", "pixels", "both"])
def test_products_of_two_tensors_in_either_layout(rows, device, rng):
    """MatMul of (N, heads, L, d) and (N, heads, d, L) tensors, their rows the channels or the
    pixels (both operands' rows the channels: the product laid out as ONNX writes it, else as
    its transpose), each read as it lies; and a refusal naming the node where the operands'
    batch axes differ."""
    nodes, x = _tokens(rng)
    consts = {"shape": np.array([0, 0, 3, 4], np.int64)}
    nodes += [helper.make_node("Reshape", ["t", "shape"], ["r"]),
              helper.make_node("Transpose", ["r"], ["a"], perm=[0, 2, 1, 3]),  # (N, 3, L, 4)
              helper.make_node("Sigmoid", ["a"], ["b"])]
    if rows == "channels":  # (N, 3, 4, L) · (N, 3, L, 4)
        nodes += [helper.make_node("Transpose", ["a"], ["at"], perm=[0, 1, 3, 2]),
                  helper.make_node("MatMul", ["at", "b"], ["y"])]
        dims = ["N", 3, 4, 4]
    elif rows == "pixels":  # (N, 3, L, 4) · (N, 3, 4, L)
        nodes += [helper.make_node("Transpose", ["b"], ["bt"], perm=[0, 1, 3, 2]),
                  helper.make_node("MatMul", ["a", "bt"], ["y"])]
        dims = ["N", 3, 5, 5]
    else:  # (N, 3, 4, L) · (the last product, its last axis in the channels, transposed)
        nodes += [helper.make_node("Transpose", ["b"], ["bt"], perm=[0, 1, 3, 2]),
                  helper.make_node("MatMul", ["a", "bt"], ["s"]),
                  helper.make_node("Transpose", ["s"], ["st"], perm=[0, 1, 3, 2]),
                  helper.make_node("Transpose", ["a"], ["at"], perm=[0, 1, 3, 2]),
                  helper.make_node("MatMul", ["at", "st"], ["y"])]
        dims = ["N", 3, 4, 5]
    model = one_input_model(nodes, ["N", 5, 12], dims, consts)
    x = x.astype(np.float32)
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], onnxruntime(model, x), rtol=1e-5,
                               atol=1e-6)
    bad = one_input_model(nodes[:-1] + [helper.make_node("Transpose", ["b"], ["c"], perm=[1, 0, 2, 3]),
                                        helper.make_node("MatMul", ["a", "c"], ["y"], name="scores")],
                          ["N", 5, 12], dims, consts)
    with pytest.raises(ng.UnsupportedError, match=r"\[scores\] MatMul"):
        ngx.load(bad)


def test_a_constant_that_varies_within_the_image_is_added(device, rng):
    """A position embedding (1, L, C) added to tokens, a class token (1, 1, C) expanded over the
    batch and put before them: both made for every image by a transposed convolution of a pixel
    of ones, so they are weights (labelled by their initializers)."""
    nodes, x = _tokens(rng, channels=6, length=4)
    pos, cls = rng.standard_normal((1, 5, 6)).astype(np.float32), rng.standard_normal((1, 1, 6)).astype(np.float32)
    consts = {"pos": pos, "cls": cls}
    nodes += [helper.make_node("Shape", ["t"], ["shape"]), helper.make_node("Gather", ["shape", "zero"], ["n"]),
              helper.make_node("Concat", ["n", "ones"], ["to"], axis=0),
              helper.make_node("Expand", ["cls", "to"], ["c"]), helper.make_node("Concat", ["c", "t"], ["j"], axis=1),
              helper.make_node("Add", ["j", "pos"], ["y"])]
    consts.update(zero=np.array([0], np.int64), ones=np.array([1, 6], np.int64))
    model = one_input_model(nodes, ["N", 4, 6], ["N", 5, 6], consts)
    x = x.astype(np.float32)
    graph = ngx.load(model, device=device)
    got = ngx.run(graph, [x])[0]
    want = np.concatenate([np.broadcast_to(cls, (3, 1, 6)), x], axis=1) + pos
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(onnxruntime(model, x), want, rtol=1e-6, atol=1e-6)
    assert {"pos", "cls"} <= {ds.label() for ds in graph.data_sources}


@pytest.mark.parametrize("form", ["fill", "fill_first", "two_tensors", "additive"])
def test_where_and_masks_of_constants(form, device, rng):
    """Where with a constant condition: a finite fill (either branch), two computed branches,
    and a causal mask of −∞ (masked_fill's Where, and the additive mask TorchScript folds it to)
    before a softmax, against onnxruntime; the masks are frozen data sources."""
    nodes, x = _tokens(rng, channels=5, length=5)
    x = x.astype(np.float32)
    upper = np.triu(np.ones((5, 5), bool), 1)  # tokens along L, the mask over (L, C)
    consts = {"c": upper}
    if form == "fill":
        consts["v"] = np.array(2.5, np.float32)
        nodes += [helper.make_node("Where", ["c", "v", "t"], ["y"])]
        want = np.where(upper, 2.5, x)
    elif form == "fill_first":
        consts["v"] = rng.standard_normal((5, 5)).astype(np.float32)
        nodes += [helper.make_node("Where", ["c", "t", "v"], ["y"])]
        want = np.where(upper, x, consts["v"])
    elif form == "two_tensors":
        nodes += [helper.make_node("Sigmoid", ["t"], ["s"]), helper.make_node("Where", ["c", "t", "s"], ["y"])]
        want = np.where(upper, x, 1 / (1 + np.exp(-x)))
    else:
        consts["m"] = np.where(upper, -np.inf, 0).astype(np.float32)
        consts["v"] = np.array(-np.inf, np.float32)
        nodes += [helper.make_node("Add", ["t", "m"], ["a"]), helper.make_node("Where", ["c", "v", "t"], ["w"]),
                  helper.make_node("Softmax", ["a"], ["sa"], axis=-1), helper.make_node("Softmax", ["w"], ["sw"],
                                                                                     axis=-1),
                  helper.make_node("Sub", ["sa", "sw"], ["d"]), helper.make_node("Add", ["sa", "d"], ["y"])]
        e = np.exp(np.where(upper, -np.inf, x) - np.where(upper, -np.inf, x).max(-1, keepdims=True))
        want = e / e.sum(-1, keepdims=True)
    model = one_input_model(nodes, ["N", 5, 5], ["N", 5, 5], consts)
    graph = ngx.load(model, device=device)
    np.testing.assert_allclose(ngx.run(graph, [x])[0], want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(onnxruntime(model, x), want, rtol=1e-6, atol=1e-6)
    masks = [ds for ds in graph.data_sources if "mask" in ds.label() or "fill" in ds.label() or ds.label() == "m"]
    assert masks and all(ds.frozen == ["weights"] for ds in masks)


def test_where_with_a_computed_condition_is_refused(rng):
    """Only constant conditions (masks) are taken: a comparison of computed tensors is refused by name."""
    nodes, _ = _tokens(rng, channels=5, length=5)
    nodes += [helper.make_node("Greater", ["t", "z"], ["c"], name="compare"),
              helper.make_node("Where", ["c", "t", "z"], ["y"])]
    model = one_input_model(nodes, ["N", 5, 5], ["N", 5, 5], {"z": np.zeros((), np.float32)})
    with pytest.raises(ng.UnsupportedError, match=r"\[compare\] Greater is not supported"):
        ngx.load(model)


def test_a_constant_holding_nan_is_refused(rng):
    nodes, _ = _tokens(rng, channels=5, length=5)
    nodes += [helper.make_node("Add", ["t", "k"], ["y"])]
    model = one_input_model(nodes, ["N", 5, 5], ["N", 5, 5], {"k": np.full((5, 5), np.nan, np.float32)})
    with pytest.raises(ng.UnsupportedError, match=r"Add with a constant holding NaN is not supported"):
        ngx.load(model)


@pytest.mark.parametrize("bias_first", [False, True])
def test_a_matmul_and_its_bias_are_one_product(bias_first, device, rng):
    """MatMul by weights, then Add of a bias of its output size (either operand order): one product
    with its bias, labelled by the bias's initializer; a MatMul whose output another node reads
    too keeps its Add apart."""
    nodes, x = _tokens(rng, channels=6, length=4)
    w, b = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    consts = {"val_3": w, "fc.bias": b}
    nodes += [helper.make_node("MatMul", ["t", "val_3"], ["m"]),
              helper.make_node("Add", ["fc.bias", "m"] if bias_first else ["m", "fc.bias"], ["y"])]
    model = one_input_model(nodes, ["N", 4, 6], ["N", 4, 5], consts)
    x = x.astype(np.float32)
    graph = ngx.load(model, device=device)
    np.testing.assert_allclose(ngx.run(graph, [x])[0], x @ w + b, rtol=1e-5, atol=1e-5)
    assert [ds.label() for ds in graph.data_sources] == ["fc"]
    shared = one_input_model(nodes + [helper.make_node("Relu", ["m"], ["z"])], ["N", 4, 6], ["N", 4, 5], consts)
    shared.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 4, 5]))
    outs = ngx.run(ngx.load(shared, device=device), [x])
    np.testing.assert_allclose(outs[0], x @ w + b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs[1], np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)
