"""Graph formats (float32, float16, bfloat16): the cpu backend keeps float32 images; cuda
computes in the format with float32 parameter masters, statistics and losses."""

import numpy as np
import pytest
from conftest import DEVICES, GPUS
from sources import checkpoint_contents
from test_conformance import CASES, run, training_graph, training_step

import nngraph as ng

HALF = ["float16", "bfloat16"]
# Every kind the conformance suite checks runs in half precision on cuda.
HALF_KINDS = sorted(CASES)
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


@pytest.mark.parametrize("fmt", HALF)
@pytest.mark.parametrize("device", GPUS)
@pytest.mark.parametrize("kind", HALF_KINDS)
def test_half_forward_and_gradients_match_float32(kind, device, fmt):
    want = run(kind, "cpu")
    got = run(kind, device, format=fmt)
    assert len(got) == len(want)
    tol = TOLERANCE[fmt]
    for w, g in zip(want, got):
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale)


@pytest.mark.parametrize("fmt", HALF)
@pytest.mark.parametrize("device", GPUS)
@pytest.mark.parametrize("kind", ["Convolution+GELU", "FullyConnected+GELU", "BatchNormalization"])
def test_a_half_training_step_matches_float32(kind, device, fmt):
    """Neuron gradients taken by the layer's (or normalization's) gradient, in half storage."""
    before, want = training_step(kind, "cpu")
    # A modest loss scale: float16's default first scale (2¹⁶) overflows here and skips the step.
    g, step = training_graph(kind, device, format=fmt, loss_scaling=ng.LossScaling(initial=256.0))
    step()
    assert g.skipped_steps == 0
    got = g.parameters()
    tol = TOLERANCE[fmt]
    for label in want:
        for part, value in want[label].items():
            if value is not None:
                moved = value - before[label][part]
                np.testing.assert_allclose(got[label][part] - before[label][part], moved, rtol=tol,
                                           atol=tol * max(1e-3, float(np.abs(moved).max())))


@pytest.mark.parametrize("fmt", HALF)
@pytest.mark.parametrize("device", GPUS)
def test_half_training_updates_float32_masters(device, fmt, rng):
    x = rng.standard_normal((16, 1, 8, 8)).astype(np.float32)
    labels = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 16)].reshape(16, 3, 1, 1)

    def train(dev, f):
        net = small_network(seed=4)
        loss = ng.Loss(net, ng.LossDescriptor("softmax_cross_entropy", "mean"))
        # A modest scale: no step of the five overflows, so both train the same steps.
        g = loss.training_graph(device=dev, optimizer=ng.Adam(learning_rate=1e-2), format=f,
                                loss_scaling=ng.LossScaling(initial=256.0))
        for _ in range(5):
            assert not g.encode(x, labels=ng.LossLabels(labels)).skipped
        return g.parameters()

    want, got = train("cpu", "float32"), train(device, fmt)
    for label, tensors in want.items():
        for part, value in tensors.items():
            assert got[label][part].dtype == np.float32  # the masters
            np.testing.assert_allclose(got[label][part], value, rtol=0, atol=0.05 if fmt == "bfloat16" else 0.01)


@pytest.mark.parametrize("source", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("device", GPUS)
def test_a_half_graph_trains_alike_on_images_of_any_dtype(device, source, rng):
    """Images already in a half dtype (a device dataset's) train as float32 images of the same
    values do: the graph rounds both alike at its edge. Four steps of each dtype in turn, so
    each is run eagerly, captured and replayed (a capture per dtype of the sources)."""
    x = (rng.integers(-64, 64, (16, 1, 8, 8)) / 16).astype(np.float32)  # exact in every format
    labels = ng.LossLabels(np.eye(3, dtype=np.float32)[rng.integers(0, 3, 16)].reshape(16, 3, 1, 1))
    losses = {}
    for given in ("float32", source):
        loss = ng.Loss(small_network(seed=2), ng.LossDescriptor("softmax_cross_entropy", "mean"))
        g = loss.training_graph(device=device, optimizer=ng.SGD(learning_rate=0.1), format="bfloat16")
        images = ng.Image(x, device=device)
        turns = [images] * 2 + [images.astype(given)] * 4 + [images] * 2
        losses[given] = [float(g.encode(img, labels=labels).losses().mean()) for img in turns]
    np.testing.assert_allclose(losses[source], losses["float32"], rtol=1e-5)
    assert losses["float32"][-1] < losses["float32"][0]


@pytest.mark.parametrize("fmt", ["bfloat16", "float32"])
@pytest.mark.parametrize("device", GPUS)
def test_filter_copies_follow_their_masters(device, fmt, rng):
    """A half graph computes on copies of its parameters, and a channels-last float32 graph on
    KRSC copies of its filters: both follow a change of their masters, and a new load."""
    x = rng.standard_normal((8, 3, 8, 8)).astype(np.float32)  # three channels: KRSC is not OIHW
    conv = ng.Convolution(ng.ImageNode(shape=(3, 8, 8), label="x"),
                          ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 3, 4), seed=6), padding="same")
    net = ng.FullyConnected(ng.Neuron(conv, "relu"), ng.ArrayDataSource(ng.ConvolutionDescriptor(8, 4, 3), seed=7))
    g = ng.Graph(net, device=device, format=fmt, layout="NHWC")
    g.run(x)  # copies made
    source = g.data_sources[0]
    source.set_weights(rng.standard_normal(source.weights().shape).astype(np.float32), source.biases())
    want = ng.Graph(net, device="cpu").run(x)
    tol = 0.06 if fmt == "bfloat16" else 1e-4
    np.testing.assert_allclose(g.run(x), want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))
    g.reload_from_data_sources()  # a new load: copies made again
    np.testing.assert_allclose(g.run(x), want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))


