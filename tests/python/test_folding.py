"""Inference graphs fold a batch normalization into the convolution before it: the folded graph
computes what the unfolded one does, and follows every change of either layer's values."""

import numpy as np
import pytest
from test_gradients import check
from test_normalization import NormCapture, bn_reference, random_tensors

import nngraph as ng


def conv_bn(rng, c_in, c_out, kernel=3, bias=True, stride=1, groups=1, neuron="relu", fc=False, bn_source=None):
    """source → convolution (or fully connected) → batch normalization [→ neuron]: the
    convolution, the last node and both data sources."""
    desc = ng.ConvolutionDescriptor(kernel, c_in, c_out, stride=stride, groups=groups)
    conv_ds = ng.ArrayDataSource(desc, "he", rng.standard_normal(c_out).astype(np.float32) if bias else None,
                                 label="conv", seed=int(rng.integers(1000)))
    bn_ds = bn_source or ng.ArrayDataSource(ng.NormalizationDescriptor(c_out), tensors=random_tensors(rng, c_out),
                                            label="bn")
    src = ng.ImageNode(label="x")
    conv = ng.FullyConnected(src, conv_ds) if fc else ng.Convolution(src, conv_ds, padding="same")
    out = ng.BatchNormalization(conv, bn_ds, epsilon=1e-3)
    if neuron:
        out = ng.Neuron(out, neuron)
    return conv, out, conv_ds, bn_ds


def folded_and_unfolded(out, conv, device):
    """An inference graph over `out`, and one that also returns the convolution's result, which
    a folded normalization would overwrite, so nothing folds there."""
    return ng.Graph(out.result_image, device=device), ng.Graph([out.result_image, conv.result_image], device=device)


def steps(graph, x):
    graph.run(x)
    return graph.memory_plan(len(x))["steps"]


CASES = {
    "conv+relu": {"c_in": 3, "c_out": 5, "x": (4, 3, 7, 6)},
    "no bias, no neuron": {"c_in": 3, "c_out": 4, "bias": False, "neuron": None, "x": (2, 3, 5, 5)},
    "stride 2, groups": {"c_in": 4, "c_out": 6, "stride": 2, "groups": 2, "neuron": "sigmoid", "x": (3, 4, 9, 8)},
    "fully connected": {"c_in": 3 * 4 * 4, "c_out": 7, "kernel": 1, "fc": True, "x": (5, 3, 4, 4)},
    # Long sums over few positions: the cpu packs the folded filter for its lane kernel.
    "deep, few positions": {"c_in": 32, "c_out": 40, "x": (2, 32, 7, 5)},
}


@pytest.mark.parametrize("case", CASES)
def test_the_folded_graph_equals_the_unfolded_one(device, rng, case):
    kw = dict(CASES[case])
    x = rng.standard_normal(kw.pop("x")).astype(np.float32)
    conv, out, _, bn_ds = conv_bn(rng, **kw)
    folded, unfolded = folded_and_unfolded(out, conv, device)
    neuron = kw.get("neuron", "relu")
    label = conv.label
    assert steps(folded, x) == [label + "+bn" + (f"+{neuron}" if neuron else "")]
    assert steps(unfolded, x)[0] == label
    y, (y_ref, z) = folded.run(x), unfolded.run(x)
    check(y, y_ref, rtol=1e-5, atol=1e-5)
    t = bn_ds.tensors()
    expected = bn_reference(z, t["gamma"], t["beta"], t["mean"], t["variance"], 1e-3)
    if neuron == "relu":
        expected = np.maximum(expected, 0)
    elif neuron == "sigmoid":
        expected = 1 / (1 + np.exp(-expected))
    check(y, expected, rtol=1e-5, atol=1e-5)


def test_folding_follows_training(device, rng):
    """Each step trains the convolution and moves the statistics; the training graph's inference
    graph folds them again before its next run (captured steps included)."""
    opt = ng.SGD(learning_rate=0.05, momentum=0.9)
    conv, out, conv_ds, bn_ds = conv_bn(rng, 2, 3)
    conv_ds.optimizer, bn_ds.optimizer = opt, opt
    logits = ng.FullyConnected(out, ng.ArrayDataSource(ng.ConvolutionDescriptor(1, 3 * 5 * 5, 4), label="fc",
                                                       optimizer=opt))
    training = ng.Loss(logits, ng.LossDescriptor("softmax_cross_entropy", "mean")).training_graph(device=device)
    inference, unfolded = training.inference(), ng.Graph([logits.result_image, conv.result_image], device=device)
    x = rng.standard_normal((6, 2, 5, 5)).astype(np.float32)
    labels = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 6)][:, :, None, None]
    assert "conv+bn+relu" in steps(inference, x)
    before = inference.run(x)
    for _ in range(5):
        training.run(x, labels=labels)
        check(inference.run(x), unfolded.run(x)[0], rtol=1e-5, atol=1e-5)
    assert not np.allclose(inference.run(x), before, atol=1e-3)


