"""Batch normalization: forward against numpy, gradients against finite differences, running
statistics against the formula, all-or-nothing steps and bad input."""

import numpy as np
import pytest
import reference as ref
from sources import HeldSource
from test_gradients import check, numeric_grad

import nngraph as ng

SHAPES = [(4, 3, 5, 6), (2, 5, 1, 1), (3, 2, 7, 3)]


def bn_reference(x, gamma, beta, mean=None, var=None, eps=1e-5):
    """Training mode (batch statistics) where mean and var are None."""
    x = x.astype(np.float64)
    if mean is None:
        mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    c = lambda v: np.asarray(v, np.float64)[None, :, None, None]  # noqa: E731
    return (x - c(mean)) / np.sqrt(c(var) + eps) * c(gamma) + c(beta)


class NormCapture(HeldSource):
    """Normalization tensors held in Python; update() records the gradients it is handed."""

    def __init__(self, tensors, label="bn"):
        super().__init__(ng.NormalizationDescriptor(len(tensors["gamma"])), label)
        self.t, self.grads = tensors, None

    def gamma(self):
        return self.t["gamma"]

    def beta(self):
        return self.t["beta"]

    def mean(self):
        return self.t["mean"]

    def variance(self):
        return self.t["variance"]

    def update(self, gradient, values):
        self.grads = gradient
        return None


def random_tensors(rng, c):
    return {"gamma": rng.uniform(0.5, 1.5, c).astype(np.float32), "beta": rng.standard_normal(c).astype(np.float32),
            "mean": rng.standard_normal(c).astype(np.float32), "variance": rng.uniform(0.5, 2, c).astype(np.float32)}


