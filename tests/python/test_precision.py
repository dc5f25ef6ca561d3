"""Graph formats (float32, float16, bfloat16): the cpu backend keeps float32 images; cuda
computes in the format with float32 parameter masters, statistics and losses."""

import numpy as np
import pytest
from conftest import DEVICES
from test_conformance import CASES, run

import nngraph as ng

HALF = ["float16", "bfloat16"]
GPUS = [d for d in DEVICES if d != "cpu"]
# Kinds whose cuda kernels compute in half precision (the rest raise NotImplementedError).
HALF_KINDS = ["Addition", "BatchNormalization", "Convolution", "Division", "Dropout", "FullyConnected",
              "ImageCopyToMatrixNode", "Loss", "MatrixCopyToImageNode",
              "Multiplication", "Neuron", "Padding", "Pooling", "SoftMax", "Subtraction"]
# Relative error allowed against float32: about 2⁻⁸ per rounding for bfloat16, 2⁻¹¹ for float16,
# over a few roundings in a row.
TOLERANCE = {"float16": 1e-2, "bfloat16": 6e-2}


def small_network(seed=0):
    image = ng.ImageNode(shape=(1, 8, 8), label="x")
    conv = ng.Convolution(image, ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 1, 4), seed=seed), padding="same")
    h = ng.Pooling(ng.Neuron(conv, "relu"), "max", 2)
    return ng.FullyConnected(h, ng.ArrayDataSource(ng.ConvolutionDescriptor(4, 4, 3), seed=seed + 1))


@pytest.mark.parametrize("fmt", HALF)
def test_cpu_graphs_keep_float32_images(fmt, rng):
    x = rng.standard_normal((5, 1, 8, 8)).astype(np.float32)
    want = ng.Graph(small_network(), device="cpu").run(x)
    g = ng.Graph(small_network(), device="cpu", format=fmt)
    assert (g.format, g.storage) == (fmt, "float32")
    np.testing.assert_array_equal(g.run(x), want)
    assert g.memory_plan(5) == ng.Graph(small_network(), device="cpu").memory_plan(5)
    assert g.inference().format == fmt


def test_an_unknown_format_names_the_graph():
    with pytest.raises(ValueError, match=r"\[graph\] dtype must be float32, float16 or bfloat16, got 'float64'"):
        ng.Graph(small_network(), format="float64")


@pytest.mark.parametrize("device", DEVICES)
def test_images_convert_to_bfloat16_and_back(device, rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    b = ng.Image(x, device=device).astype("bfloat16")
    assert b.dtype == "bfloat16"
    back = b.numpy()
    assert back.dtype == np.float32
    np.testing.assert_allclose(back, x, rtol=2 ** -8)
    assert np.any(back != x)


@pytest.mark.parametrize("fmt", HALF)
@pytest.mark.parametrize("device", GPUS)
def test_a_half_graph_stores_half_images(device, fmt, rng):
    g = ng.Graph(small_network(), device=device, format=fmt)
    assert g.storage == fmt
    full = ng.Graph(small_network(), device=device).memory_plan(64)["planned_bytes"]
    assert g.memory_plan(64)["planned_bytes"] < full
    x = rng.standard_normal((64, 1, 8, 8)).astype(np.float32)
    out = g.run(x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ng.Graph(small_network(), device="cpu").run(x), rtol=TOLERANCE[fmt],
                               atol=TOLERANCE[fmt])
    assert g.run(x.astype(np.float16)).dtype == np.float16


def run_in(kind, device, fmt):
    """The conformance case's results computed by a graph of this format."""
    import test_conformance
    original = test_conformance.ng.Graph
    try:
        test_conformance.ng.Graph = lambda *a, **k: original(*a, format=fmt, **k)
        return run(kind, device)
    finally:
        test_conformance.ng.Graph = original


@pytest.mark.parametrize("fmt", HALF)
@pytest.mark.parametrize("device", GPUS)
@pytest.mark.parametrize("kind", HALF_KINDS)
def test_half_forward_and_gradients_match_float32(kind, device, fmt):
    want = run(kind, "cpu")
    got = run_in(kind, device, fmt)
    assert len(got) == len(want)
    tol = TOLERANCE[fmt]
    for w, g in zip(want, got):
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale)


@pytest.mark.parametrize("device", GPUS)
@pytest.mark.parametrize("kind", sorted(k for k in CASES if k not in HALF_KINDS))
def test_kinds_without_half_kernels_say_so(kind, device):
    with pytest.raises(NotImplementedError, match=r"bfloat16"):
        run_in(kind, device, "bfloat16")


@pytest.mark.parametrize("fmt", HALF)
@pytest.mark.parametrize("device", GPUS)
def test_half_training_updates_float32_masters(device, fmt, rng):
    x = rng.standard_normal((16, 1, 8, 8)).astype(np.float32)
    labels = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 16)].reshape(16, 3, 1, 1)

    def train(dev, f):
        net = small_network(seed=4)
        loss = ng.Loss(net, ng.LossDescriptor("softmax_cross_entropy", "mean"))
        g = loss.training_graph(device=dev, optimizer=ng.Adam(learning_rate=1e-2), format=f)
        for _ in range(5):
            g.encode(x, labels=ng.LossLabels(labels)).wait()
        return g.parameters()

    want, got = train("cpu", "float32"), train(device, fmt)
    for label, tensors in want.items():
        for part, value in tensors.items():
            assert got[label][part].dtype == np.float32  # the masters
            np.testing.assert_allclose(got[label][part], value, rtol=0, atol=0.05 if fmt == "bfloat16" else 0.01)


@pytest.mark.parametrize("device", GPUS)
def test_half_copies_follow_their_masters(device, rng):
    x = rng.standard_normal((8, 1, 8, 8)).astype(np.float32)
    net = small_network(seed=6)
    g = ng.Graph(net, device=device, format="bfloat16")
    g.run(x)  # copies made
    source = g.data_sources[0]
    source.set_weights(rng.standard_normal(source.weights().shape).astype(np.float32), source.biases())
    want = ng.Graph(net, device="cpu").run(x)
    np.testing.assert_allclose(g.run(x), want, rtol=0.06, atol=0.06 * max(1.0, float(np.abs(want).max())))
    g.reload_from_data_sources()  # a new load: copies made again
    np.testing.assert_allclose(g.run(x), want, rtol=0.06, atol=0.06 * max(1.0, float(np.abs(want).max())))
