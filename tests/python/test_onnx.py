"""ONNX export against onnxruntime (our graphs exported, run there, equal to ours; imported
back, equal again), operators built by hand against onnxruntime."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
import reference as ref  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from test_gradients import numeric_grad  # noqa: E402

import nngraph as ng  # noqa: E402
import nngraph.onnx as ngx  # noqa: E402
from nngraph import models  # noqa: E402


def source(desc, label, seed=0):
    return ng.ArrayDataSource(desc, "he", "zeros", label, seed=seed)


def randomize(graph, rng):
    """Statistics, shifts and biases that are not their defaults."""
    for ds in graph.data_sources:
        new = {}
        for k, v in ds.tensors().items():
            if v is None:
                continue
            if k == "variance":
                new[k] = rng.uniform(0.5, 2, v.shape)
            elif k in ("mean", "beta", "biases"):
                new[k] = rng.uniform(-0.5, 0.5, v.shape)
            elif k == "gamma":
                new[k] = rng.uniform(0.5, 1.5, v.shape)
        ds.set_tensors({k: v.astype(np.float32) for k, v in new.items()})


def onnxruntime(model, x):
    """onnxruntime's first output for the model (a path or a ModelProto) on its first input x."""
    what = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    s = ort.InferenceSession(what, providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: x})[0]


def digit_network():
    x = ng.ImageNode(shape=(1, 28, 28), label="digits")
    h = ng.Neuron(ng.Convolution(x, source(ng.ConvolutionDescriptor(5, 1, 32), "conv1"), padding="same"), "relu")
    h = ng.Pooling(h, "max", kernel=2)
    h = ng.Neuron(ng.Convolution(h, source(ng.ConvolutionDescriptor(5, 32, 64), "conv2"), padding="same"), "relu")
    h = ng.Pooling(h, "max", kernel=2)
    h = ng.Dropout(ng.Neuron(ng.FullyConnected(h, source(ng.ConvolutionDescriptor(7, 64, 128), "fc1")), "relu"))
    return ng.SoftMax(ng.FullyConnected(h, source(ng.ConvolutionDescriptor(1, 128, 10), "fc2")))


def image(shape=(6, 9, 10)):
    return ng.ImageNode(shape=shape, label="x")


def layers():
    """(name, result, source shape): every node kind an export writes."""
    x = image()
    conv = ng.ConvolutionDescriptor
    out = [
        ("digits", digit_network(), (1, 28, 28)),
        ("conv_grouped", ng.Convolution(x, source(conv((3, 2), 6, 4, stride=(2, 1), dilation=(1, 2), groups=2,
                                                       neuron=ng.NeuronDescriptor("relu")), "cv"), padding="full"),
         None),
        ("conv_transpose", ng.ConvolutionTranspose(x, source(conv(3, 6, 4, stride=2, transposed=True), "ct"),
                                                   padding="same"), None),
        ("conv_transpose_odd", ng.ConvolutionTranspose(
            x, source(conv((3, 2), 6, 4, stride=(2, 3), dilation=(1, 2), groups=2, transposed=True), "ct"),
            padding=(1, 0, 0, 1), output_padding=(1, 2)), None),
        ("group_norm", ng.Padding(ng.Neuron(ng.GroupNormalization(x, 3, 6), "gelu"), (1, 2, 3, 0), mode="reflect"),
         None),
        ("instance_norm", ng.Padding(ng.InstanceNormalization(x, 6), 2, mode="constant", channels=(1, 2), value=0.5),
         None),
        ("layer_norm_c", ng.Crop(ng.Neuron(ng.LayerNormalization(x, 6, over="c"), "silu"), window=(1, 2, 5, 6),
                                 channels=(1, 4)), None),
        ("layer_norm_chw", ng.Upsampling(ng.Neuron(ng.LayerNormalization(x, 6), "tanh", a=1.5, b=0.5), 2,
                                         mode="bilinear"), None),
        ("bilinear_corners", ng.Upsampling(x, (2, 3), mode="bilinear", align_corners=True), None),
        ("nearest", ng.Upsampling(ng.Neuron(x, "hard_swish"), (2, 3)), None),
        ("arithmetic", ng.Division(ng.Subtraction(ng.Addition(x, ng.Neuron(x, "sigmoid")), ng.GlobalMaxPooling(x)),
                                   ng.Multiplication(ng.Neuron(x, "exponential"), x)), None),
        ("average_pool", ng.Pooling(x, "average", kernel=3, stride=2, padding="same"), None),
        ("max_pool", ng.Pooling(x, "max", kernel=(3, 2), stride=(2, 1), padding=(1, 1, 0, 1)), None),
        ("global_pools", ng.Concatenation([ng.GlobalAveragePooling(x), ng.GlobalMaxPooling(x)]), None),
        ("log_softmax", ng.LogSoftMax(x), None),
        ("grouped_softmax", ng.SoftMax(x, groups=3), None),
        # Attention over the pixels, two heads: keysᵀ·queries, a softmax over each head's keys,
        # the values by those weights; and a product of two transposed operands.
        ("attention", ng.MatrixMultiplication(
            ng.Neuron(x, "tanh"), ng.SoftMax(ng.MatrixMultiplication(x, ng.Neuron(x, "sigmoid"), groups=2,
                                                                     transpose_left=True), groups=2), groups=2),
         None),
        ("transposed_products", ng.MatrixMultiplication(ng.Neuron(x, "sigmoid"), ng.Pooling(x, "max", kernel=(9, 5)),
                                                        groups=3, transpose_left=True, transpose_right=True), None),
        ("batch_norm", ng.Neuron(ng.BatchNormalization(x, 6), "relun"), None),
        ("edge", ng.Padding(ng.Neuron(x, "softplus"), (2, 1, 0, 3), mode="edge"), None),
        ("crop_by_padding", ng.Padding(x, (2, -1, 0, -3), value=0.25, mode="constant"), None),
        ("matrices", ng.MatrixCopyToImageNode(ng.ImageCopyToMatrixNode(x, "hwc"), (10, 6, 9)), None),
    ]
    for n, params in [("leaky_relu", {}), ("hard_sigmoid", {}), ("softplus", {"a": 2.0, "b": 0.5}), ("absolute", {}),
                      ("gelu_tanh", {}), ("elu", {"a": 0.7}), ("linear", {"a": 2.0, "b": 1.0}),
                      ("exponential", {"a": 0.5, "b": 0.1, "c": 2.0})]:
        out.append((n, ng.Neuron(x, n, **params), None))
    out.append(("power", ng.Neuron(ng.Neuron(x, "absolute"), "power", a=1.0, b=2.0, c=1.5), None))
    out.append(("logarithm", ng.Neuron(ng.Neuron(x, "absolute"), "logarithm", a=1.0, b=1.0, c=10.0), None))
    seq = image((6, 2, 7))
    for cell, make in [("lstm", ng.LSTM), ("gru", ng.GRU), ("single_gate", ng.SingleGate)]:
        out.append((f"{cell}_sequence", ng.RNN(seq, make(6, 5)), None))
        out.append((f"{cell}_stacked_last", ng.RNN(seq, [[make(6, 5), make(6, 5, direction="backward")],
                                                         make(10, 4)], output="last"), None))
        out.append((f"{cell}_summed", ng.RNN(seq, [(make(6, 5), make(6, 5, direction="backward"))], combine="sum"),
                    None))
    out.append(("gru_original", ng.RNN(seq, ng.GRU(6, 5, reset_after=False)), None))
    out.append(("lstm_peephole", ng.RNN(seq, ng.LSTM(6, 5, peephole=True)), None))
    out.append(("lstm_backward", ng.RNN(seq, ng.LSTM(6, 5, direction="backward", cell_neuron="relu")), None))
    return out


