"""Parameters by layer kind: each descriptor names the tensors its data source supplies
(convolutions and matrices: weights, biases; normalizations: gamma, beta, mean, variance),
and sources, graphs, optimizer state and checkpoints carry exactly those."""

import numpy as np
import pytest
from sources import HeldSource, checkpoint_contents, write_checkpoint

import nngraph as ng


def specs(d):
    return [(t.name, t.shape, t.optional, t.trained, t.fill) for t in d.tensors]


def test_descriptors_name_their_tensors():
    assert specs(ng.ConvolutionDescriptor((3, 2), 4, 6, groups=2)) == [
        ("weights", (6, 2, 3, 2), False, True, 0.0), ("biases", (6,), True, True, 0.0)]
    assert specs(ng.MatrixDescriptor(8, 5)) == [
        ("weights", (8, 5), False, True, 0.0), ("biases", (8,), True, True, 0.0)]
    assert specs(ng.MatrixDescriptor(4, 4, diagonal=True))[0] == ("weights", (4,), False, True, 0.0)
    assert specs(ng.NormalizationDescriptor(3)) == [
        ("gamma", (3,), False, True, 1.0), ("beta", (3,), False, True, 0.0),
        ("mean", (3,), False, False, 0.0), ("variance", (3,), False, False, 1.0)]
    with pytest.raises(ng.InvalidInputError, match="a diagonal matrix is square, got 4×5"):
        ng.MatrixDescriptor(4, 5, diagonal=True)
    with pytest.raises(ng.InvalidInputError, match="feature channels must be positive, got 0"):
        ng.NormalizationDescriptor(0)


def test_normalization_source_fills_and_replaces_named_tensors(rng):
    gamma = rng.standard_normal(3).astype(np.float32)
    ds = ng.ArrayDataSource(ng.NormalizationDescriptor(3), tensors={"gamma": gamma}, label="bn")
    t = ds.tensors()
    assert list(t) == ["gamma", "beta", "mean", "variance"]
    np.testing.assert_array_equal(t["gamma"], gamma)
    np.testing.assert_array_equal(t["beta"], np.zeros(3, np.float32))
    np.testing.assert_array_equal(t["variance"], np.ones(3, np.float32))
    mean = rng.standard_normal(3).astype(np.float32)
    ds.set_tensors({"mean": mean})
    np.testing.assert_array_equal(ds.tensor("mean"), mean)
    np.testing.assert_array_equal(ds.tensor("gamma"), gamma)  # the others keep their values
    with pytest.raises(ng.InvalidInputError, match=r"\[bn\] a normalization source has no tensor 'scale'"):
        ds.set_tensors({"scale": mean})
    with pytest.raises(ng.InvalidInputError, match=r"\[bn\] a normalization source has no weights: use set_tensors"):
        ds.set_weights(np.ones(3, np.float32))
    with pytest.raises(ng.InvalidInputError, match=r"variance hold NaN or inf"):
        ds.set_tensors({"variance": np.array([1, np.nan, 1], np.float32)})
    np.testing.assert_array_equal(ds.tensor("variance"), np.ones(3, np.float32))  # unchanged
    with pytest.raises(ng.InvalidInputError, match=r"gamma must have shape \(3,\)"):
        ng.ArrayDataSource(ng.NormalizationDescriptor(3), tensors={"gamma": np.ones(4, np.float32)})
    with pytest.raises(ng.InvalidInputError, match="has no weights or biases: give tensors"):
        ng.ArrayDataSource(ng.NormalizationDescriptor(3), weights="glorot")


def test_optimizer_state_covers_trained_tensors_only():
    ds = ng.ArrayDataSource(ng.NormalizationDescriptor(3), label="bn", optimizer=ng.Adam())
    good = {"step": 2, "slots": [np.full(3, k, np.float32) for k in range(4)]}  # gamma m, v; beta m, v
    ds.check_optimizer_state(good)
    with pytest.raises(ng.InvalidInputError, match=r"\[bn\] optimizer state has 8 vectors, expected 4"):
        ds.check_optimizer_state({"step": 2, "slots": good["slots"] * 2})
    ds.load_optimizer_state(good)
    assert ds.optimizer_state()["step"] == 2
    assert [s[0] for s in ds.optimizer_state()["slots"]] == [0, 1, 2, 3]