@pytest.mark.parametrize("shape", SHAPES)
def test_inference_uses_the_running_statistics(device, rng, shape):
    x = rng.standard_normal(shape).astype(np.float32) * 2 + 1
    t = random_tensors(rng, shape[1])
    ds = ng.ArrayDataSource(ng.BatchNormalizationDescriptor(shape[1]), tensors=t)
    y = ng.Graph(ng.BatchNormalization(ng.ImageNode(), ds, epsilon=1e-3).result_image, device=device).run(x)
    check(y, bn_reference(x, t["gamma"], t["beta"], t["mean"], t["variance"], 1e-3), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("neuron", [None, "relu", "sigmoid", "gelu"])
def test_training_forward_and_every_gradient(device, rng, shape, neuron):
    """With a neuron after it, the neuron runs in the normalizing pass and its gradient in the
    normalization's gradient passes (from x recomputed: no steps of their own), GELU's too,
    whose derivative needs its input."""
    x = rng.standard_normal(shape).astype(np.float32) * 1.5 + 0.5
    t = random_tensors(rng, shape[1])
    ds = NormCapture(t)
    src, dy = ng.ImageNode(label="x"), ng.ImageNode(label="dy")
    bn = ng.BatchNormalization(src, ds)
    out = ng.Neuron(bn, neuron) if neuron else bn  # a training graph folds the neuron into the normalization
    dz = out.gradient_filter(dy).result_image if neuron else dy
    g = ng.Graph([out.result_image, bn.gradient_filter(dz).result_image], device=device)

    def fwd(v, gamma=t["gamma"], beta=t["beta"]):
        z = bn_reference(v, gamma, beta)
        return ref.neuron(z, neuron) if neuron else z

    r = rng.standard_normal(shape).astype(np.float32)
    y, dx = g.run({"x": x, "dy": r})
    if neuron:
        assert g.memory_plan(shape[0])["steps"] == [f"bn+{neuron}", f"bn_gradient+{neuron}"]
    check(y, fwd(x), rtol=1e-4, atol=1e-4)
    check(dx, numeric_grad(lambda v: (fwd(v) * r).sum(), x), rtol=3e-3, atol=3e-4)
    dgamma, dbeta = ds.grads[0], ds.grads[1]
    check(dgamma, numeric_grad(lambda v: (fwd(x, gamma=v) * r).sum(), t["gamma"]), rtol=3e-3, atol=3e-4)
    check(dbeta, numeric_grad(lambda v: (fwd(x, beta=v) * r).sum(), t["beta"]), rtol=3e-3, atol=3e-4)


def test_gelu_stays_apart_where_its_input_is_read_otherwise(device, rng):
    """GELU's gradient reads its input: without the normalization's gradient to recompute it,
    the normalization keeps it, and GELU runs in a step of its own."""
    shape = (3, 4, 5, 2)
    x = rng.standard_normal(shape).astype(np.float32)
    t = random_tensors(rng, 4)
    src, dy = ng.ImageNode(label="x"), ng.ImageNode(label="dy")
    bn = ng.BatchNormalization(src, NormCapture(t), label="bn")
    out = ng.Neuron(bn, "gelu", label="act")
    dz = out.gradient_filter(dy)
    g = ng.Graph([out.result_image, dz.result_image], device=device)
    r = rng.standard_normal(shape).astype(np.float32)
    y, dxz = g.run({"x": x, "dy": r})
    assert "bn+gelu" not in g.memory_plan(3)["steps"]
    z = bn_reference(x, t["gamma"], t["beta"])
    check(y, ref.neuron(z, "gelu"), rtol=1e-4, atol=1e-4)
    check(dxz, numeric_grad(lambda v: (ref.neuron(v, "gelu") * r).sum(), z), rtol=3e-3, atol=3e-4)


@pytest.mark.parametrize("neuron", [None, "relu"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_a_residual_addition_joins_the_normalization(device, rng, neuron, layout):
    """bn(x) + r (+ relu) in the normalizing pass, the addition's step left without a kernel:
    the forward and every gradient agree with numpy and finite differences."""
    shape = (3, 8, 5, 4)
    x = rng.standard_normal(shape).astype(np.float32) * 1.5 + 0.5
    res = rng.standard_normal(shape).astype(np.float32)
    t = random_tensors(rng, shape[1])
    ds = NormCapture(t)
    src, r, dy = ng.ImageNode(label="x"), ng.ImageNode(label="r"), ng.ImageNode(label="dy")
    bn = ng.BatchNormalization(src, ds)
    add = ng.Addition(r, bn, label="add")
    out = ng.Neuron(add, neuron) if neuron else add
    dz = out.gradient_filter(dy).result_image if neuron else dy
    dr, dbn = (f.result_image for f in add.gradient_filters(dz))
    g = ng.Graph([out.result_image, bn.gradient_filter(dbn).result_image, dr], device=device, layout=layout)

    def fwd(v, res=res, gamma=t["gamma"], beta=t["beta"]):
        z = bn_reference(v, gamma, beta) + res
        return ref.neuron(z, neuron) if neuron else z

    w = rng.standard_normal(shape).astype(np.float32)
    y, dx, dres = g.run({"x": x, "r": res, "dy": w})
    assert g.memory_plan(shape[0])["steps"][0] == "bn+add" + (f"+{neuron}" if neuron else "")
    assert not any(s.startswith("add") for s in g.memory_plan(shape[0])["steps"])
    check(y, fwd(x), rtol=1e-4, atol=1e-4)
    check(dx, numeric_grad(lambda v: (fwd(v) * w).sum(), x), rtol=3e-3, atol=3e-4)
    check(dres, numeric_grad(lambda v: (fwd(x, res=v) * w).sum(), res), rtol=3e-3, atol=3e-4)
    check(ds.grads[0], numeric_grad(lambda v: (fwd(x, gamma=v) * w).sum(), t["gamma"]), rtol=3e-3, atol=3e-4)
    check(ds.grads[1], numeric_grad(lambda v: (fwd(x, beta=v) * w).sum(), t["beta"]), rtol=3e-3, atol=3e-4)


def test_the_later_of_two_normalizations_takes_the_addition(device, rng):
    """A downsampling residual block adds two normalizations: the later one adds the other's
    result (ready by then); one whose result is read elsewhere stays apart."""
    shape = (4, 6, 3, 3)
    x1, x2 = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    t1, t2 = random_tensors(rng, 6), random_tensors(rng, 6)
    s1, s2 = ng.ImageNode(label="x1"), ng.ImageNode(label="x2")
    bn1 = ng.BatchNormalization(s1, NormCapture(t1, "bn1"))
    bn2 = ng.BatchNormalization(s2, NormCapture(t2, "bn2"))
    out = ng.Neuron(ng.Addition(bn1, bn2, label="add"), "relu")
    g = ng.Graph(out.result_image, device=device)
    got = g.run({"x1": x1, "x2": x2})
    assert g.memory_plan(4)["steps"] == ["bn1", "bn2+add+relu"]
    want = ref.neuron(bn_reference(x1, t1["gamma"], t1["beta"], t1["mean"], t1["variance"])
                      + bn_reference(x2, t2["gamma"], t2["beta"], t2["mean"], t2["variance"]), "relu")
    check(got, want, rtol=1e-4, atol=1e-4)
    # bn2's result read elsewhere: bn1 runs before bn2, so the addition keeps its own step.
    g = ng.Graph([out.result_image, bn2.result_image], device=device)
    got, _ = g.run({"x1": x1, "x2": x2})
    assert g.memory_plan(4)["steps"] == ["bn1", "bn2", "add+relu"]
    check(got, want, rtol=1e-4, atol=1e-4)
    g = ng.Graph([out.result_image, bn1.result_image], device=device)
    got, b1 = g.run({"x1": x1, "x2": x2})
    assert g.memory_plan(4)["steps"] == ["bn1", "bn2+add+relu"]
    check(got, want, rtol=1e-4, atol=1e-4)
    check(b1, bn_reference(x1, t1["gamma"], t1["beta"], t1["mean"], t1["variance"]), rtol=1e-4, atol=1e-4)


def recomputing_steps(device, fmt, recompute, residual=False):
    """Trained a step per entry of `recompute` (the graph's setting for it): losses, trained
    tensors and statistics, the plans. conv → bn → relu → conv → bn → relu → max pooling →
    fully connected, or (residual) conv + relu then two residual blocks conv → bn, + the
    block's input, → relu, then fully connected."""
    from nngraph.models._build import Builder
    b = Builder(0, ng.SGD(learning_rate=0.1, momentum=0.9))
    h = ng.ImageNode(label="x")
    if residual:
        h = ng.Neuron(b.conv(h, "c0", 3, 8, 3, padding=1), "relu")
        for k in (1, 2):
            h = ng.Neuron(ng.Addition(b.conv_bn(h, f"b{k}.", 8, 8, 3, padding=1, relu=False), h, label=f"add{k}"),
                          "relu")
        h = ng.Pooling(h, "average", 2, stride=2, label="pool")
    else:
        h = b.conv_bn(h, "b1.", 3, 8, 3, padding=1)
        h = b.conv_bn(h, "b2.", 8, 8, 3, padding=1)
        h = ng.Pooling(h, "max", 2, stride=2, label="pool")
    g = ng.Loss(b.fully_connected(h, "fc", 8 * 3 * 3, 4), "softmax_cross_entropy").training_graph(
        device=device, format=fmt)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3, 6, 6)).astype(np.float32)
    y = np.eye(4, dtype=np.float32)[[0, 2, 1, 3, 3]]
    losses, plans = [], []
    for on in recompute:
        g.recompute = on
        losses.append(g.encode(x, labels=y).loss(0))
        plans.append(g.memory_plan(5))
    tensors = {(label, n): v for label, s in b.sources.items() for n, v in s.tensors().items() if v is not None}
    return np.array(losses), tensors, plans


@pytest.mark.parametrize("fmt", ["float32", "bfloat16"])
def test_results_only_gradients_read_again_are_recomputed(device, fmt):
    """A normalization + relu whose result a convolution reads, and later that layer's
    gradient, is computed again just before the gradient instead of kept: less memory, the same
    training (each step's statistics move once), and recompute switches per step. Max
    pooling's gradient reads its winners, not its source: b2's result is neither kept nor
    computed again."""
    if fmt == "bfloat16" and device == "cpu":
        pytest.skip("the cpu computes half formats in float32")
    kept, kept_tensors, plans = recomputing_steps(device, fmt, [False] * 4)
    assert not any("recomputed" in s for s in plans[0]["steps"])
    got, got_tensors, again = recomputing_steps(device, fmt, [True, False, True, True])
    steps = again[0]["steps"]
    assert [s for s in steps if "recomputed" in s] == ["b1.bn+relu (recomputed)"]
    assert steps.index("b1.bn+relu (recomputed)") + 1 == steps.index("b2.conv_gradient")
    assert again[0]["planned_bytes"] < plans[0]["planned_bytes"]
    assert again[1] == plans[0]
    assert_same_training(device, fmt, (got, got_tensors), (kept, kept_tensors))


def assert_same_training(device, fmt, got, want):
    """Losses and tensors: the same floats on the cpu; a device's convolution gradients may sum
    in another order."""
    tol = {"cpu": 0, "cuda": 1e-5}[device] if fmt == "float32" else 2e-2
    np.testing.assert_allclose(got[0], want[0], rtol=tol, atol=tol)
    for k, w in want[1].items():
        np.testing.assert_allclose(got[1][k], w, rtol=tol, atol=tol, err_msg=str(k))


@pytest.mark.parametrize("fmt", ["float32", "bfloat16"])
def test_a_residual_sum_is_recomputed_by_its_normalization(device, fmt):
    """A residual block's output (bn + the block's input, + relu: one step) that the next
    block's convolution gradient reads again is computed again by the normalization with the
    input as addend, where that input is kept anyway; the next block's output, whose input is
    itself computed again, is kept."""
    if fmt == "bfloat16" and device == "cpu":
        pytest.skip("the cpu computes half formats in float32")
    kept, kept_tensors, plans = recomputing_steps(device, fmt, [False] * 4, residual=True)
    assert "b1.bn+add1+relu" in plans[0]["steps"] and "b2.bn+add2+relu" in plans[0]["steps"]
    got, got_tensors, again = recomputing_steps(device, fmt, [True, False, True, True], residual=True)
    steps = again[0]["steps"]
    assert [s for s in steps if "recomputed" in s] == ["b1.bn+add1+relu (recomputed)"]
    assert steps.index("b1.bn+add1+relu (recomputed)") + 1 == steps.index("b2.conv_gradient")
    assert again[0]["planned_bytes"] < plans[0]["planned_bytes"]
    assert_same_training(device, fmt, (got, got_tensors), (kept, kept_tensors))


def test_only_results_kept_at_the_memory_peak_are_recomputed(device):
    """The speed-run network's five normalizations before a convolution could each be computed
    again; the plan does so only where keeping the result would make its arena larger: the
    first block's two, whose results would be alive at the peak (that block's gradients, the
    largest). The later blocks' results are gone by then, so keeping them costs no memory."""
    from nngraph import models
    net = models.speedrun_net(classes=10, seed=0, optimizer=ng.SGD(learning_rate=0.1))
    g = ng.Loss(net.logits, "softmax_cross_entropy").training_graph(device=device)
    x = np.random.default_rng(0).standard_normal((4, 3, 32, 32)).astype(np.float32)
    g.encode(x, labels=np.arange(4)).wait()
    again = g.memory_plan(64)
    assert sorted(s for s in again["steps"] if "recomputed" in s) == [
        "block1.norm1+gelu (recomputed)", "block1.norm2+gelu (recomputed)"]
    g.recompute = False
    assert g.memory_plan(64)["planned_bytes"] > again["planned_bytes"]


def test_a_memory_budget_keeps_the_results_it_affords(device):
    """memory_budget: the share of the bytes recomputation saves that the plan spends keeping
    results again. The speed-run network's two recomputed normalizations are of one size: half
    the budget keeps one, all of it keeps both (recompute off's plan). Training is the same."""
    from nngraph import models
    x = np.random.default_rng(0).standard_normal((4, 3, 32, 32)).astype(np.float32)

    def graph(budget):
        net = models.speedrun_net(classes=10, seed=0, optimizer=ng.SGD(learning_rate=0.1))
        g = ng.Loss(net.logits, "softmax_cross_entropy").training_graph(device=device)
        g.memory_budget = budget
        return g

    plans = {}
    for budget in (0, 0.5, 1):
        g = graph(budget)
        losses = [g.encode(x, labels=np.arange(4)).loss(0) for _ in range(3)]
        plans[budget] = (g.memory_plan(64), losses)
    assert graph(0.5).memory_budget == 0.5
    recomputed = {b: sum("recomputed" in s for s in p["steps"]) for b, (p, _) in plans.items()}
    assert recomputed == {0: 2, 0.5: 1, 1: 0}
    low, mid, high = (plans[b][0]["planned_bytes"] for b in (0, 0.5, 1))
    assert low < mid <= low + 0.5 * (high - low) < high
    g = graph(0)
    g.recompute = False
    g.encode(x, labels=np.arange(4)).wait()
    assert g.memory_plan(64)["planned_bytes"] == high
    tol = {"cpu": 0, "cuda": 1e-4}[device]  # each graph times its own convolution algorithms
    for b in (0.5, 1):
        np.testing.assert_allclose(plans[b][1], plans[0][1], rtol=tol, atol=tol)
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ng.InvalidInputError, match="memory_budget"):
            g.memory_budget = bad
    assert g.memory_budget == 0