LAYERS = layers()


@pytest.mark.parametrize("name, result, shape", LAYERS, ids=[n for n, _, _ in LAYERS])
def test_export_runs_in_onnxruntime_and_imports_back(name, result, shape, device, rng, tmp_path):
    graph = ng.Graph(result, device=device)
    randomize(graph, rng)
    graph.reload_from_data_sources()
    x = rng.standard_normal((3, *graph.source_image_handles[0].shape)).astype(np.float32)
    ours = graph.run(x)
    model = ngx.save(graph, tmp_path / "m.onnx")
    assert model.graph.input[0].name == graph.source_image_handles[0].label
    tol = {"rtol": 1e-4, "atol": 1e-5 * max(1.0, np.abs(ours).max())}
    np.testing.assert_allclose(onnxruntime(tmp_path / "m.onnx", x), ours, **tol)
    back = ngx.load(tmp_path / "m.onnx", device=device)
    np.testing.assert_allclose(ngx.run(back, [x])[0], ours, **tol)


@pytest.mark.parametrize("build", [lambda: models.resnet18(classes=10, size=32, stem="cifar"),
                                   lambda: models.speedrun_net(), lambda: models.inception_v3(classes=10)],
                         ids=["resnet18", "speedrun_net", "inception_v3"])
def test_headline_networks_export(build, device, rng, tmp_path):
    net = build()
    graph = ng.Graph(net.logits, device=device)
    randomize(graph, rng)
    graph.reload_from_data_sources()
    x = rng.standard_normal((2, *net.image.shape)).astype(np.float32)
    ours = graph.run(x)
    ngx.save(graph, tmp_path / "m.onnx")
    np.testing.assert_allclose(onnxruntime(tmp_path / "m.onnx", x), ours, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ngx.run(ngx.load(tmp_path / "m.onnx", device=device), [x])[0], ours, rtol=1e-4,
                               atol=1e-4)


