"""ONNX's edges: bad models raise naming the node and the problem, at load and at save; what a
load accepts besides (external weights, older opsets, half precision, open dims, channels-last
inputs, flattening at any axis, slices with steps)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from test_onnx import (  # noqa: E402
    digit_network,
    if_model,
    image,
    one_input_model,
    onnxruntime,
    randomize,
    recurrent_model,
    resize_model,
    small_model,
    with_constant,
)

import nngraph as ng  # noqa: E402
import nngraph.onnx as ngx  # noqa: E402


def test_bad_files_raise_clear_errors(tmp_path):
    good = small_model("Conv", (4, 3, 3, 3)).SerializeToString()
    with pytest.raises(ng.InvalidInputError, match="not a valid ONNX model"):
        ngx.load(good[:len(good) // 2])  # truncated
    (tmp_path / "x.npz").write_bytes(b"PK\x03\x04 not a model at all")
    with pytest.raises(ng.InvalidInputError, match="x.npz is not a valid ONNX model"):
        ngx.load(tmp_path / "x.npz")
    with pytest.raises(FileNotFoundError):
        ngx.load(tmp_path / "missing.onnx")
    with pytest.raises(ng.InvalidInputError, match="not a valid ONNX model.*NoSuchOp"):
        ngx.load(small_model("NoSuchOp"))
    with pytest.raises(ng.UnsupportedError, match=r"\[the_node\] Erf is not supported"):
        ngx.load(small_model("Erf"))
    with pytest.raises(ng.InvalidInputError, match=r"\[the_node\] Conv.*3 feature channels, weights expect 5"):
        ngx.load(small_model("Conv", (4, 5, 3, 3)))
    missing = small_model("Conv", (4, 3, 3, 3))
    del missing.graph.initializer[:]
    with pytest.raises(ng.InvalidInputError, match="not a valid ONNX model"):
        ngx.load(missing)
    foreign = small_model("Conv", (4, 3, 3, 3))
    foreign.graph.initializer[0].data_type = 42  # a type no onnx release defines
    with pytest.raises(ng.InvalidInputError, match="initializer 'w' cannot be read"):
        ngx.load(foreign)
    k = np.array([1, 0, 2], np.float32).reshape(3, 1, 1)
    zeros = with_constant(small_model("Div", extra_inputs=["k"]), "k", k)
    with pytest.raises(ng.UnsupportedError, match=r"\[the_node\] Div by a constant holding zeros"):
        ngx.load(zeros)


@pytest.mark.parametrize("axis", [-4, -3, -2, -1, 0, 1, 2, 3, 4])
def test_flatten_at_every_axis(axis, rng):
    """Flatten's axis in [-r, r], a negative one counting from the end (-1: all but the last axis)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Flatten", ["r"], ["f"], axis=axis),
             helper.make_node("Relu", ["f"], ["y"])]
    model = one_input_model(nodes, ["N", 3, 2, 5], ["A", "B"])
    x = rng.standard_normal((2, 3, 2, 5)).astype(np.float32)
    want = onnxruntime(model, x)
    got = ngx.run(ngx.load(model), [x])[0]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def _with_input(model, name, value):
    """`model` with constant `name` appended to its first node's inputs."""
    with_constant(model, name, value).graph.node[0].input.append(name)
    return model


def _hidden_size(model, size):
    next(a for a in model.graph.node[0].attribute if a.name == "hidden_size").i = size
    return model


def _scales(model, values):
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.asarray(values, np.float32), "given"))
    return model


def _split_model(inputs, opset=17, **initializers):
    nodes = [helper.make_node("Split", inputs, ["a", "b"], axis=1, name="split"),
             helper.make_node("Add", ["a", "b"], ["y"])]
    return one_input_model(nodes, ["N", 4, 8, 8], ["N", 2, 8, 8], initializers, opset=opset)


def _gemm_by_rows():
    nodes = [helper.make_node("Flatten", ["x"], ["f"]),
             helper.make_node("Gemm", ["f", "w", "c"], ["y"], name="the_node", transB=1)]
    return one_input_model(nodes, [2, 3, 8, 8], [2, 4], {"w": np.ones((4, 192), np.float32),
                                                          "c": np.ones((2, 1), np.float32)})