def scaled_training(device, rng, scaling, optimizer=None):
    """A float16 training graph of the small network, and a batch of float16 images with labels."""
    x = rng.standard_normal((16, 1, 8, 8)).astype(np.float16)
    labels = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 16)].reshape(16, 3, 1, 1)
    loss = ng.Loss(small_network(seed=8), ng.LossDescriptor("softmax_cross_entropy", "mean"))
    g = loss.training_graph(device=device, optimizer=optimizer or ng.Adam(learning_rate=1e-2), format="float16",
                            loss_scaling=scaling)
    return g, x, labels


def optimizer_states(g):
    return {ds.label(): ds.optimizer_state() for ds in g.data_sources}


@pytest.mark.parametrize("device", GPUS)
def test_an_overflow_skips_exactly_that_step_and_lowers_the_scale(device, rng):
    scaling = ng.LossScaling(initial=1024.0, growth_interval=1000)
    g, x, labels = scaled_training(device, rng, scaling)
    ref, _, _ = scaled_training(device, np.random.default_rng(0), scaling)
    for _ in range(4):  # the later ones replay the captured step
        assert not g.encode(x, labels=ng.LossLabels(labels)).skipped
        ref.encode(x, labels=ng.LossLabels(labels)).wait()
    before, states = g.parameters(), optimizer_states(g)
    # Label weights of 1e6 make the scaled loss gradient overflow float16.
    h = g.encode(x, labels=ng.LossLabels(labels, weights=np.full(16, 1e6, np.float32)))
    assert h.skipped and h.loss_scale == 1024.0
    assert np.isfinite(h.loss())  # the loss itself is float32
    assert (g.loss_scale, g.skipped_steps) == (512.0, 1)
    after = g.parameters()
    for label, tensors in before.items():
        for part, value in tensors.items():
            np.testing.assert_array_equal(after[label][part], value)
    for label, state in optimizer_states(g).items():
        assert state["step"] == states[label]["step"] == 4  # Adam's count leaves the skipped step out
        for got, want in zip(state["slots"], states[label]["slots"]):
            np.testing.assert_array_equal(got, want)
    # The next step is the fifth update, as the reference's fifth (its scale twice ours).
    h = g.encode(x, labels=ng.LossLabels(labels))
    assert not h.skipped and h.loss_scale == 512.0
    ref.encode(x, labels=ng.LossLabels(labels)).wait()
    want, got = ref.parameters(), g.parameters()
    for label, tensors in want.items():
        for part, value in tensors.items():
            np.testing.assert_allclose(got[label][part], value, rtol=0, atol=2e-4)
    assert all(s["step"] == 5 for s in optimizer_states(g).values())


@pytest.mark.parametrize("device", GPUS)
def test_the_loss_scale_grows_after_clean_steps(device, rng):
    g, x, labels = scaled_training(device, rng, ng.LossScaling(initial=8.0, growth_interval=3),
                                   optimizer=ng.SGD(learning_rate=1e-3))
    scales = [g.encode(x, labels=ng.LossLabels(labels)).loss_scale for _ in range(7)]
    assert scales == [8.0, 8.0, 8.0, 16.0, 16.0, 16.0, 32.0]
    assert (g.loss_scale, g.skipped_steps) == (32.0, 0)


@pytest.mark.parametrize("device", GPUS)
def test_loss_scaling_needs_built_in_optimizers(device, rng):
    class Plain(ng.Optimizer):
        def slot_count(self):
            return 0

        def update(self, values, gradient, slots, step):
            values -= 1e-3 * gradient

    g, x, labels = scaled_training(device, rng, None, optimizer=Plain())
    with pytest.raises(NotImplementedError, match=r"updates itself on the host.*bfloat16"):
        g.encode(x, labels=ng.LossLabels(labels)).wait()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", ["float32", "bfloat16"])
def test_graphs_that_do_not_scale_report_a_unit_scale(device, fmt, rng):
    x = rng.standard_normal((4, 1, 8, 8)).astype(np.float32)
    labels = np.eye(3, dtype=np.float32)[[0, 1, 2, 0]].reshape(4, 3, 1, 1)
    loss = ng.Loss(small_network(), ng.LossDescriptor("softmax_cross_entropy", "mean"))
    g = loss.training_graph(device=device, optimizer=ng.SGD(learning_rate=0.1), format=fmt)
    h = g.encode(x, labels=ng.LossLabels(labels))
    assert (h.loss_scale, h.skipped, g.loss_scale, g.skipped_steps) == (1.0, False, 1.0, 0)