def test_folding_follows_new_values(device, rng):
    x = rng.standard_normal((3, 2, 6, 6)).astype(np.float32)
    conv, out, conv_ds, bn_ds = conv_bn(rng, 2, 4)
    folded, unfolded = folded_and_unfolded(out, conv, device)
    first = folded.run(x)
    bn_ds.set_tensors(random_tensors(rng, 4))
    conv_ds.set_weights(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), rng.standard_normal(4).astype(np.float32))
    check(folded.run(x), unfolded.run(x)[0], rtol=1e-5, atol=1e-5)
    assert not np.allclose(folded.run(x), first, atol=1e-3)


def test_a_packed_folded_filter_follows_new_values_and_training(device, rng):
    """The cpu packs these filters (folded or not) once per change of the values they come from."""
    x = rng.standard_normal((2, 32, 6, 6)).astype(np.float32)
    conv, out, conv_ds, bn_ds = conv_bn(rng, 32, 20)
    folded, unfolded = folded_and_unfolded(out, conv, device)
    check(folded.run(x), unfolded.run(x)[0], rtol=1e-5, atol=1e-5)
    bn_ds.set_tensors(random_tensors(rng, 20))
    check(folded.run(x), unfolded.run(x)[0], rtol=1e-5, atol=1e-5)
    conv_ds.set_weights(rng.standard_normal((20, 32, 3, 3)).astype(np.float32) * 0.1, conv_ds.biases())
    check(folded.run(x), unfolded.run(x)[0], rtol=1e-5, atol=1e-5)
    conv_ds.optimizer = ng.SGD(learning_rate=0.1)
    training = ng.Loss(ng.Convolution(ng.ImageNode(), conv_ds, padding="same"), "mean_squared_error").training_graph(
        device=device)
    before = folded.run(x)
    training.run(x, labels=np.zeros((2, 20, 6, 6), np.float32))
    check(folded.run(x), unfolded.run(x)[0], rtol=1e-5, atol=1e-5)
    assert not np.allclose(folded.run(x), before, atol=1e-4)


def test_folding_reads_a_python_source_again_on_reload(device, rng):
    t = random_tensors(rng, 3)
    conv, out, _, _ = conv_bn(rng, 2, 3, bn_source=NormCapture(t))
    folded, unfolded = folded_and_unfolded(out, conv, device)
    x = rng.standard_normal((2, 2, 4, 4)).astype(np.float32)
    folded.run(x)
    t["gamma"][:] = rng.uniform(0.5, 1.5, 3)
    t["mean"][:] = rng.standard_normal(3)
    folded.reload_from_data_sources()
    unfolded.reload_from_data_sources()
    check(folded.run(x), unfolded.run(x)[0], rtol=1e-5, atol=1e-5)


def test_what_does_not_fold(device, rng):
    x = rng.standard_normal((2, 2, 5, 5)).astype(np.float32)
    # A convolution whose descriptor applies a neuron before the normalization.
    desc = ng.ConvolutionDescriptor(3, 2, 3, neuron=ng.NeuronDescriptor("relu"))
    conv = ng.Convolution(ng.ImageNode(), ng.ArrayDataSource(desc, label="conv"), padding="same")
    bn = ng.BatchNormalization(conv, ng.ArrayDataSource(ng.NormalizationDescriptor(3), label="bn"))
    assert steps(ng.Graph(bn.result_image, device=device), x) == ["conv", "bn"]
    # A training graph normalizes with the batch's statistics.
    conv, out, _, _ = conv_bn(rng, 2, 3)
    loss = ng.Loss(out, ng.LossDescriptor("mean_squared_error", "mean"))
    training = loss.training_graph(device=device, optimizer=ng.SGD(learning_rate=0.01))
    training.run(x, labels=rng.standard_normal((2, 3, 5, 5)).astype(np.float32))
    assert "conv" in training.memory_plan(2)["steps"]
    assert "conv+bn+relu" in steps(training.inference(), x)