def test_a_training_graph_exports_its_inference_graph(rng, tmp_path):
    net = models.denoising_autoencoder()
    train = ng.Loss(net.output, ng.LossDescriptor("mean_squared_error")).training_graph(optimizer=ng.Adam(1e-3))
    x = rng.uniform(0, 1, (4, 1, 28, 28)).astype(np.float32)
    ng.fit(train, (x, x), epochs=1, batch_size=4, progress=False)  # trained weights, normalization state
    ngx.save(train, tmp_path / "ae.onnx", opset=20)
    np.testing.assert_allclose(onnxruntime(tmp_path / "ae.onnx", x), train.inference().run(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset", [13, 17, 18, 20, 21, onnx.defs.onnx_opset_version()])
def test_export_opsets(opset, rng, tmp_path):
    x = image()
    result = ng.RNN(ng.Neuron(ng.LayerNormalization(ng.GroupNormalization(x, 2, 6), 6, over="c"), "gelu"),
                    [(ng.GRU(6, 3), ng.GRU(6, 3, direction="backward"))], combine="sum", output="last")
    graph = ng.Graph(result)
    xs = rng.standard_normal((2, 6, 9, 10)).astype(np.float32)
    model = ngx.save(graph, tmp_path / "m.onnx", opset=opset)
    assert model.opset_import[0].version == opset
    try:
        theirs = onnxruntime(tmp_path / "m.onnx", xs)
    except Exception as e:  # an onnxruntime older than the onnx package reads no model of its newest opset
        assert opset > 21 and ("IR version" in str(e) or "opset" in str(e)), e
    else:
        np.testing.assert_allclose(theirs, graph.run(xs), rtol=1e-4, atol=1e-5)
    if opset >= 17:  # below, layer normalization over channels is written out in primitives
        np.testing.assert_allclose(ngx.run(ngx.load(tmp_path / "m.onnx"), [xs])[0], graph.run(xs), rtol=1e-4,
                                   atol=1e-5)


# --- recurrent operators built by hand ----------------------------------------------------------

def model_of(graph, opset: int):
    """A model of `opset` with the oldest IR version that carries it, so older runtimes read it too."""
    opsets = [helper.make_opsetid("", opset)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))


def one_input_model(nodes, x_dims, y_dims, initializers=(), opset=17, elem=TensorProto.FLOAT):
    """A model of `nodes` from input "x" to output "y" (dims as ONNX writes them, names for open ones)."""
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", elem, x_dims)],
                          [helper.make_tensor_value_info("y", elem, y_dims)],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(initializers).items()])
    return model_of(g, opset)


def recurrent_model(op, hidden=5, features=4, steps=6, direction="forward", layout=0, outputs=("Y",), rng=None,
                    peepholes=False, **attrs):
    """One LSTM/GRU/RNN operator with random weights and biases, its outputs the graph's; and the
    same operator time-major (what onnxruntime runs) where `layout` is 1."""
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    d = 2 if direction == "bidirectional" else 1
    values = {"W": rng.standard_normal((d, gates * hidden, features)), "R": rng.standard_normal((d, gates * hidden,
                                                                                                 hidden)),
              "B": rng.standard_normal((d, 2 * gates * hidden))}
    inputs = ["x", "W", "R", "B"]
    if peepholes:
        values["P"] = rng.standard_normal((d, 3 * hidden))
        inputs += ["", "", "", "P"]
    inits = [numpy_helper.from_array((v * 0.5).astype(np.float32), n) for n, v in values.items()]

    def model(layout):
        names = [{"Y": "y", "Y_h": "y_h"}[o] if o in outputs else "" for o in ("Y", "Y_h")]
        node = helper.make_node(op, inputs, names, hidden_size=hidden, direction=direction,
                                **({"layout": layout} if layout else {}), **attrs)
        x = [steps, "N", features] if layout == 0 else ["N", steps, features]
        shapes = {"y": ["T", d, "N", hidden] if layout == 0 else ["N", "T", d, hidden],
                  "y_h": [d, "N", hidden] if layout == 0 else ["N", d, hidden]}
        g = helper.make_graph([node], "rnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, shapes[n]) for n in names if n],
                              inits)
        return model_of(g, 14)

    return model(layout), model(0)


@pytest.mark.parametrize("op, kwargs", [
    ("LSTM", {}), ("LSTM", {"direction": "bidirectional"}), ("LSTM", {"direction": "reverse", "layout": 1}),
    ("LSTM", {"peepholes": True}), ("LSTM", {"outputs": ("Y_h",), "direction": "bidirectional"}),
    ("GRU", {"linear_before_reset": 1}), ("GRU", {"linear_before_reset": 0, "direction": "bidirectional"}),
    ("GRU", {"outputs": ("Y", "Y_h"), "linear_before_reset": 1, "layout": 1}),
    ("RNN", {"activations": ["Relu"]}), ("RNN", {"direction": "bidirectional", "outputs": ("Y_h",)}),
    ("LSTM", {"activations": ["HardSigmoid", "Tanh", "Tanh"], "activation_alpha": [0.3],
              "activation_beta": [0.4]}),
])
def test_recurrent_operators_against_onnxruntime(op, kwargs, device, rng):
    model, time_major = recurrent_model(op, rng=rng, **kwargs)
    x = rng.standard_normal((6, 3, 4)).astype(np.float32)  # (T, N, F)
    session = ort.InferenceSession(time_major.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": x})
    batch_first = kwargs.get("layout", 0) == 1
    if batch_first:  # Y (T, D, N, H) → (N, T, D, H); Y_h (D, N, H) → (N, D, H)
        x = x.transpose(1, 0, 2)
        expected = [e.transpose(2, 0, 1, 3) if e.ndim == 4 else e.transpose(1, 0, 2) for e in expected]
    got = ngx.run(ngx.load(model, device=device), [x])
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op, value, first", [
    ("Add", 0.0, True), ("Sub", 1.5, False), ("Mul", -2.0, True), ("Div", 4.0, True), ("Div", 2.0, False),
    ("Add", "channels", False), ("Sub", "channels", True), ("Mul", "channels", False), ("Div", "channels", True)])
