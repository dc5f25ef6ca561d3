"""A load, a step and a fit either complete or change nothing; a graph never waits for itself;
every graph computes with its data sources' latest values."""

import zipfile

import numpy as np
import pytest
from sources import FixedSource, checkpoint_contents, write_checkpoint
from test_training import small_net

import nngraph as ng

X = np.random.default_rng(5).random((16, 1, 8, 8), dtype=np.float32)
Y = np.arange(16) % 10


def values(srcs):
    return {k: (ds.weights().copy(), None if ds.biases() is None else ds.biases().copy()) for k, ds in srcs.items()}


def assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k][0], b[k][0])
        np.testing.assert_array_equal(a[k][1], b[k][1])


# ---- checkpoints


def trained_checkpoint(tmp_path, optimizer, device="cpu"):
    loss, srcs = small_net(optimizer)
    g = loss.training_graph(device=device)
    g.run(X, labels=Y)
    ng.save(tmp_path / "m.safetensors", g)
    return tmp_path / "m.safetensors"


def test_checkpoint_of_another_optimizer_changes_nothing(tmp_path, device):
    path = trained_checkpoint(tmp_path, ng.SGD(learning_rate=0.1, momentum=0.9), device)
    loss, srcs = small_net(ng.Adam())
    g = loss.training_graph(device=device)
    g.run(X, labels=Y)
    before, steps = values(srcs), [ds.optimizer_state()["step"] for ds in srcs.values()]
    with pytest.raises(ng.InvalidInputError, match=r"\[c1\] optimizer state has 2 vectors, expected 4"):
        ng.load(path, g)
    assert_same(values(srcs), before)
    assert [ds.optimizer_state()["step"] for ds in srcs.values()] == steps


def rewrite(path, out, change, legacy=False):
    """Copies checkpoint `path` to `out` with change(arrays, header) applied, as safetensors or
    as an .npz of earlier versions."""
    arrays, header = checkpoint_contents(path)
    change(arrays, header)
    return write_checkpoint(out, arrays, header, legacy)


MUTATIONS = {
    "int weights": (lambda a, m: a.update({"f2/weights": a["f2/weights"].astype(np.int32)}), "f2.* hold int32"),
    "NaN weights": (lambda a, m: a["f2/weights"].flat.__setitem__(0, np.nan), "f2.* hold NaN"),
    "NaN slot": (lambda a, m: a["f2/slot1"].flat.__setitem__(0, np.nan), r"\[f2\] optimizer state vector 1 holds NaN"),
    "slot shape": (lambda a, m: a.update({"f2/slot0": a["f2/slot0"][:3]}), r"\[f2\] optimizer state vector 0 has 3"),
    "negative step": (lambda a, m: m["sources"]["f2"].update(step=-4), r"\[f2\] optimizer step must be >= 0"),
    "string step": (lambda a, m: m["sources"]["f2"].update(step="7"), "f2.* malformed entry"),
    "missing slot": (lambda a, m: a.pop("f2/slot2"), "f2.* missing optimizer state"),
    "missing weights": (lambda a, m: a.pop("f2/weights"), "f2.* weights are missing"),
    "no table": (lambda a, m: m.update(sources=[]), "not a readable nngraph checkpoint"),
    "no format": (lambda a, m: m.update(format="other"), "not a readable nngraph checkpoint"),
}


@pytest.mark.parametrize("legacy", [False, True], ids=["safetensors", "npz"])
@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutated_checkpoints_raise_and_change_nothing(tmp_path, name, legacy):
    path = trained_checkpoint(tmp_path, ng.Adam())
    change, message = MUTATIONS[name]
    bad = rewrite(path, tmp_path / ("bad.npz" if legacy else "bad.safetensors"), change, legacy)
    loss, srcs = small_net(ng.Adam())
    g = loss.training_graph()
    before = values(srcs)
    with pytest.raises(ng.InvalidInputError, match=message):
        ng.load(bad, g)
    assert_same(values(srcs), before)  # c1 and f1 come first and were fine: still untouched
    ng.load(path, g)  # the good file loads