class PyNorm(HeldSource):
    """A Python normalization source: one method per tensor its descriptor names."""

    def __init__(self, c, rng, missing=None):
        super().__init__(ng.NormalizationDescriptor(c), "pynorm")
        self.values = {k: rng.standard_normal(c).astype(np.float32) for k in ("gamma", "beta", "mean", "variance")}
        self.missing = missing

    def gamma(self):
        return self.values["gamma"]

    def beta(self):
        return self.values["beta"]

    def mean(self):
        return self.values["mean"]

    def variance(self):
        return None if self.missing == "variance" else self.values["variance"]


def test_python_sources_supply_each_named_tensor(rng):
    src = PyNorm(4, rng)
    got = src.tensors()
    for name, want in src.values.items():
        np.testing.assert_array_equal(got[name], want)
    assert PyNorm(4, rng, missing="variance").tensors()["variance"] is None


def test_a_layer_refuses_a_source_of_another_kind():
    ds = ng.ArrayDataSource(ng.NormalizationDescriptor(4), label="bn")
    with pytest.raises(ng.InvalidInputError,
                       match=r"\[bn\] data source 'bn' describes normalization parameters \(4 channels\), "
                             r"not convolution ones"):
        ng.Convolution(ng.ImageNode(), ds)
    with pytest.raises(ng.InvalidInputError, match="describes normalization 4 channels, expected a 4×4 matrix"):
        ng.SingleGate(4, 4, recurrent_weights=[ds], unit_input=True)


def lstm_per_gate(i, h, blocks, kind):
    """An LSTM whose gate matrices come from ArrayDataSources of matrix or (as MPS takes them)
    1×1 convolution descriptors."""
    def source(w, b, diagonal=False):
        if kind == "matrix":
            d = ng.MatrixDescriptor(w.shape[0], w.shape[0] if diagonal else w.shape[1], diagonal=diagonal)
            return ng.ArrayDataSource(d, w.reshape(d.tensors[0].shape), b)
        groups = w.shape[0] if diagonal else 1
        d = ng.ConvolutionDescriptor(1, w.shape[0] if diagonal else w.shape[1], w.shape[0], groups=groups)
        return ng.ArrayDataSource(d, w.reshape(d.tensors[0].shape), b)
    return ng.LSTM(i, h, peephole=True,
                   input_weights=[source(w, b) for w, b in blocks["input"]],
                   recurrent_weights=[source(w, None) for w in blocks["recurrent"]],
                   memory_weights=[source(p, None, diagonal=True) for p in blocks["memory"]])


def test_matrix_sources_drive_recurrent_gates(device, rng):
    i, h = 3, 4
    blocks = {"input": [(rng.standard_normal((h, i)).astype(np.float32), rng.standard_normal(h).astype(np.float32))
                        for _ in range(4)],
              "recurrent": [rng.standard_normal((h, h)).astype(np.float32) for _ in range(4)],
              "memory": [rng.standard_normal(h).astype(np.float32) for _ in range(3)]}
    x = rng.standard_normal((2, i, 1, 5)).astype(np.float32)
    out = {kind: ng.Graph([ng.RNN(ng.ImageNode(), lstm_per_gate(i, h, blocks, kind)).result_image],
                          device=device).run([x]) for kind in ("matrix", "convolution")}
    np.testing.assert_allclose(out["matrix"], out["convolution"], rtol=1e-6, atol=1e-6)
    assert np.abs(out["matrix"]).max() > 0.01
    layer = ng.LSTM(i, h, peephole=True)
    assert layer.layer_descriptor == ng.MatrixDescriptor(4 * h, i + h + 1)
    assert layer.data_sources[0].weights().shape == (4 * h, i + h + 1)