def test_arithmetic_with_constants(op, value, first, device, rng):
    """A scalar or one value per channel, either side: a neuron or a depthwise 1×1 convolution."""
    k = rng.uniform(0.5, 2.0, (1, 3, 1, 1)).astype(np.float32) if value == "channels" else np.array(value, np.float32)
    inputs = ["r", "k"] if first else ["k", "r"]
    model = one_input_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node(op, inputs, ["y"])],
                            ["N", 3, 4, 5], ["N", 3, 4, 5], {"k": k})
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32) + 0.1
    want = onnxruntime(model, x)
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["Sum", "Mean"])
def test_sums_and_means_of_several_tensors(op, device, rng):
    """Sum and Mean of three computed tensors, one of them (N, C, 1, 1) broadcast over H × W."""
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["x"], ["b"]),
             helper.make_node("GlobalAveragePool", ["x"], ["c"]), helper.make_node(op, ["a", "b", "c"], ["y"])]
    model = one_input_model(nodes, ["N", 3, 4, 5], ["N", 3, 4, 5])
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    want = onnxruntime(model, x)
    total = np.maximum(x, 0) + 1 / (1 + np.exp(-x)) + x.mean((2, 3), keepdims=True)
    np.testing.assert_allclose(want, total / (3 if op == "Mean" else 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("slope_shape", [(1,), (3, 1, 1)], ids=["shared", "per_channel"])
def test_prelu_against_onnxruntime(slope_shape, device, rng):
    """PRelu as relu(x) + slope·(x − relu(x)); a slope per channel becomes a data source."""
    slope = rng.uniform(-0.8, 0.8, slope_shape).astype(np.float32)
    model = one_input_model([helper.make_node("PRelu", ["x", "act.weight"], ["y"], name="act")], ["N", 3, 4, 5],
                            ["N", 3, 4, 5], {"act.weight": slope})
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    want = onnxruntime(model, x)
    np.testing.assert_allclose(want, np.where(x > 0, x, slope * x), rtol=1e-6)
    graph = ngx.load(model, device=device)
    np.testing.assert_allclose(ngx.run(graph, [x])[0], want, rtol=1e-5, atol=1e-6)
    sources = {ds.label(): ds for ds in graph.data_sources}
    if slope.size == 1:
        assert not sources
    else:
        np.testing.assert_array_equal(sources["act"].tensors()["weights"].ravel(), slope.ravel())


def local_response_norm(x, size, alpha, beta, bias):
    """ONNX's LRN in float64: x / (bias + alpha/size · the squares summed over `size` channels)^beta."""
    x = x.astype(np.float64)
    c, below = x.shape[1], (size - 1) // 2
    sums = np.stack([(x[:, max(0, k - below):k + size - below] ** 2).sum(1) for k in range(c)], 1)
    return x / (bias + alpha / size * sums) ** beta


@pytest.mark.parametrize("size,alpha,beta,bias", [(5, 1e-4, 0.75, 1.0), (4, 0.5, 0.6, 2.0), (1, 0.3, 1.5, 0.5)])
def test_local_response_norm_against_onnxruntime(size, alpha, beta, bias, device, rng):
    """LRN (AlexNet's, GoogLeNet's) against numpy, and onnxruntime where it runs the size (odd)."""
    model = one_input_model([helper.make_node("LRN", ["x"], ["y"], name="norm1", size=size, alpha=alpha, beta=beta,
                                              bias=bias)], ["N", 7, 4, 5], ["N", 7, 4, 5])
    x = rng.standard_normal((2, 7, 4, 5)).astype(np.float32) * 2
    want = local_response_norm(x, size, alpha, beta, bias)
    if size % 2:
        np.testing.assert_allclose(onnxruntime(model, x), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], want, rtol=1e-5, atol=1e-6)


def check_a_convolution_before_fine_tunes(device, rng, nodes, after, y_dims, frozen, outputs=6):
    """A 3×3 convolution ("conv", 3 → `outputs` channels) from "x" to "h", then `nodes` from "h" to "y":
    one SGD step's change of the convolution's weights and biases equals finite differences of the
    squared error through `after` (numpy, float64, of h); the sources labelled in `frozen` stay."""
    w = (rng.standard_normal((outputs, 3, 3, 3)) / 3).astype(np.float32)
    b = rng.standard_normal(outputs).astype(np.float32)
    model = one_input_model([helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["h"], pads=[1] * 4),
                             *nodes], ["N", 3, 5, 5], ["N", *y_dims], {"conv.weight": w, "conv.bias": b})
    x = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    target = rng.standard_normal((2, *y_dims)).astype(np.float32)
    graph = ngx.load(model, device=device)
    sources = {ds.label(): ds for ds in graph.data_sources}
    kept = {label: sources[label].tensors() for label in frozen}
    train = ng.Loss(graph.result_images[0], ng.LossDescriptor("mean_squared_error", "sum")).training_graph(
        device=device, optimizer=ng.SGD(learning_rate=1.0))
    train.run(x, labels=target)

    def total(a, c):
        return ((after(ref.conv2d(x.astype(np.float64), a, c, padding="same")) - target) ** 2).sum()

    dw = w - sources["conv"].tensor("weights")
    np.testing.assert_allclose(dw, numeric_grad(lambda a: total(a, b), w), rtol=5e-3, atol=5e-3)
    np.testing.assert_allclose(b - sources["conv"].tensor("biases"), numeric_grad(lambda c: total(w, c), b),
                               rtol=5e-3, atol=5e-3)
    for label, tensors in kept.items():
        for name, v in sources[label].tensors().items():
            np.testing.assert_array_equal(v, tensors[name])