def _batch_sized_concat():
    one = numpy_helper.from_array(np.array([1.0], np.float32))
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("ConstantOfShape", ["s"], ["f"], value=one),
             helper.make_node("Concat", ["f", "k"], ["c"], axis=1, name="join"),
             helper.make_node("Add", ["x", "c"], ["y"])]
    return one_input_model(nodes, ["N", 3, 8, 8], ["N", 6, 8, 8], {"k": np.ones((2, 3, 8, 8), np.float32)})


def _batch_sized_transpose():
    one = numpy_helper.from_array(np.array([1.0], np.float32))
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("ConstantOfShape", ["s"], ["f"], value=one),
             helper.make_node("Transpose", ["f"], ["t"], perm=[0, 1, 1, 3], name="turn"),
             helper.make_node("Add", ["x", "t"], ["y"])]
    return one_input_model(nodes, ["N", 3, 8, 8], ["N", 3, 8, 8])


def _folded_pool():
    """A pooling of a 1-D constant, which ONNX's reference implementation cannot evaluate."""
    nodes = [helper.make_node("MaxPool", ["k"], ["p"], kernel_shape=[2], name="pool"),
             helper.make_node("Add", ["x", "p"], ["y"])]
    return one_input_model(nodes, ["N", 3, 8, 8], ["N", 3, 8, 8], {"k": np.ones(10, np.float32)})


def _unreadable_constant():
    value = numpy_helper.from_array(np.array([2.0], np.float32))
    value.data_type = 99  # a type no onnx release defines
    nodes = [helper.make_node("Constant", [], ["c"], value=value, name="k"), helper.make_node("Add", ["x", "c"], ["y"])]
    return one_input_model(nodes, ["N", 3, 8, 8], ["N", 3, 8, 8])


def _direction(model, value):
    next(a for a in model.graph.node[0].attribute if a.name == "direction").s = value.encode()
    return model


def _computed_sizes():
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["g"]),
             helper.make_node("Resize", ["x", "", "", "g"], ["y"], name="resize")]
    return one_input_model(nodes, ["N", 4, 8, 8], ["N", 4, "H", "W"], opset=13)


def _flatten_at(axis):
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Flatten", ["r"], ["y"], axis=axis, name="f")]
    return one_input_model(nodes, ["N", 3, 8, 8], ["A", "B"])