def test_checkpoints_carry_every_kind(tmp_path, rng):
    norm = ng.ArrayDataSource(ng.NormalizationDescriptor(3), label="bn", optimizer=ng.SGD(momentum=0.9),
                              tensors={"mean": rng.standard_normal(3).astype(np.float32)})
    mat = ng.ArrayDataSource(ng.MatrixDescriptor(4, 2), "glorot", None, label="gate", seed=3)
    saved = {ds.label(): ds.tensors() for ds in (norm, mat)}
    ng.save(tmp_path / "c.safetensors", [norm, mat])
    norm.set_tensors({k: rng.standard_normal(3).astype(np.float32) for k in ("gamma", "mean")})
    mat.set_weights(np.zeros((4, 2), np.float32))
    ng.load(tmp_path / "c.safetensors", [norm, mat])
    for ds in (norm, mat):
        for name, want in saved[ds.label()].items():
            if want is None:
                assert ds.tensor(name) is None
            else:
                np.testing.assert_array_equal(ds.tensor(name), want)


def test_recurrent_checkpoints_written_with_convolution_shapes_still_load(tmp_path, rng):
    """Layer sources were 1×1 convolutions once: their files hold (rows, columns, 1, 1) weights."""
    src = ng.ArrayDataSource(ng.LSTM(2, 3).layer_descriptor, label="lstm", seed=1)
    ng.save(tmp_path / "new.safetensors", [src])
    arrays, header = checkpoint_contents(tmp_path / "new.safetensors")
    want = rng.standard_normal((12, 5)).astype(np.float32)
    arrays["lstm/weights"] = want[:, :, None, None]
    ng.load(write_checkpoint(tmp_path / "old.npz", arrays, header, legacy=True), [src])
    np.testing.assert_array_equal(src.weights(), want)
    arrays["lstm/weights"] = np.ascontiguousarray(want.reshape(12, 5, 1, 1).transpose(1, 0, 2, 3))
    with pytest.raises(ng.InvalidInputError, match=r"weights are \(5, 12, 1, 1\), the data source has \(12, 5\)"):
        ng.load(write_checkpoint(tmp_path / "bad.npz", arrays, header, legacy=True), [src])


def test_cpu_graphs_compute_with_the_sources_arrays(rng):
    # One copy of the weights on the cpu: graphs there read and train the source's arrays, so a
    # graph adds no parameter memory but the filter packed for its convolution over few
    # positions (made again after each change), and every graph and reader sees each change at once.
    import reference as ref
    d = ng.ConvolutionDescriptor(3, 128, 128)
    src = ng.ArrayDataSource(d, "he", "zeros", "big", seed=1)
    x = rng.standard_normal((2, 128, 6, 6)).astype(np.float32)
    held = ng.memory_stats("cpu")["current_bytes"]
    infer = ng.Graph(ng.Convolution(ng.ImageNode(), src, padding="same"), device="cpu")
    np.testing.assert_allclose(infer.run(x), ref.conv2d(x, src.weights(), src.biases(), padding="same"), rtol=1e-4,
                               atol=1e-4)
    assert ng.memory_stats("cpu")["current_bytes"] - held < src.weights().nbytes * 5 // 4
    new = rng.standard_normal(d.weights_shape).astype(np.float32) * 0.05
    src.set_weights(new, src.biases())
    np.testing.assert_allclose(infer.run(x), ref.conv2d(x, new, src.biases(), padding="same"), rtol=1e-4, atol=1e-4)
    train = ng.Loss(ng.Convolution(ng.ImageNode(), src, padding="same"), "mean_squared_error").training_graph(
        device="cpu", optimizer=ng.SGD(learning_rate=0.1))
    train.run(x, labels=np.zeros((2, 128, 6, 6), np.float32))
    trained = src.weights()
    assert not np.allclose(trained, new)
    np.testing.assert_allclose(infer.run(x), ref.conv2d(x, trained, src.biases(), padding="same"), rtol=1e-4,
                               atol=1e-4)