def test_a_convolution_before_a_local_response_norm_fine_tunes(device, rng):
    """The gradient through LRN reaches the convolution before it; the window's band of ones stays."""
    lrn = {"size": 3, "alpha": 0.4, "beta": 0.75, "bias": 1.5}
    check_a_convolution_before_fine_tunes(device, rng, [helper.make_node("LRN", ["h"], ["y"], name="norm", **lrn)],
                                          lambda h: local_response_norm(h, **lrn), [6, 5, 5], ["norm"])


REDUCTIONS = {"ReduceMean": np.mean, "ReduceSum": np.sum, "ReduceMax": np.max, "ReduceMin": np.min,
              "ReduceL1": lambda x, **k: np.abs(x).sum(**k), "ReduceL2": lambda x, **k: np.sqrt((x * x).sum(**k)),
              "ReduceSumSquare": lambda x, **k: (x * x).sum(**k),
              "ReduceLogSumExp": lambda x, **k: np.log(np.exp(x.astype(np.float64)).sum(**k))}


@pytest.mark.parametrize("keep", [1, 0])
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("over", [(1,), (2, 3), (1, 2, 3)], ids=["channels", "spatial", "all"])
@pytest.mark.parametrize("op", list(REDUCTIONS))
def test_reductions_over_channels_and_space(op, over, opset, keep, device, rng):
    """Every Reduce operator over the channels of (N, C, H, W) (CBAM's attention, channels-first
    layer norms, F.normalize), its spatial axes, or both (axes an input since opset 18, ReduceSum's
    since 13)."""
    as_input = opset >= 18 or op == "ReduceSum"
    inits = {"axes": np.array(over, np.int64)} if as_input else {}
    node = helper.make_node(op, ["x", "axes"] if as_input else ["x"], ["y"], keepdims=keep,
                            **({} if as_input else {"axes": list(over)}))
    x = rng.standard_normal((2, 5, 4, 3)).astype(np.float32)
    want = REDUCTIONS[op](x, axis=over, keepdims=bool(keep))
    model = one_input_model([node], ["N", 5, 4, 3], ["N", *want.shape[1:]], inits, opset=opset)
    np.testing.assert_allclose(onnxruntime(model, x), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], want, rtol=1e-5, atol=1e-5)


def test_log_sum_exp_of_values_whose_exponentials_overflow(device, rng):
    """ReduceLogSumExp subtracts the maximum first: values near 200 (e^200 is no float32) stay finite."""
    model = one_input_model([helper.make_node("ReduceLogSumExp", ["x"], ["y"], axes=[1])], ["N", 5, 4, 3],
                            ["N", 1, 4, 3], opset=13)
    x = (rng.standard_normal((2, 5, 4, 3)) * 60 + 100).astype(np.float32)
    want = REDUCTIONS["ReduceLogSumExp"](x, axis=1, keepdims=True)
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], want, rtol=1e-5)


@pytest.mark.parametrize("op,attrs,f", [
    ("Selu", {}, lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x))),
    ("Selu", {"alpha": 1.2, "gamma": 0.7}, lambda x: 0.7 * np.where(x > 0, x, 1.2 * np.expm1(x))),
    ("Celu", {"alpha": 0.6}, lambda x: np.maximum(x, 0) + np.minimum(0, 0.6 * np.expm1(x / 0.6))),
    ("Mish", {}, lambda x: x * np.tanh(np.log1p(np.exp(x))))], ids=["selu", "selu_attrs", "celu", "mish"])