def test_loss_scaling_settings_are_checked():
    s = ng.LossScaling(initial=128.0, growth_interval=10)
    assert (s.enabled, s.initial, s.growth, s.backoff, s.growth_interval) == (True, 128.0, 2.0, 0.5, 10)
    with pytest.raises(ValueError, match=r"\[loss scaling\] backoff must be in \(0, 1\), got 1.5"):
        ng.LossScaling(backoff=1.5)
    with pytest.raises(ValueError, match=r"growth_interval must be >= 1"):
        ng.LossScaling(growth_interval=0)


@pytest.mark.parametrize("device", DEVICES)
def test_half_accumulation_is_asked_per_convolution(device, rng):
    image = ng.ImageNode(shape=(8, 6, 6))
    w = ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 8, 16), seed=2)
    conv = ng.Convolution(image, w, padding="same", accumulator_precision="half")
    assert conv.accumulator_precision == "half"
    assert ng.Convolution(image, w).accumulator_precision == "float"
    with pytest.raises(ValueError, match=r"accumulator_precision must be 'float' or 'half', got 'double'"):
        ng.Convolution(image, w, accumulator_precision="double")
    x = rng.standard_normal((4, 8, 6, 6)).astype(np.float32)
    want = ng.Graph(ng.Convolution(image, w, padding="same"), device="cpu").run(x)
    # float16 accumulation over 72 products: about 2⁻¹¹·√72 relative error per value.
    got = ng.Graph(conv, device=device, format="float16").run(x)
    np.testing.assert_allclose(got, want, rtol=3e-2, atol=3e-2 * float(np.abs(want).max()))


@pytest.mark.parametrize("device", GPUS)
def test_checkpoints_of_half_graphs_keep_their_format(device, rng, tmp_path):
    def trained(fmt):
        g, x, labels = scaled_training(device, np.random.default_rng(1), ng.LossScaling(initial=256.0))
        if fmt != "float16":
            loss = ng.Loss(small_network(seed=8), ng.LossDescriptor("softmax_cross_entropy", "mean"))
            g = loss.training_graph(device=device, optimizer=ng.Adam(learning_rate=1e-2), format=fmt)
        for _ in range(3):
            g.encode(x.astype(np.float32), labels=ng.LossLabels(labels)).wait()
        ng.save(tmp_path / f"{fmt}.safetensors", g)
        arrays, _ = checkpoint_contents(tmp_path / f"{fmt}.safetensors")
        return {k: (a.dtype, a.shape) for k, a in arrays.items()}

    want = trained("float32")
    assert trained("float16") == want and trained("bfloat16") == want


def trained_accuracy(device, fmt, network, train, test, epochs, batch_size, learning_rate):
    """Validation accuracy after `epochs` of Adam with a cosine learning-rate schedule."""
    net = network()
    g = ng.Loss(net.logits, ng.LossDescriptor("softmax_cross_entropy", "mean")).training_graph(
        device=device, optimizer=ng.Adam(learning_rate=learning_rate), format=fmt)
    steps = epochs * -(-len(train[0]) // batch_size)
    history = ng.fit(g, train, epochs=epochs, batch_size=batch_size, validation=test, progress=False,
                     lr_schedule=ng.schedules.cosine(learning_rate, total_steps=steps))
    assert g.skipped_steps <= 20  # the first steps find the scale
    return history["val_accuracy"][-1]


@pytest.mark.parametrize("fmt", HALF)
@pytest.mark.parametrize("device", GPUS)
def test_the_digit_network_trains_as_well_in_half(device, fmt):
    """The seed's digit network, a pass over 12000 MNIST images, scored on 2000 others."""
    from nngraph.datasets import load_mnist
    from nngraph.models import digit_network
    xtr, ytr, xte, yte = load_mnist()
    args = ((xtr[:12000], ytr[:12000]), (xte[:2000], yte[:2000]), 1, 64, 1e-3)
    want = trained_accuracy(device, "float32", lambda: digit_network(seed=3), *args)
    got = trained_accuracy(device, fmt, lambda: digit_network(seed=3), *args)
    assert want >= 0.95
    assert got >= want - 0.01, (got, want)


@pytest.mark.parametrize("fmt", HALF)
@pytest.mark.parametrize("device", GPUS)
def test_the_residual_network_trains_as_well_in_half(device, fmt):
    """The batch-normalized residual network on sklearn's 8×8 digits."""
    from sklearn.datasets import load_digits

    from nngraph.models import residual_network
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    y = d.target.astype(np.int32)
    args = ((x[:1400], y[:1400]), (x[1400:], y[1400:]), 6, 50, 0.01)
    want = trained_accuracy(device, "float32", lambda: residual_network(widths=(8, 16), size=8, seed=1), *args)
    got = trained_accuracy(device, fmt, lambda: residual_network(widths=(8, 16), size=8, seed=1), *args)
    assert want >= 0.93
    assert got >= want - 0.02, (got, want)