def bn_net(c, optimizer, momentum=0.1, source=None):
    ds = source or ng.ArrayDataSource(ng.NormalizationDescriptor(c), label="bn", optimizer=optimizer)
    bn = ng.BatchNormalization(ng.ImageNode(), ds, momentum=momentum)
    return ng.Loss(bn, ng.LossDescriptor("mean_squared_error", "mean")), ds


def test_running_statistics_follow_the_formula_over_steps(device, rng):
    """Eight steps: the first run eagerly, later ones replay a captured step where the device has one."""
    n, c, h, w = 6, 4, 3, 5
    loss, ds = bn_net(c, ng.SGD(learning_rate=0.05), momentum=0.3)
    g = loss.training_graph(device=device)
    mean, var = np.zeros(c), np.ones(c)
    for _ in range(8):
        x = (rng.standard_normal((n, c, h, w)) * rng.uniform(0.5, 3, (1, c, 1, 1)) + rng.standard_normal((1, c, 1, 1)))
        x = x.astype(np.float32)
        g.run(x, labels=rng.standard_normal((n, c, h, w)).astype(np.float32))
        xd = x.astype(np.float64)
        mean = 0.7 * mean + 0.3 * xd.mean(axis=(0, 2, 3))
        var = 0.7 * var + 0.3 * xd.var(axis=(0, 2, 3), ddof=1)
        check(ds.tensor("mean"), mean, rtol=1e-5, atol=1e-6)
        check(ds.tensor("variance"), var, rtol=1e-5, atol=1e-6)
    t = ds.tensors()
    y = g.inference().run(x)  # the inference graph reads the trained statistics
    check(y, bn_reference(x, t["gamma"], t["beta"], t["mean"], t["variance"]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("frozen", [["gamma"], ["beta"], ["gamma", "beta"]])
def test_frozen_parameters_stay_and_the_statistics_move(device, rng, frozen):
    x = rng.standard_normal((5, 3, 2, 2)).astype(np.float32) + 2
    t = random_tensors(rng, 3)
    ds = ng.ArrayDataSource(ng.NormalizationDescriptor(3), tensors=t, label="bn", frozen=frozen)
    assert ds.frozen == frozen
    loss = ng.Loss(ng.BatchNormalization(ng.ImageNode(), ds), ng.LossDescriptor("mean_squared_error", "sum"))
    g = loss.training_graph(device=device, optimizer=ng.SGD(learning_rate=0.1, momentum=0.9))
    g.run(x, labels=x * 0.5)
    for name in ("gamma", "beta"):
        assert np.array_equal(ds.tensor(name), t[name]) == (name in frozen), name
    check(ds.tensor("mean"), 0.9 * t["mean"] + 0.1 * x.mean(axis=(0, 2, 3)), rtol=1e-5, atol=1e-6)
    assert len(ds.optimizer_state()["slots"]) == 2 - len(frozen)  # SGD with momentum: one per trained tensor
    with pytest.raises(ng.InvalidInputError, match=r"\[bn\] mean is a statistic, which no optimizer trains"):
        ds.frozen = ["mean"]


def test_a_failed_step_leaves_the_statistics(device, rng):
    loss, ds = bn_net(3, ng.SGD(learning_rate=0.1))
    g = loss.training_graph(device=device, check_numerics=True)
    x = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    before = ds.tensors()
    bad = x.copy()
    bad[1, 0, 0, 0] = np.nan
    with pytest.raises(ng.DeviceError, match="no weights were updated"):
        g.run(bad, labels=x)
    for name, value in ds.tensors().items():
        np.testing.assert_array_equal(value, before[name])
    g.run(x, labels=x)
    assert not np.array_equal(ds.tensor("mean"), before["mean"])


def test_checkpoints_hold_the_running_statistics(device, rng, tmp_path):
    loss, ds = bn_net(3, ng.Adam(learning_rate=0.01))
    g = loss.training_graph(device=device)
    x = rng.standard_normal((4, 3, 2, 2)).astype(np.float32) * 3
    g.run(x, labels=x)
    ng.save(tmp_path / "bn.safetensors", g)
    loss2, ds2 = bn_net(3, ng.Adam(learning_rate=0.01))
    g2 = loss2.training_graph(device=device)
    ng.load(tmp_path / "bn.safetensors", g2)
    for name, value in ds.tensors().items():
        np.testing.assert_array_equal(ds2.tensor(name), value)


def test_bad_input_names_the_node(rng):
    x = ng.ImageNode()
    with pytest.raises(ng.InvalidInputError, match=r"\[bn1\] epsilon must be finite and > 0, got 0"):
        ng.BatchNormalization(x, 3, epsilon=0, label="bn1")
    with pytest.raises(ng.InvalidInputError, match=r"\[bn1\] momentum must be in \[0, 1\], got 1.5"):
        ng.BatchNormalization(x, 3, momentum=1.5, label="bn1")
    conv = ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 2, 2), label="c")
    with pytest.raises(ng.InvalidInputError, match=r"describes convolution parameters .* not normalization"):
        ng.BatchNormalization(x, conv)
    g = ng.Graph(ng.BatchNormalization(x, 4, label="bn2").result_image)
    with pytest.raises(ng.InvalidInputError, match=r"\[bn2\] source has 3 feature channels, its data source describes"):
        g.run(np.ones((2, 3, 2, 2), np.float32))
    t = random_tensors(rng, 3)
    t["variance"][1] = -0.5
    with pytest.raises(ng.InvalidInputError, match=r"\[bn\] data source 'bn' variance hold -0.5, below zero"):
        ng.Graph(ng.BatchNormalization(ng.ImageNode(), NormCapture(t)).result_image)
    with pytest.raises(ng.InvalidInputError, match=r"variance hold -0.5, below zero"):
        ng.ArrayDataSource(ng.NormalizationDescriptor(3), tensors={"variance": t["variance"]})
    t = random_tensors(rng, 3)
    t["beta"] = np.ones(4, np.float32)
    with pytest.raises(ng.InvalidInputError, match=r"\[bn\] data source 'bn' returned 4 beta, expected 3"):
        ng.Graph(ng.BatchNormalization(ng.ImageNode(), NormCapture(t)).result_image)


def test_residual_network_learns_digits(device):
    """The batch-normalized residual network on 8×8 digits: trains, and its inference graph
    (running statistics) scores what its last epoch's validation did."""
    from sklearn.datasets import load_digits

    from nngraph.models import residual_network
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    y = d.target.astype(np.int32)
    net = residual_network(widths=(8, 16), size=8, seed=1)
    g = ng.Loss(net.logits, ng.LossDescriptor("softmax_cross_entropy", "mean")).training_graph(
        device=device, optimizer=ng.Adam(learning_rate=0.01))
    history = ng.fit(g, (x[:1400], y[:1400]), epochs=6, batch_size=50, validation=(x[1400:], y[1400:]),
                     lr_schedule=ng.schedules.cosine(0.01, total_steps=6 * 28), progress=False)
    assert history["val_accuracy"][-1] >= 0.93, history
    scores = g.predict(x[1400:])
    assert np.mean(scores.argmax(axis=1) == y[1400:]) == history["val_accuracy"][-1]
    assert not np.allclose(net.sources["s1_bn"].tensor("variance"), 1)  # the statistics moved