Invalid, Unsupported = ng.InvalidInputError, ng.UnsupportedError
RULE_BREAKERS = {  # what ONNX's checker lets through: (model, error, message)
    "flatten_axis": (lambda: _flatten_at(5), Invalid, r"\[f\] Flatten: axis 5 is outside \[-4, 4\]"),
    "flag": (lambda: small_model("MaxPool", kernel_shape=[2, 2], ceil_mode=2), Invalid,
             r"\[the_node\] MaxPool: attribute ceil_mode must be 0 or 1, got 2"),
    "kernel_shape": (lambda: small_model("Conv", (4, 3, 3, 3), kernel_shape=[5, 5]), Invalid,
                     r"\[the_node\] Conv: kernel_shape \[5, 5\] disagrees with weights"),
    "conv_bias": (lambda: _with_input(small_model("Conv", (4, 3, 3, 3)), "b", np.ones((4, 1), np.float32)), Invalid,
                  r"\[the_node\] Conv: bias of shape \[4, 1\] where 4 output"),
    "gather_index": (lambda: with_constant(small_model("Gather", extra_inputs=["i"], axis=1), "i",
                                            np.array([3, 4], np.int64)), Invalid,
                     r"\[the_node\] Gather: index 3 is outside \[-3, 2\]"),
    "perm": (lambda: small_model("Transpose", perm=[0, 2, 1, -1]), Invalid,
             r"\[the_node\] Transpose: perm \[0, 2, 1, -1\] is not an order"),
    "perm_of_constant": (_batch_sized_transpose, Invalid,
                         r"\[turn\] Transpose: perm \[0, 1, 1, 3\] is not an order"),
    "norm_scale": (lambda: with_constant(small_model("LayerNormalization", extra_inputs=["s"], axis=1), "s",
                                          np.ones((3, 8, 8, 1), np.float32)), Invalid,
                   r"LayerNormalization: scale of shape \[3, 8, 8, 1\] does not"),
    "int_operand": (lambda: with_constant(small_model("Add", extra_inputs=["k"]), "k", np.array(2, np.int64)),
                    Invalid, r"\[the_node\] Add: of a float tensor and a constant of int64"),
    "split_18": (lambda: _split_model(["x"], opset=18), Invalid,
                 r"\[split\] Split: takes a split input or num_outputs"),
    "split_sizes": (lambda: _split_model(["x", "sizes"], sizes=np.array([2, 3], np.int64)), Invalid,
                    r"\[split\] Split: split \[2, 3\] does not add up to the axis's 4"),
    "gemm_rows": (_gemm_by_rows, Unsupported, r"\[the_node\] Gemm with a bias of shape \[2, 1\]"),
    "resize_mode": (lambda: resize_model("cubik", "half_pixel", None, "scales", (14, 24)), Invalid,
                    r"\[resize\] Resize: mode 'cubik' is none of"),
    "resize_scales": (lambda: _scales(resize_model("linear", "half_pixel", None, "scales", (14, 24)), [1, 2, 2]),
                      Invalid, r"\[resize\] Resize: scales holds 3 values for 4 axes"),
    "if_condition": (lambda: if_model([helper.make_node("Constant", [], ["cond"],
                                                        value=numpy_helper.from_array(np.array([True, False])))]),
                     Invalid, r"\[choice\] If: condition holds 2 values, not one"),
    "celu_alpha": (lambda: small_model("Celu", alpha=-1.0), Unsupported,
                   r"\[the_node\] Celu with alpha -1.0 is not supported"),
    "blocksize": (lambda: small_model("DepthToSpace", blocksize=0), Invalid, r"\[the_node\] DepthToSpace: .*by zero"),
    "hidden_size": (lambda: _hidden_size(recurrent_model("GRU", rng=np.random.default_rng(0))[0], 4), Invalid,
                    r"GRU: W of shape \[1, 15, 4\], R of shape \[1, 15, 5\] and B"),
    "float_shape": (lambda: with_constant(small_model("Reshape", extra_inputs=["shape"]), "shape",
                                           np.array([0, 3, 64], np.float32)), Invalid,
                    r"\[the_node\] Reshape: to a shape of float32 values"),
    "batch_sized_concat": (_batch_sized_concat, Invalid, r"\[join\] Concat: joining constants of different values"),
    "folding": (_folded_pool, Invalid, r"\[pool\] MaxPool: ONNX's reference implementation could not evaluate"),
    "axes_matrix": (lambda: with_constant(small_model("ReduceSum", extra_inputs=["axes"]), "axes",
                                           np.array([[2, 3]], np.int64)), Invalid,
                    r"\[the_node\] ReduceSum: axes of shape \[1, 2\] and type int64, not a vector"),
    "axes_twice": (lambda: with_constant(small_model("ReduceSum", extra_inputs=["axes"]), "axes",
                                          np.array([2, -2], np.int64)), Invalid,
                   r"\[the_node\] ReduceSum: axes \[2, -2\] name an axis twice"),
    "pads": (lambda: with_constant(small_model("Pad", extra_inputs=["pads"]), "pads",
                                    np.array([0, 0, 1, 1, 0, 0, 1], np.int64)), Invalid,
             r"\[the_node\] Pad: pads \[0, 0, 1, 1, 0, 0, 1\] are not two 32-bit amounts for each of 4 axes"),
    "wide_attribute": (lambda: small_model("MaxPool", kernel_shape=[2, 2], strides=[1 << 40, 1]), Invalid,
                       r"\[the_node\] MaxPool: attribute strides holds \[1099511627776, 1\], beyond 32 bits"),
    "depth_mode": (lambda: small_model("DepthToSpace", blocksize=1, mode="BOGUS"), Invalid,
                   r"\[the_node\] DepthToSpace: mode 'BOGUS' is none of \['CRD', 'DCR'\]"),
    "auto_pad": (lambda: small_model("Conv", (4, 3, 3, 3), auto_pad="SAME"), Invalid,
                 r"\[the_node\] Conv: auto_pad 'SAME' is none of"),
    "constant_type": (_unreadable_constant, Invalid, r"\[k\] Constant: .*KeyError: 99"),
    "resize_batch": (lambda: one_input_model([helper.make_node("Resize", ["x", "", "", "given"], ["y"], name="resize")],
                                             [2, 3, 7, 12], [4, 3, 14, 24],
                                             {"given": np.array([4, 3, 14, 24], np.int64)}, opset=13),
                     Unsupported, r"\[resize\] Resize to 4 images of a batch of 2 is not supported"),
    "direction": (lambda: _direction(recurrent_model("LSTM", rng=np.random.default_rng(0))[0], "BOGUS"), Invalid,
                  r"LSTM: direction 'BOGUS' is none of"),  # read first for the input's layout
    "computed_sizes": (_computed_sizes, Unsupported, r"\[resize\] Resize to sizes computed at run time"),
    "gemm_rank": (lambda: small_model("Gemm", (4, 8), transB=1), Invalid,
                  r"\[the_node\] Gemm: multiplies matrices; A has 4 dims and B 2"),
}