def test_composite_activations(op, attrs, f, device, rng):
    """Selu, Celu and Mish (opset 18) from the neurons nngraph has, against onnxruntime and numpy."""
    model = one_input_model([helper.make_node(op, ["x"], ["y"], **attrs)], ["N", 3, 4, 5], ["N", 3, 4, 5], opset=18)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32) * 2
    want = onnxruntime(model, x)
    np.testing.assert_allclose(want, f(x.astype(np.float64)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_and_min_of_tensors_and_constants(op, device, rng):
    """Max and Min of a tensor, its sigmoid, its spatial mean (broadcast over H × W) and two scalars."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("GlobalAveragePool", ["x"], ["m"]),
             helper.make_node(op, ["x", "s", "m", "c1", "c2"], ["y"])]
    c1, c2 = np.float32(0.3), np.float32(-0.2)
    model = one_input_model(nodes, ["N", 3, 4, 5], ["N", 3, 4, 5], {"c1": c1, "c2": c2})
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    f = np.maximum if op == "Max" else np.minimum
    want = onnxruntime(model, x)
    np.testing.assert_allclose(want, f(f(f(f(x, 1 / (1 + np.exp(-x))), x.mean((2, 3), keepdims=True)), c1), c2),
                               rtol=1e-6)
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], want, rtol=1e-5, atol=1e-6)


def test_a_convolution_before_a_maximum_and_a_norm_fine_tunes(device, rng):
    """max(h, sigmoid(h)) / ‖·‖₂ over the channels (F.normalize): the gradient reaches the
    convolution through Max, ReduceL2 and the norm's Expand over the channels."""
    shape = numpy_helper.from_array(np.array([1, 6, 5, 5], np.int64))
    nodes = [helper.make_node("Sigmoid", ["h"], ["s"]), helper.make_node("Max", ["h", "s"], ["m"]),
             helper.make_node("ReduceL2", ["m"], ["l"], name="norm", axes=[1]),
             helper.make_node("Constant", [], ["shape"], value=shape),
             helper.make_node("Expand", ["l", "shape"], ["e"], name="spread"),
             helper.make_node("Div", ["m", "e"], ["y"])]

    def after(h):
        m = np.maximum(h, 1 / (1 + np.exp(-h)))
        return m / np.sqrt((m * m).sum(1, keepdims=True))

    check_a_convolution_before_fine_tunes(device, rng, nodes, after, [6, 5, 5], ["spread"])


def test_a_convolution_before_channel_reductions_fine_tunes(device, rng):
    """CBAM's spatial attention, x·sigmoid(mean over channels + max over channels): the gradient
    reaches the convolution before it through both reductions; the mean's fixed weights stay."""
    nodes = [helper.make_node("ReduceMean", ["h"], ["m"], name="mean", axes=[1]),
             helper.make_node("ReduceMax", ["h"], ["k"], name="max", axes=[1]),
             helper.make_node("Add", ["m", "k"], ["s"]), helper.make_node("Sigmoid", ["s"], ["a"]),
             helper.make_node("Mul", ["h", "a"], ["y"])]

    def after(h):
        return h / (1 + np.exp(-(h.mean(1, keepdims=True) + h.max(1, keepdims=True))))

    check_a_convolution_before_fine_tunes(device, rng, nodes, after, [6, 5, 5], ["mean"])


def depth_to_space(x, r, mode):
    """ONNX's DepthToSpace, as its specification writes it."""
    n, c, h, w = x.shape
    if mode == "DCR":
        t = x.reshape(n, r, r, c // (r * r), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (r * r), h * r, w * r)


@pytest.mark.parametrize("op,mode,r", [("DepthToSpace", "DCR", 2), ("DepthToSpace", "CRD", 2),
                                       ("DepthToSpace", "CRD", 3), ("SpaceToDepth", None, 2)])
def test_depth_to_space_and_back(op, mode, r, device, rng):
    """DepthToSpace in both orders (PyTorch's PixelShuffle is CRD) and SpaceToDepth, against
    onnxruntime and the specification's reshapes."""
    c, h, w = (2 * r * r, 3, 4) if op == "DepthToSpace" else (3, 4, 6)
    out = (c // (r * r), h * r, w * r) if op == "DepthToSpace" else (c * r * r, h // r, w // r)
    model = one_input_model([helper.make_node(op, ["x"], ["y"], blocksize=r, **({"mode": mode} if mode else {}))],
                            ["N", c, h, w], ["N", *out])
    x = rng.standard_normal((2, c, h, w)).astype(np.float32)
    want = onnxruntime(model, x)
    if op == "DepthToSpace":
        np.testing.assert_array_equal(want, depth_to_space(x, r, mode))
    else:
        np.testing.assert_array_equal(depth_to_space(want, r, "DCR"), x)
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], want, rtol=1e-6, atol=1e-6)


def test_a_convolution_before_depth_to_space_fine_tunes(device, rng):
    nodes = [helper.make_node("DepthToSpace", ["h"], ["y"], name="shuffle", blocksize=2, mode="DCR")]
    check_a_convolution_before_fine_tunes(device, rng, nodes, lambda h: depth_to_space(h, 2, "DCR"), [2, 10, 10],
                                          ["shuffle"], outputs=8)


@pytest.mark.parametrize("mode,coords,rounding,k", [
    ("nearest", "asymmetric", "floor", 2),  # F.interpolate(scale_factor=0.5)
    ("nearest", "half_pixel", "round_prefer_floor", 2), ("nearest", "half_pixel", "round_prefer_ceil", 6),
    ("nearest", "pytorch_half_pixel", "round_prefer_floor", 3), ("nearest", "half_pixel", "ceil", 6),
    ("linear", "half_pixel", None, 2), ("linear", "pytorch_half_pixel", None, 3), ("linear", "half_pixel", None, 3),
    ("linear", "pytorch_half_pixel", None, 6), ("linear", "asymmetric", None, 2)])
def test_resize_down_by_integer_factors(mode, coords, rounding, k, device, rng):
    """Resize by 1/k: a crop to the window's first tap, then a one- or two-tap average pooling at
    stride k (6 → one output pixel, where PyTorch's half pixel reads pixel 0)."""
    attrs = {"mode": mode, "coordinate_transformation_mode": coords, **({"nearest_mode": rounding} if rounding else {})}
    model = one_input_model([helper.make_node("Resize", ["x", "", "scales"], ["y"], **attrs)], ["N", 3, 12, 6],
                            ["N", 3, 12 // k, 6 // k], {"scales": np.array([1, 1, 1 / k, 1 / k], np.float32)})
    x = rng.standard_normal((2, 3, 12, 6)).astype(np.float32)
    want = onnxruntime(model, x)
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], want, rtol=1e-5, atol=1e-6)


def test_values_moved_other_than_by_blocks_are_refused():
    """Reshape → Transpose → Reshape that reorders rows (even rows, then odd) makes no image a
    convolution by one-hot weights does: the first Reshape's refusal names it."""
    shapes = {"split": np.array([0, 3, 2, 2, 5], np.int64), "back": np.array([0, 3, 4, 5], np.int64)}
    nodes = [helper.make_node("Reshape", ["x", "split"], ["a"], name="rows"),
             helper.make_node("Transpose", ["a"], ["b"], perm=[0, 1, 3, 2, 4]),
             helper.make_node("Reshape", ["b", "back"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    model = one_input_model(nodes, ["N", 3, 4, 5], ["N", 3, 4, 5], shapes)
    why = r"\[y\] Relu reads values that \[rows\] Reshape moves where no image holds them \(cannot reshape "
    with pytest.raises(ng.UnsupportedError, match=why + r"\(N, E, H, W\) to \[N, 3, 2, 2, 5\]"):
        ngx.load(model)


RESIZES = [  # mode, coordinate transformation, nearest mode, scales or sizes, output (H, W) from 7 × 12
    ("linear", "half_pixel", None, "sizes", (10, 17)),  # interpolate(size=...), bilinear
    ("linear", "align_corners", None, "sizes", (3, 30)),
    ("linear", "pytorch_half_pixel", None, "scales", (1, 5)),
    ("cubic", "half_pixel", None, "scales", (10, 5)),  # 5/12 as a float32 scale: 5 columns, as onnxruntime
    ("cubic", "pytorch_half_pixel", None, "sizes", (1, 12)),  # one row: pixel 0
    ("nearest", "asymmetric", "floor", "scales", (10, 30)),
    ("nearest", "half_pixel", "floor", "sizes", (1, 12)),  # 7 → 1 reads 2.9999998 in float32: row 2
    ("nearest", "half_pixel", "round_prefer_ceil", "sizes", (3, 17)),
    ("nearest", "align_corners", "round_prefer_floor", "scales", (3, 4)),
]


def resize_model(mode, coords, rounding, how, out):
    attrs = {"mode": mode, "coordinate_transformation_mode": coords, **({"nearest_mode": rounding} if rounding else {})}
    given = np.array([1, 1, out[0] / 7, out[1] / 12], np.float32) if how == "scales" else np.array([2, 3, *out],
                                                                                                     np.int64)
    inputs = ["x", "", "given"] if how == "scales" else ["x", "", "", "given"]
    return one_input_model([helper.make_node("Resize", inputs, ["y"], name="resize", **attrs)], ["N", 3, 7, 12],
                           ["N", 3, "H", "W"], {"given": given}, opset=13)


@pytest.mark.parametrize("mode,coords,rounding,how,out", RESIZES)
def test_resize_to_any_size(mode, coords, rounding, how, out, device, rng):
    """Resize to sizes no factor reaches, any mode: a fixed matrix along each axis (the axis copied
    into the channels, a frozen 1×1 convolution, copied back)."""
    model = resize_model(mode, coords, rounding, how, out)
    x = rng.standard_normal((2, 3, 7, 12)).astype(np.float32)
    want = onnxruntime(model, x)
    got = ngx.run(ngx.load(model, device=device), [x])[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_convolution_before_a_resize_to_any_size_fine_tunes(device, rng):
    """Bilinear resize of 5 × 5 to 8 × 3: the gradient passes back through both axes' matrices."""
    resize = helper.make_node("Resize", ["h", "", "", "sizes"], ["y"], name="resize", mode="linear")
    sizes = numpy_helper.from_array(np.array([2, 6, 8, 3], np.int64), "sizes")
    nodes = [helper.make_node("Constant", [], ["sizes"], value=sizes), resize]
    one = one_input_model([helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear")], [5, 1, 5, 5],
                          [5, 1, 8, 3], {"sizes": np.array([5, 1, 8, 3], np.int64)})
    units = np.eye(5, dtype=np.float32)
    rows = onnxruntime(one, np.repeat(units[:, None, :, None], 5, axis=3))[:, 0, :, 0].T  # 8 × 5
    cols = onnxruntime(one, np.repeat(units[:, None, None, :], 5, axis=2))[:, 0, 0, :].T  # 3 × 5
    check_a_convolution_before_fine_tunes(device, rng, nodes, lambda h: np.einsum("yh,nchw,xw->ncyx", rows, h, cols),
                                          [6, 8, 3], ["resize_H", "resize_W"])


@pytest.mark.parametrize("axis", [1, 2, 3])
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumulative_sums(axis, exclusive, reverse, device, rng):
    """CumSum along the channels, H or W, exclusive and reversed too."""
    model = one_input_model([helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)],
                            ["N", 3, 4, 5], ["N", 3, 4, 5], {"axis": np.array(axis, np.int64)})
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    want = onnxruntime(model, x)
    ref_x = np.flip(x, axis) if reverse else x
    total = np.cumsum(ref_x, axis) - (ref_x if exclusive else 0)
    np.testing.assert_allclose(want, np.flip(total, axis) if reverse else total, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("repeats", [(1, 2, 1, 1), (1, 1, 3, 1), (1, 1, 1, 2), (1, 2, 2, 3)])
def test_tiles(repeats, device, rng):
    """Tile (`x.repeat(...)`) along the channels, H, W and all three."""
    out = [d * r for d, r in zip((2, 3, 4, 5), repeats)]
    model = one_input_model([helper.make_node("Tile", ["x", "repeats"], ["y"])], ["N", 3, 4, 5], ["N", *out[1:]],
                            {"repeats": np.array(repeats, np.int64)})
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    want = onnxruntime(model, x)
    np.testing.assert_array_equal(want, np.tile(x, repeats))
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], want, rtol=1e-6, atol=1e-6)


def test_softsign(device, rng):
    model = one_input_model([helper.make_node("Softsign", ["x"], ["y"])], ["N", 3, 4, 5], ["N", 3, 4, 5])
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32) * 3
    want = onnxruntime(model, x)
    np.testing.assert_allclose(want, x / (1 + np.abs(x)), rtol=1e-6)
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], want, rtol=1e-5, atol=1e-6)


def if_model(condition_nodes):
    """y = If(cond) then relu(x) else sigmoid(x), the condition made by `condition_nodes` into "cond"."""
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["r"])], "then", [],
                             [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["s"])], "else", [],
                              [helper.make_tensor_value_info("s", TensorProto.FLOAT, None)])
    nodes = [*condition_nodes, helper.make_node("If", ["cond"], ["y"], name="choice", then_branch=then,
                                                 else_branch=other)]
    return one_input_model(nodes, ["N", 3, 4, 5], ["N", 3, 4, 5])