def test_unreadable_zip_member_is_invalid_input(tmp_path):
    """zipfile's own errors (a compression it lacks, a bad member) become InvalidInputError."""
    path = rewrite(trained_checkpoint(tmp_path, ng.Adam()), tmp_path / "m.npz", lambda a, m: None, legacy=True)
    raw = bytearray(path.read_bytes())
    central = raw.find(b"PK\x01\x02")  # the first member's entry in the central directory
    raw[central + 10:central + 12] = (99).to_bytes(2, "little")  # an unknown compression method
    (tmp_path / "odd.npz").write_bytes(bytes(raw))
    loss, srcs = small_net(ng.Adam())
    with pytest.raises(ng.InvalidInputError, match="not a readable nngraph checkpoint"):
        ng.load(tmp_path / "odd.npz", loss.training_graph())
    with zipfile.ZipFile(tmp_path / "list.npz", "w") as z:
        z.writestr("__nngraph__.npy", b"nonsense")
    with pytest.raises(ng.InvalidInputError):
        ng.load(tmp_path / "list.npz", loss.training_graph())


def test_untrained_checkpoint_resets_the_optimizer(tmp_path):
    loss, srcs = small_net(ng.Adam())
    g = loss.training_graph()
    ng.save(tmp_path / "fresh.safetensors", g)
    fresh = values(srcs)
    g.run(X, labels=Y)
    ng.load(tmp_path / "fresh.safetensors", g)
    assert_same(values(srcs), fresh)
    assert srcs["c1"].optimizer_state()["step"] == 0


# ---- a step's updates


class FailingSGD(ng.Optimizer):
    """Plain SGD on the host that raises `error` on its `fail_at`-th call."""

    def __init__(self, fail_at, error=RuntimeError):
        super().__init__(learning_rate=0.1)
        self.calls, self.fail_at, self.error = 0, fail_at, error

    def slot_count(self):
        return 0

    def update(self, values, gradient, slots, step):
        self.calls += 1
        values -= self.learning_rate * gradient
        if self.calls == self.fail_at:
            raise self.error("update failed")


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_failing_host_optimizer_changes_no_parameter(device, error):
    opt = FailingSGD(fail_at=4, error=error)  # c1's weights, biases, f1's weights, then f1's biases fails
    loss, srcs = small_net(opt)
    g = loss.training_graph(device=device)
    before = values(srcs)
    with pytest.raises(error, match="update failed"):
        g.run(X, labels=Y)
    assert_same(values(srcs), before)
    assert all(ds.optimizer_state()["step"] == 0 for ds in srcs.values())
    opt.fail_at = -1
    g.run(X, labels=Y)  # the next step trains every layer
    after = values(srcs)
    assert all(not np.array_equal(after[k][0], before[k][0]) for k in srcs)


class HostSource(FixedSource):
    """A data source that trains itself on the host (w ← w − 0.1·g) and may fail."""

    def __init__(self, label, w, fail=False):
        super().__init__(w, np.zeros(w.shape[0], np.float32), label)
        self.fail = fail

    def update(self, gradient, weights):
        if self.fail:
            raise ValueError(f"{self._label} cannot update")
        self.w = weights[0] - 0.1 * gradient[0]
        self.b = weights[1] - 0.1 * gradient[1]
        return self.w, self.b


def test_failing_data_source_update_undoes_the_built_in_updates(device, rng):
    first = ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 1, 4), label="first", optimizer=ng.Adam())
    last = HostSource("last", rng.standard_normal((10, 4, 6, 6)).astype(np.float32), fail=True)
    h = ng.Neuron(ng.Convolution(ng.ImageNode(shape=(1, 8, 8)), first), "relu")
    loss = ng.Loss(ng.FullyConnected(h, last), ng.LossDescriptor("softmax_cross_entropy"))
    g = loss.training_graph(device=device)
    w0 = first.weights().copy()
    for _ in range(2):
        with pytest.raises(ValueError, match="last cannot update"):
            g.run(X, labels=Y)
        np.testing.assert_array_equal(first.weights(), w0)
        assert first.optimizer_state()["step"] == 0
    last.fail = False
    g.run(X, labels=Y)
    assert not np.array_equal(first.weights(), w0)