@pytest.mark.parametrize("case", list(RULE_BREAKERS))
def test_models_that_break_onnx_rules_raise_naming_the_node(case):
    """Models that break ONNX's rules get an error naming the node and the rule, never a guess."""
    make, error, message = RULE_BREAKERS[case]
    with pytest.raises(error, match=message):
        ngx.load(make())


def test_weights_in_an_external_file_load_from_the_path(rng, tmp_path):
    graph = ng.Graph(digit_network())
    randomize(graph, rng)
    graph.reload_from_data_sources()
    x = rng.standard_normal((2, 1, 28, 28)).astype(np.float32)
    model = ngx.save(graph, tmp_path / "m.onnx")
    onnx.save_model(model, tmp_path / "ext.onnx", save_as_external_data=True, location="ext.data", size_threshold=0)
    assert (tmp_path / "ext.data").stat().st_size > 4 * (32 * 25 + 64 * 32 * 25)
    np.testing.assert_allclose(ngx.run(ngx.load(tmp_path / "ext.onnx"), [x])[0], graph.run(x), rtol=1e-5, atol=1e-6)
    with pytest.raises(ng.InvalidInputError, match="not a valid ONNX model.*stored in ext.data"):
        ngx.load((tmp_path / "ext.onnx").read_bytes())  # the bytes alone, without their data file




def test_export_errors_name_the_node(tmp_path):
    x = ng.ImageNode(label="x")
    with pytest.raises(ng.InvalidInputError, match="declares no shape"):
        ngx.save(ng.Graph(ng.Neuron(x, "relu")), tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()
    ngx.save(ng.Graph(ng.Neuron(x, "relu")), tmp_path / "m.onnx", input_shapes=[(2, 3, 4)])
    seq = image((4, 1, 5))
    with pytest.raises(ng.UnsupportedError, match="mgu layers have no ONNX operator"):
        ngx.save(ng.Graph(ng.RNN(seq, ng.MGU(4, 3))))
    with pytest.raises(ng.InvalidInputError, match="opset"):
        ngx.save(ng.Graph(ng.Neuron(seq, "relu")), opset=11)


def test_a_fixed_batch_flattens_by_its_size(rng):
    """`x.view(x.size(0), -1)` exported for batch 2: Reshape to [2, -1], the 2 standing for N."""
    w = rng.standard_normal((5, 60)).astype(np.float32)
    model = one_input_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Reshape", ["r", "s"], ["f"]),
                             helper.make_node("Gemm", ["f", "w"], ["y"], transB=1)], [2, 3, 4, 5], [2, 5],
                            {"s": np.array([2, -1], np.int64), "w": w})
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    want = onnxruntime(model, x)
    np.testing.assert_allclose(want, np.maximum(x, 0).reshape(2, -1) @ w.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ngx.run(ngx.load(model), [x])[0], want, rtol=1e-5, atol=1e-5)


def test_channels_last_inputs_read_through_a_transpose(device, rng):
    """(N, H, W, C) transposed to (N, C, H, W) before the first convolution, as Keras models
    export: the source is the image (C, H, W) and `run` takes the model's arrays."""
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    fw = rng.standard_normal((5, 4)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["t", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fw"], ["y"], transB=1)]
    model = one_input_model(nodes, ["N", 8, 6, 3], ["N", 5], {"w": w, "fw": fw})
    x = rng.standard_normal((2, 8, 6, 3)).astype(np.float32)
    want = onnxruntime(model, x)
    graph = ngx.load(model, device=device)
    assert graph.source_image_handles[0].shape == (3, 8, 6)
    np.testing.assert_allclose(ngx.run(graph, [x])[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(graph.run(x.transpose(0, 3, 1, 2).copy()).reshape(2, 5), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [7, 9, 10])
def test_models_of_older_opsets_are_converted(opset, device, rng):
    """The model zoo's opsets 7 to 10: raised to 11 by onnx's version converter, then imported."""
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    bn = [rng.uniform(0.5, 1.5, 4), rng.uniform(-0.5, 0.5, 4), rng.uniform(-0.5, 0.5, 4), rng.uniform(0.5, 2, 4)]
    fw = rng.standard_normal((5, 4)).astype(np.float32)
    upsample = (helper.make_node("Upsample", ["m"], ["u"], scales=[1.0, 1.0, 2.0, 2.0]) if opset < 9 else
                helper.make_node("Upsample" if opset == 9 else "Resize", ["m", "s"], ["u"]))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "b", "mu", "var"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]), helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[2, 2],
                                                                     strides=[2, 2]),
             upsample, helper.make_node("GlobalAveragePool", ["u"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["z"], transB=1), helper.make_node("Softmax", ["z"], ["y"])]
    fb = rng.uniform(-0.5, 0.5, 5)
    names = ["w", "g", "b", "mu", "var", "fw", "fb"]
    inits = [numpy_helper.from_array(a.astype(np.float32), name) for a, name in zip([w, *bn, fw, fb], names)]
    if opset >= 9:
        inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s"))
    g = helper.make_graph(nodes, "zoo", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=4 if opset < 10 else 5)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    want = onnxruntime(model, x)
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], want, rtol=1e-5, atol=1e-6)