@pytest.mark.parametrize("dim,taken", [(3, "then"), (2, "else")])
def test_an_if_whose_condition_is_known_at_import_imports_its_branch(dim, taken, device, rng):
    """If on a dim of the input (as TorchScript checks a dim before squeezing it): the branch taken."""
    model = if_model([helper.make_node("Shape", ["x"], ["shape"]),
                      helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1, np.int64))),
                      helper.make_node("Gather", ["shape", "one"], ["c"]),
                      helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array(dim, np.int64))),
                      helper.make_node("Equal", ["c", "k"], ["cond"])])
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    want = onnxruntime(model, x)
    np.testing.assert_allclose(want, np.maximum(x, 0) if taken == "then" else 1 / (1 + np.exp(-x)), rtol=1e-6)
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], want, rtol=1e-5, atol=1e-6)


def test_windows_over_the_channels_average_only():
    """(N, 1, C, H, W) pools only as PyTorch's LocalResponseNorm does: an average over channels."""
    nodes = [helper.make_node("Unsqueeze", ["x", "one"], ["u"]),
             helper.make_node("MaxPool", ["u"], ["m"], name="window", kernel_shape=[3, 1, 1], strides=[1, 1, 1]),
             helper.make_node("Squeeze", ["m", "one"], ["y"])]
    model = one_input_model(nodes, ["N", 5, 4, 4], ["N", 3, 4, 4], {"one": np.array([1], np.int64)})
    with pytest.raises(ng.UnsupportedError, match=r"\[window\] MaxPool over a tensor lying as \(N, 1, E, H, W\): "
                                                  r"only averages over windows of channels"):
        ngx.load(model)


