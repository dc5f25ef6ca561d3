"""The model store: versions put and listed with their metadata, models got back computing the
same, resident graphs returned without reading files, and what it refuses."""

import numpy as np
import pytest

pytest.importorskip("onnx")

import nngraph as ng  # noqa: E402
from nngraph.store import Store  # noqa: E402


def classifier(seed, classes=10):
    x = ng.ImageNode(shape=(1, 8, 8), label="image")
    h = ng.Neuron(ng.Convolution(x, ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 1, 4), "he", "zeros", "conv",
                                                       seed=seed), padding="same"), "relu")
    h = ng.GlobalAveragePooling(ng.BatchNormalization(h, 4))
    logits = ng.FullyConnected(h, ng.ArrayDataSource(ng.ConvolutionDescriptor(1, 4, classes), "glorot", "zeros", "fc",
                                                     seed=seed + 1))
    return ng.SoftMax(logits, label="probabilities")


def test_put_list_get(tmp_path, device, rng):
    store = Store(tmp_path / "models", device=device)
    g1, g2 = ng.Graph(classifier(1)), ng.Graph(classifier(5, classes=3))
    x = rng.random((5, 1, 8, 8), dtype=np.float32)
    assert store.put("digits", g1, classes=[str(i) for i in range(10)], accuracy=0.91, metadata={"epochs": 3}) == 1
    assert store.put("digits", g2, accuracy=0.95) == 2
    assert store.put("other-model_1.0", g1) == 1
    infos = store.list()
    assert [(i.name, i.version) for i in infos] == [("digits", 1), ("digits", 2), ("other-model_1.0", 1)]
    first = infos[0]
    assert first.classes == [str(i) for i in range(10)] and first.accuracy == 0.91 and first.metadata == {"epochs": 3}
    assert first.inputs == [("image", [None, 1, 8, 8])] and first.outputs == [("probabilities", [None, 10, 1, 1])]
    assert first.date.endswith("+00:00") and len(first.sha256) == 64
    latest = store.get("digits")
    assert store.info("digits").version == 2
    np.testing.assert_allclose(latest.run(x), g2.run(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(store.get("digits", 1).run(x), g1.run(x), rtol=1e-5, atol=1e-6)
    assert str(latest.device) == str(ng.Device(device))


def test_resident_models_switch_without_reading_files(tmp_path, rng):
    store = Store(tmp_path)
    store.put("a", ng.Graph(classifier(1)))
    store.put("b", ng.Graph(classifier(2)))
    a, b = store.get("a"), store.get("b")
    x = rng.random((2, 1, 8, 8), dtype=np.float32)
    want = a.run(x)
    for f in tmp_path.glob("*/v1/model.onnx"):
        f.unlink()  # resident graphs need no file
    assert store.get("a") is a and store.get("b") is b
    np.testing.assert_array_equal(store.get("a").run(x), want)
    assert store.resident() == [("b", 1, "cpu"), ("a", 1, "cpu")]
    assert store.evict("a") == 1 and store.resident() == [("b", 1, "cpu")]
    with pytest.raises(FileNotFoundError):
        store.get("a")


def test_capacity_evicts_the_least_recently_used(tmp_path):
    store = Store(tmp_path, capacity=2)
    for name in "abc":
        store.put(name, ng.Graph(classifier(1)))
    store.get("a"), store.get("b"), store.get("a"), store.get("c")
    assert [k[0] for k in store.resident()] == ["a", "c"]


def test_a_foreign_onnx_model_and_a_training_graph_go_in(tmp_path, rng):
    import nngraph.onnx as ngx
    graph = ng.Graph(classifier(3))
    ngx.save(graph, tmp_path / "model.onnx")
    store = Store(tmp_path / "store")
    assert store.put("from-file", tmp_path / "model.onnx") == 1
    assert store.put("from-bytes", (tmp_path / "model.onnx").read_bytes()) == 1
    loss = ng.Loss(classifier(4).sources[0], ng.LossDescriptor("softmax_cross_entropy"))
    train = loss.training_graph(optimizer=ng.SGD(0.1))
    assert store.put("trained", train) == 1
    x = rng.random((3, 1, 8, 8), dtype=np.float32)
    np.testing.assert_allclose(store.get("from-file").run(x), graph.run(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(store.get("trained").run(x), train.inference().run(x), rtol=1e-5, atol=1e-6)


def test_bad_names_missing_models_and_changed_files(tmp_path):
    store = Store(tmp_path)
    for bad in ["", "../up", "a/b", ".hidden", 3]:
        with pytest.raises(ng.InvalidInputError, match="model names"):
            store.put(bad, ng.Graph(classifier(1)))
    assert store.list() == []
    with pytest.raises(ng.InvalidInputError, match=r"no model 'nope' in .*versions: none"):
        store.get("nope")
    store.put("m", ng.Graph(classifier(1)))
    with pytest.raises(ng.InvalidInputError, match="no model 'm' version 7"):
        store.get("m", 7)
    path = tmp_path / "m" / "v1" / "model.onnx"
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ng.InvalidInputError, match="does not match its SHA-256"):
        store.get("m")
    (tmp_path / "m" / "v1" / "meta.json").write_text("{")
    with pytest.raises(ng.InvalidInputError, match="meta.json is malformed"):
        store.info("m")
    with pytest.raises(ng.InvalidInputError, match="not a valid ONNX model"):
        store.put("junk", b"not a model")
    with pytest.raises(ng.UnsupportedError):  # nothing is stored that nngraph cannot run
        store.put("mgu", ng.Graph(ng.RNN(ng.ImageNode(shape=(2, 1, 3)), ng.MGU(2, 2))))
    assert store.versions("mgu") == []
