"""The backend conformance suite: every node kind on every built backend, forward and
gradient, against the cpu backend on random inputs. A kind without a case here fails, and
so does a kernel that the cpu backend has and another built backend lacks (but for the
fusions a backend may leave out: the planner then keeps those steps apart)."""

import numpy as np
import pytest
from conftest import DEVICES

import nngraph as ng


def conv_weights(o, c, kh, kw, seed, neuron=None):
    d = ng.ConvolutionDescriptor(kernel=(kh, kw), input_channels=c, output_channels=o, neuron=neuron)
    return ng.ArrayDataSource(d, seed=seed)


def norm_tensors(c, seed=3):
    rng = np.random.default_rng(seed)
    return ng.ArrayDataSource(ng.NormalizationDescriptor(c), tensors={
        "gamma": rng.uniform(0.5, 1.5, c), "beta": rng.standard_normal(c),
        "mean": rng.standard_normal(c), "variance": rng.uniform(0.5, 2, c)})


def affine(c, seed=3):
    rng = np.random.default_rng(seed)
    return ng.ArrayDataSource(ng.NormalizationDescriptor(c, statistics=False),
                              tensors={"gamma": rng.uniform(0.5, 1.5, c), "beta": rng.standard_normal(c)})


def transposed_weights():
    d = ng.ConvolutionDescriptor(3, 4, 6, stride=2, groups=2, neuron="sigmoid", transposed=True)
    return ng.ArrayDataSource(d, seed=5, tensors={"biases": np.linspace(-1, 1, 6)})


def forward_and_gradients(node, dy):
    """The node's result and the gradient of each of its sources, for upstream gradient dy."""
    return [node.result_image] + [g.result_image for g in node.gradient_filters(dy)]


def arithmetic_case(kind):
    def build(s):
        return forward_and_gradients(getattr(ng, kind)(s["a"], s["b"]), s["dy"])

    def feeds(rng):
        b = rng.standard_normal((3, 4, 1, 1)).astype(np.float32)
        return {"a": rng.standard_normal((3, 4, 5, 6)), "b": np.sign(b) * (np.abs(b) + 0.5),
                "dy": rng.standard_normal((3, 4, 5, 6))}
    return build, feeds


def image_feeds(shape, dy_shape):
    return lambda rng: {"x": rng.standard_normal(shape), "dy": rng.standard_normal(dy_shape)}


def loss_build(s):
    return [ng.Loss(s["x"], ng.LossDescriptor("mean_squared_error")).result_image]