def test_a_half_precision_model_gives_half_precision_outputs(device, rng):
    """Float16 weights, input and output: computed in float32, returned as float16."""
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float16)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    model = one_input_model(nodes, ["N", 3, 8, 8], ["N", 4, 8, 8], {"w": w}, elem=TensorProto.FLOAT16)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float16)
    want = onnxruntime(model, x)
    got = ngx.run(ngx.load(model, device=device), [x])[0]
    assert got.dtype == np.float16
    want = want.astype(np.float32)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3 * np.abs(want).max())


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1, 0], [7, 2**62], [2, 3], [3, 2]), ([0, 1], [2**62, 2**62], [-2, -1], [2, 2]), ([2], [-1], [3], [4]),
    ([-1], [-2**62], [3], [-1]), ([-1], [-2**62], [2], [-1]), ([-1, -1], [-2**62, -2**62], [2, 3], [-2, -1]),
    ([-1], [-2**62], [1], [-1]), ([0], [2**62], [1], [2]), ([4, 8], [0, 1], [1, 2], [-2, -3])])
def test_slices_with_steps(starts, ends, axes, steps, device, rng):
    """`x[..., 1:7:3, ::2]` and the like (YOLO's space-to-depth) are a crop, then a one-tap pooling,
    exact; flips (`torch.flip`, `x[..., ::-1]`) and steps along the channels (`x[:, ::2]`) pick
    rows, columns or channels by a fixed matrix along that axis."""
    consts = {k: np.array(v, np.int64) for k, v in zip("seat", [starts, ends, axes, steps])}
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Slice", ["r", "s", "e", "a", "t"], ["y"])]
    model = one_input_model(nodes, ["N", 5, 9, 11], ["N", "C", "H", "W"], consts)
    x = rng.standard_normal((2, 5, 9, 11)).astype(np.float32)
    want = onnxruntime(model, x)
    index = [slice(None)] * 4
    for s0, e0, a0, t0 in zip(starts, ends, axes, steps):
        index[a0] = slice(s0, e0, t0)
    np.testing.assert_array_equal(want, np.maximum(x, 0)[tuple(index)])
    got = ngx.run(ngx.load(model, device=device), [x])[0]
    if min(steps) > 0 and 1 not in axes:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_open_dims_are_given_at_load(rng):
    model, _ = recurrent_model("GRU", rng=rng)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "T"
    with pytest.raises(ng.UnsupportedError, match=r"input 'x' has shape \[None, None, 4\].*input_shapes"):
        ngx.load(model)
    graph = ngx.load(model, input_shapes={"x": (9, 4)})
    assert graph.source_image_handles[0].shape == (4, 1, 9)
    x = rng.standard_normal((9, 2, 4)).astype(np.float32)
    np.testing.assert_allclose(ngx.run(graph, [x])[0], onnxruntime(model, x), rtol=1e-4, atol=1e-5)


def test_run_checks_its_inputs(rng):
    graph = ngx.load(recurrent_model("GRU", rng=rng)[0])
    with pytest.raises(ng.InvalidInputError, match="takes 1 input"):
        ngx.run(graph, [])
    with pytest.raises(ng.InvalidInputError, match=r"no array for input\(s\) \['x'\]"):
        ngx.run(graph, {"y": 1})
    with pytest.raises(ng.InvalidInputError, match="made by nngraph.onnx.load"):
        ngx.run(ng.Graph(ng.Neuron(image(), "relu")), [np.zeros((1, 6, 9, 10), np.float32)])