def test_fit_waits_for_steps_in_flight_before_raising(device):
    loss, srcs = small_net(ng.SGD(learning_rate=0.05))
    g = loss.training_graph(device=device)

    def stop(step, logs):
        raise KeyboardInterrupt  # at the first step's result, with the second already encoded

    with pytest.raises(KeyboardInterrupt):
        ng.fit(g, (X, Y), epochs=1, batch_size=4, batch_callbacks=[stop], progress=False, shuffle=False)
    assert srcs["c1"].optimizer_state()["step"] == g.max_in_flight  # every encoded step ran, no more
    w = srcs["c1"].weights().copy()
    np.testing.assert_array_equal(srcs["c1"].weights(), w)


# ---- waiting for itself


def test_callbacks_that_wait_on_their_own_graph_raise_at_once(device):
    g = ng.Graph(ng.Neuron(ng.ImageNode(), "relu"), device=device)
    x = np.ones((2, 3, 4, 4), np.float32)
    for body in (lambda h: g.encode(x).wait(), lambda h: g.run(x), lambda h: h.wait()):
        with pytest.raises(ng.InvalidInputError, match="own|wait for itself"):
            g.encode(x, callback=body).wait()
    # Another graph (an inference graph has its own queue) may be run from a callback.
    other = ng.Graph(ng.Neuron(ng.ImageNode(), "relu"), device=device)
    seen = []
    g.encode(x, callback=lambda h: seen.append(other.run(-x).sum())).wait()
    assert seen == [0.0]
    np.testing.assert_array_equal(g.run(x), x)  # the graph still works


def test_data_source_update_that_runs_its_own_graph_raises(device, rng):
    holder = {}

    class Reentrant(HostSource):
        def update(self, gradient, weights):
            holder["graph"].run(X, labels=Y)
            return None

    src = Reentrant("re", rng.standard_normal((10, 1, 8, 8)).astype(np.float32))
    loss = ng.Loss(ng.FullyConnected(ng.ImageNode(shape=(1, 8, 8)), src), ng.LossDescriptor("softmax_cross_entropy"))
    holder["graph"] = g = loss.training_graph(device=device)
    with pytest.raises(ng.InvalidInputError, match="data-source update or optimizer would wait for itself"):
        g.run(X, labels=Y)


# ---- every graph computes with the latest values


def test_graphs_sharing_a_data_source_see_each_others_training(device):
    loss, srcs = small_net(ng.SGD(learning_rate=0.1), keep=1.0)
    g1, g2 = loss.training_graph(device=device), loss.training_graph(device=device)
    i2 = g2.inference()
    before = i2.run(X)
    g1.run(X, labels=Y)
    after = g1.inference().run(X)
    assert not np.allclose(before, after)
    np.testing.assert_array_equal(i2.run(X), after)
    l2 = g2.encode(X, labels=Y)
    l2.wait()
    np.testing.assert_allclose(l2.result(), after, rtol=1e-6)  # g2's step started from g1's weights
    np.testing.assert_array_equal(g1.inference().run(X), g2.inference().run(X))


def test_graphs_on_two_devices_share_the_latest_values():
    if "cuda" not in [d for d in ng.built_backends() if ng.device_count(d) > 0]:
        pytest.skip("needs the cuda backend")
    loss, srcs = small_net(ng.SGD(learning_rate=0.1))
    gpu, cpu = loss.training_graph(device="cuda"), loss.training_graph(device="cpu").inference()
    gpu.run(X, labels=Y)
    np.testing.assert_allclose(cpu.run(X), gpu.inference().run(X), rtol=1e-4, atol=1e-5)


def test_host_data_source_trained_by_one_graph_is_read_by_the_other(device, rng):
    src = HostSource("host", rng.standard_normal((10, 1, 8, 8)).astype(np.float32))
    loss = ng.Loss(ng.FullyConnected(ng.ImageNode(shape=(1, 8, 8)), src), ng.LossDescriptor("softmax_cross_entropy"))
    g1, g2 = loss.training_graph(device=device), loss.training_graph(device=device)
    g1.run(X, labels=Y)
    want = X.reshape(16, 64) @ src.w.reshape(10, 64).T + src.b
    np.testing.assert_allclose(g2.inference().run(X).reshape(16, 10), want, rtol=1e-4, atol=1e-5)