# Each kind: build(sources) -> result images (forward and every source's gradient), and the
# random inputs by source label.
CASES = {
    "Convolution": (lambda s: forward_and_gradients(
        ng.Convolution(s["x"], conv_weights(5, 3, 3, 3, 1, "tanh"), padding="same"), s["dy"]),
        image_feeds((2, 3, 7, 6), (2, 5, 7, 6))),
    "FullyConnected": (lambda s: forward_and_gradients(
        ng.FullyConnected(s["x"], conv_weights(4, 3, 5, 5, 2, "sigmoid")), s["dy"]),
        image_feeds((3, 3, 5, 5), (3, 4, 1, 1))),
    "Pooling": (lambda s: forward_and_gradients(ng.Pooling(s["x"], "max", kernel=3, stride=2, padding="same"), s["dy"])
                + forward_and_gradients(ng.Pooling(s["x"], "average", kernel=2, stride=2, dilation=2,
                                                    padding="same"), s["dy"])
                + forward_and_gradients(ng.GlobalMaxPooling(s["x"]), s["g"])
                + forward_and_gradients(ng.GlobalAveragePooling(s["x"]), s["g"]),
                lambda rng: {"x": rng.standard_normal((2, 3, 7, 6)), "dy": rng.standard_normal((2, 3, 4, 3)),
                             "g": rng.standard_normal((2, 3, 1, 1))}),
    "Neuron": (lambda s: forward_and_gradients(ng.Neuron(s["x"], "elu", a=0.7), s["dy"]),
               image_feeds((2, 3, 4, 5), (2, 3, 4, 5))),
    "SoftMax": (lambda s: forward_and_gradients(ng.SoftMax(s["x"]), s["dy"])
                + forward_and_gradients(ng.LogSoftMax(s["x"]), s["dy"])
                + forward_and_gradients(ng.SoftMax(s["x"], groups=3), s["dy"]),
                image_feeds((2, 6, 3, 2), (2, 6, 3, 2))),
    # Two groups, as read (3×4 by 4×5) and both transposed (a 3×4 read as 4×3, 5×4 as 4×5).
    "MatrixMultiplication": (lambda s: forward_and_gradients(ng.MatrixMultiplication(s["a"], s["b"], groups=2), s["dy"])
                             + forward_and_gradients(ng.MatrixMultiplication(s["c"], s["d"], groups=2,
                                                                             transpose_left=True,
                                                                             transpose_right=True), s["dy"]),
                             lambda rng: {"a": rng.standard_normal((2, 6, 2, 2)),
                                          "b": rng.standard_normal((2, 8, 1, 5)),
                                          "c": rng.standard_normal((2, 8, 1, 3)),
                                          "d": rng.standard_normal((2, 10, 2, 2)),
                                          "dy": rng.standard_normal((2, 6, 1, 5))}),
    "Dropout": (lambda s: forward_and_gradients(ng.Dropout(s["x"], keep_probability=0.6, seed=3), s["dy"]),
                image_feeds((2, 3, 9, 9), (2, 3, 9, 9))),
    "Addition": arithmetic_case("Addition"),
    "Subtraction": arithmetic_case("Subtraction"),
    "Multiplication": arithmetic_case("Multiplication"),
    "Division": arithmetic_case("Division"),
    "Concatenation": (lambda s: forward_and_gradients(ng.Concatenation([s["x"], s["y"]]), s["dy"]),
                      lambda rng: {"x": rng.standard_normal((2, 2, 3, 3)), "y": rng.standard_normal((2, 3, 3, 3)),
                                   "dy": rng.standard_normal((2, 5, 3, 3))}),
    "RNN": (lambda s: forward_and_gradients(ng.RNN(s["x"], [ng.LSTM(3, 4, seed=5), ng.GRU(4, 2, seed=6)]), s["dy"]),
            image_feeds((2, 3, 1, 7), (2, 2, 1, 7))),
    "ImageCopyToMatrixNode": (lambda s: forward_and_gradients(ng.ImageCopyToMatrixNode(s["x"], "hwc"), s["dy"]),
                              image_feeds((2, 3, 2, 4), (2, 24, 1, 1))),
    "MatrixCopyToImageNode": (lambda s: forward_and_gradients(
        ng.MatrixCopyToImageNode(s["x"], (3, 2, 4), "hwc"), s["dy"]),
        image_feeds((2, 24, 1, 1), (2, 3, 2, 4))),
    "BatchNormalization": (lambda s: forward_and_gradients(ng.Neuron(ng.BatchNormalization(s["x"], norm_tensors(3)),
                                                                     "relu"), s["dy"])
                           + forward_and_gradients(ng.BatchNormalization(s["x"], norm_tensors(3)), s["dy"]),
                           # Planes of 32 values: cuda reads them in 16-byte packs (other sizes: one at a time).
                           image_feeds((3, 3, 4, 8), (3, 3, 4, 8))),
    "Padding": (lambda s: forward_and_gradients(ng.Padding(s["x"], (2, 1, 0, 3), mode="reflect"), s["dy"])
                + forward_and_gradients(ng.Padding(s["x"], (1, 2, 3, 0), mode="edge"), s["dy"])
                + forward_and_gradients(ng.Padding(s["x"], (-1, 4, 2, 1), mode="constant", value=0.5,
                                                   channels=(1, -1)), s["dy"])
                + forward_and_gradients(ng.Crop(s["x"], window=(1, 0, 3, 5), channels=(1, 1)), s["crop"])
                # Channels alone, or rows and columns alone: channels-last graphs pad them in place.
                + forward_and_gradients(ng.Padding(s["x"], (0, 0, 0, 0), mode="constant", value=0.5,
                                                   channels=(1, 2)), s["dyc"])
                + forward_and_gradients(ng.Crop(s["x"], channels=(1, 1)), s["cropc"])
                + forward_and_gradients(ng.Padding(s["x"], (1, 2, 0, 3), mode="constant", value=-0.5), s["dy"])
                + forward_and_gradients(ng.Crop(s["x"], window=(1, 2, 3, 4)), s["crops"]),
                lambda rng: {"x": rng.standard_normal((2, 2, 5, 6)), "dy": rng.standard_normal((2, 2, 8, 9)),
                             "crop": rng.standard_normal((2, 1, 3, 5)), "dyc": rng.standard_normal((2, 5, 5, 6)),
                             "cropc": rng.standard_normal((2, 1, 5, 6)), "crops": rng.standard_normal((2, 2, 3, 4))}),
    "Upsampling": (lambda s: forward_and_gradients(ng.Upsampling(s["x"], (2, 3)), s["dy"])
                   + forward_and_gradients(ng.Upsampling(s["x"], (2, 3), mode="bilinear"), s["dy"])
                   + forward_and_gradients(ng.Upsampling(s["x"], (2, 3), mode="bilinear", align_corners=True),
                                           s["dy"]),
                   image_feeds((2, 3, 4, 5), (2, 3, 8, 15))),
    "ConvolutionTranspose": (lambda s: forward_and_gradients(
        ng.ConvolutionTranspose(s["x"], transposed_weights(), padding=(1, 0, 1, 1), output_padding=1), s["dy"]),
        image_feeds((2, 4, 5, 4), (2, 6, 11, 8))),
    "GroupNormalization": (lambda s: forward_and_gradients(ng.GroupNormalization(s["x"], 2, affine(4)), s["dy"])
                           + forward_and_gradients(ng.InstanceNormalization(s["x"], affine(4)), s["dy"])
                           + forward_and_gradients(ng.LayerNormalization(s["x"], affine(4), over="c"), s["dy"]),
                           image_feeds((3, 4, 5, 6), (3, 4, 5, 6))),
    "Loss": (loss_build, lambda rng: {"x": rng.standard_normal((3, 4, 2, 2))}),
}