def small_model(op="Relu", w_shape=None, extra_inputs=(), **attrs):
    """One node, "the_node", of `op` on input x (N, 3, 8, 8), with weights w of `w_shape` if given."""
    inputs = ["x", *extra_inputs]
    inits = []
    if w_shape is not None:
        inits.append(numpy_helper.from_array(np.ones(w_shape, np.float32), "w"))
        inputs.append("w")
    node = helper.make_node(op, inputs, ["y"], name="the_node", **attrs)
    g = helper.make_graph([node], "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "C", "H", "W"])], inits)
    return model_of(g, 17)


def with_constant(model, name, value):
    """`model` with initializer `name` holding `value`."""
    model.graph.initializer.append(numpy_helper.from_array(value, name))
    return model


def _clip_model(lo, hi):
    m = small_model("Clip", extra_inputs=["lo", "hi"])
    with_constant(m, "lo", np.array(lo, np.float32))
    return with_constant(m, "hi", np.array(hi, np.float32))


@pytest.mark.parametrize("lo,hi", [(-1.0, 1.0), (0.5, np.inf), (-np.inf, -0.5), (1.0, -1.0)])
def test_clip_to_any_range(lo, hi, device, rng):
    """Clip (hardtanh, clamp) to any bounds: lo + ReLUN(x − lo) up to hi − lo; hi where lo > hi."""
    model = _clip_model(lo, hi)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32) * 2
    want = onnxruntime(model, x)
    np.testing.assert_array_equal(want, np.minimum(np.maximum(x, lo), hi))
    np.testing.assert_allclose(ngx.run(ngx.load(model, device=device), [x])[0], want, rtol=1e-6, atol=1e-6)