# Kinds with parameters: one training step (forward, loss, every gradient, SGD) per backend,
# compared through the updated parameters, which carry the weight and bias gradients.
TRAINABLE = {
    "Convolution": (lambda x: ng.Convolution(x, conv_weights(5, 3, 3, 3, 1, "tanh"), padding="same"), (2, 3, 7, 6)),
    "FullyConnected": (lambda x: ng.FullyConnected(x, conv_weights(4, 3, 5, 5, 2, "sigmoid")), (3, 3, 5, 5)),
    # A neuron node whose gradient the layer's gradient applies (frozen weights: the bias alone).
    "Convolution+GELU": (lambda x: ng.Neuron(ng.Convolution(x, conv_weights(5, 3, 3, 3, 1), padding="same"), "gelu"),
                         (2, 3, 7, 6)),
    "FullyConnected+GELU": (lambda x: ng.Neuron(ng.FullyConnected(x, conv_weights(4, 3, 5, 5, 2)), "gelu"),
                            (3, 3, 5, 5)),
    "RNN": (lambda x: ng.RNN(x, [ng.LSTM(3, 4, seed=5), ng.GRU(4, 2, seed=6)]), (2, 3, 1, 7)),
    "BatchNormalization": (lambda x: ng.Neuron(ng.BatchNormalization(x, norm_tensors(3)), "tanh"), (4, 3, 5, 6)),
    "ConvolutionTranspose": (lambda x: ng.ConvolutionTranspose(x, transposed_weights(), padding="same"), (2, 4, 5, 4)),
    "GroupNormalization": (lambda x: ng.LayerNormalization(ng.GroupNormalization(x, 2, affine(4)), affine(4, 4),
                                                           over="c"), (3, 4, 5, 6)),
}


def training_graph(kind, device, **options):
    """The kind's training graph made with these options (SGD) and a step of it."""
    make, shape = TRAINABLE[kind]
    rng = np.random.default_rng(9)
    x = rng.standard_normal(shape).astype(np.float32)
    node = make(ng.ImageNode(label="x"))
    target = rng.standard_normal(ng.Graph(node).run(x).shape).astype(np.float32)
    loss = ng.Loss(node.result_image, ng.LossDescriptor("mean_squared_error"))
    g = loss.training_graph(optimizer=ng.SGD(learning_rate=0.5), device=device, **options)
    return g, lambda: g.encode(x, labels=ng.LossLabels(target)).wait()


def training_step(kind, device, **options):
    """The parameters before and after one step of a training graph made with these options."""
    g, step = training_graph(kind, device, **options)
    before = {label: dict(p) for label, p in g.parameters().items()}
    step()
    return before, g.parameters()


def kinds():
    """Every node class the package exports, bases (Arithmetic) aside."""
    found, todo = [], [ng.FilterNode]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if not sub.__subclasses__():
                found.append(sub.__name__)
    return sorted(found)


def run(kind, device, **options):
    """The case's results on `device`, by a graph made with these options (format, layout)."""
    build, feeds = CASES[kind]
    values = {k: np.asarray(v, np.float32) for k, v in feeds(np.random.default_rng(7)).items()}
    sources = {k: ng.ImageNode(label=k) for k in values}
    g = ng.Graph(build(sources), device=device, **options)
    if kind == "Loss":
        labels = np.random.default_rng(8).standard_normal(values["x"].shape).astype(np.float32)
        h = g.encode(values["x"], labels=ng.LossLabels(labels))
        return [h.result(), h.losses()]
    out = g.run({s.label: values[s.label] for s in g.source_image_handles})
    return out if isinstance(out, list) else [out]


def test_every_node_kind_has_a_case():
    assert [k for k in kinds() if k not in CASES] == []


# Kernels a backend may leave out: a fusion of steps the plan can also run apart (a convolution
# + residual addition), and a filter packed once for a convolution kernel of its own (without
# them the convolution reads the filter as it lies).
OPTIONAL = {"convolution_add", "prepare_filter", "prepared_convolution"}


@pytest.mark.parametrize("device", DEVICES)
def test_every_cpu_kernel_runs_on_every_built_backend(device):
    missing = [name for name, types in ng.kernels().items()
               if "cpu" in types and device not in types and name not in OPTIONAL]
    assert missing == []


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", sorted(TRAINABLE))
def test_a_training_step_matches_the_cpu_backend(kind, device):
    before, want = training_step(kind, "cpu")
    _, got = training_step(kind, device)
    assert sorted(got) == sorted(want)
    for label in want:
        first = next(iter(want[label]))  # weights or gamma: trained
        assert np.abs(want[label][first] - before[label][first]).max() > 1e-4
        for part, value in want[label].items():
            if value is None:
                assert got[label][part] is None
            else:
                np.testing.assert_allclose(got[label][part], value, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", sorted(CASES))
def test_forward_and_gradients_match_the_cpu_backend(kind, device):
    want = run(kind, "cpu")
    got = run(kind, device)
    assert len(got) == len(want)
    for w, g in zip(want, got):
        assert np.all(np.isfinite(w))
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)


def freezings(graph):
    """Each trained tensor of each source alone, then each source's trained tensors together."""
    held = graph.parameters()
    for ds in graph.data_sources:
        trained = [t.name for t in ds.descriptor().tensors if t.trained and held[ds.label()][t.name] is not None]
        yield from ({ds.label(): [name]} for name in trained)
        if len(trained) > 1:
            yield {ds.label(): trained}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", sorted(TRAINABLE))
def test_frozen_tensors_stay_and_the_others_train_as_before(kind, device):
    """Frozen after a first step (so a graph remakes its gradient buffers and captures): the
    graph computes no gradient for them, they keep their values, and every other tensor moves
    as it does when all train."""
    g, step = training_graph(kind, device)
    step()
    step()
    want = g.parameters()
    for frozen in freezings(g):
        h, step = training_graph(kind, device)
        step()
        first = h.parameters()
        for ds in h.data_sources:
            ds.frozen = frozen.get(ds.label(), [])
        step()
        for label, tensors in h.parameters().items():
            for part, value in tensors.items():
                if value is None:
                    continue
                expect = first[label][part] if part in frozen.get(label, []) else want[label][part]
                np.testing.assert_allclose(value, expect, rtol=1e-5, atol=1e-6, err_msg=f"{frozen}: {label}.{part}")
