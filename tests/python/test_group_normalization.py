"""Group, instance and layer normalization: forward against numpy, every gradient against
central differences, training equal to inference, and bad input naming the node."""

import numpy as np
import pytest
from sources import HeldSource
from test_gradients import check, input_gradient, numeric_grad

import nngraph as ng


def reference(x, kind, gamma, beta, groups=1, eps=1e-5):
    x = x.astype(np.float64)
    n, c, h, w = x.shape
    if kind == "layer_c":
        mean, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
        xhat = (x - mean) / np.sqrt(var + eps)
    else:
        g = {"instance": c, "layer_chw": 1, "group": groups}[kind]
        v = x.reshape(n, g, -1)
        xhat = ((v - v.mean(axis=2, keepdims=True)) / np.sqrt(v.var(axis=2, keepdims=True) + eps)).reshape(x.shape)
    return xhat * np.asarray(gamma, np.float64)[None, :, None, None] + np.asarray(beta, np.float64)[None, :, None, None]


def make(kind, source, parameters, groups=1, eps=1e-5):
    if kind == "instance":
        return ng.InstanceNormalization(source, parameters, epsilon=eps)
    if kind == "group":
        return ng.GroupNormalization(source, groups, parameters, epsilon=eps)
    return ng.LayerNormalization(source, parameters, epsilon=eps, over="c" if kind == "layer_c" else "chw")


class AffineCapture(HeldSource):
    """gamma and beta held in Python; update() records their gradients."""

    def __init__(self, gamma, beta):
        super().__init__(ng.NormalizationDescriptor(len(gamma), statistics=False), "norm")
        self.g, self.b, self.grads = gamma, beta, None

    def gamma(self):
        return self.g

    def beta(self):
        return self.b

    def update(self, gradient, weights):
        self.grads = gradient


CASES = [  # kind, groups, shape
    ("instance", 1, (2, 3, 5, 4)),
    ("group", 2, (3, 4, 3, 5)),
    ("group", 3, (2, 6, 1, 1)),
    ("layer_chw", 1, (2, 3, 4, 3)),
    ("layer_c", 1, (2, 5, 3, 4)),
    ("layer_c", 1, (3, 4, 1, 1)),
    ("layer_c", 1, (2, 3, 17, 19)),  # more positions than the cpu's runs of 256
    ("layer_c", 1, (2, 19, 5, 9)),  # cuda's tiles: 45 positions, 19 channels over 8 rows of threads
]


@pytest.mark.parametrize("kind,groups,shape", CASES)
def test_forward_and_gradients(device, rng, kind, groups, shape):
    c = shape[1]
    x = (2 * rng.standard_normal(shape) + 0.5).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, c).astype(np.float32)
    beta = rng.standard_normal(c).astype(np.float32)
    src = AffineCapture(gamma, beta)

    def fwd(v, g=gamma, b=beta):
        return reference(v, kind, g, b, groups, eps=1e-3)
    node = make(kind, ng.ImageNode(), src, groups, eps=1e-3)
    np.testing.assert_allclose(ng.Graph(node, device=device).run(x), fwd(x), rtol=1e-4, atol=1e-4)
    r = rng.standard_normal(shape).astype(np.float32)
    [dx] = input_gradient(lambda s: make(kind, s, src, groups, eps=1e-3), x, r, device)
    check(dx, numeric_grad(lambda v: (fwd(v) * r).sum(), x), rtol=3e-3, atol=3e-4)
    dgamma, dbeta = src.grads
    check(dgamma, numeric_grad(lambda v: (fwd(x, v) * r).sum(), gamma))
    check(dbeta, numeric_grad(lambda v: (fwd(x, gamma, v) * r).sum(), beta))


def test_training_normalizes_like_inference_and_trains(device, rng):
    """Each image's own statistics: the training graph's forward pass is the inference one's;
    a step moves gamma and beta of an ArrayDataSource made from a channel count."""
    x = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
    node = ng.InstanceNormalization(ng.ImageNode(), 3, label="inorm")
    assert node.label == "inorm" and node.groups == 3
    logits = ng.FullyConnected(node, ng.ArrayDataSource(ng.ConvolutionDescriptor(5, 3, 4), seed=1))
    train = ng.Loss(logits, ng.LossDescriptor("softmax_cross_entropy", "mean")).training_graph(
        optimizer=ng.SGD(learning_rate=0.5), device=device)
    labels = np.array([0, 1, 2, 3])
    logits = train.predict(x).reshape(4, 4).astype(np.float64)
    z = logits - logits.max(axis=1, keepdims=True)
    want = -(z[np.arange(4), labels] - np.log(np.exp(z).sum(axis=1))).mean()
    h = train.encode(x, labels=labels)
    assert h.loss() == pytest.approx(want, rel=1e-4)
    params = train.parameters()["inorm"]
    assert sorted(params) == ["beta", "gamma"]
    assert np.abs(params["gamma"] - 1).max() > 1e-4


def test_defaults_and_labels():
    assert ng.LayerNormalization(ng.ImageNode(), 4).label == "layer_normalization"
    assert ng.LayerNormalization(ng.ImageNode(), 4, over="c").per_position
    assert ng.GroupNormalization(ng.ImageNode(), 2, 4).label == "group_normalization"
    d = ng.NormalizationDescriptor(3, statistics=False)
    assert [t.name for t in d.tensors] == ["gamma", "beta"]
    assert not d.statistics and repr(d) == "NormalizationDescriptor(feature_channels=3, statistics=False)"


def test_bad_input():
    with pytest.raises(ng.InvalidInputError, match=r"\[gn\] groups=3 must divide the 4 feature channels"):
        ng.GroupNormalization(ng.ImageNode(), 3, 4, label="gn")
    with pytest.raises(ng.InvalidInputError, match=r"\[group_normalization\] groups must be at least 1"):
        ng.GroupNormalization(ng.ImageNode(), 0, 4)
    with pytest.raises(ng.InvalidInputError, match=r"\[layer_normalization\] over must be 'chw' or 'c'"):
        ng.LayerNormalization(ng.ImageNode(), 4, over="hw")
    with_statistics = ng.ArrayDataSource(ng.NormalizationDescriptor(4))
    with pytest.raises(ng.InvalidInputError, match=r"statistics=False"):
        ng.InstanceNormalization(ng.ImageNode(), with_statistics)
    with pytest.raises(ng.InvalidInputError, match=r"\[bn\] keeps running statistics"):
        ng.BatchNormalization(ng.ImageNode(), ng.ArrayDataSource(ng.NormalizationDescriptor(4, statistics=False)),
                              label="bn")
    with pytest.raises(ng.InvalidInputError, match=r"\[in\] source has 3 feature channels, its data source"):
        ng.Graph(ng.InstanceNormalization(ng.ImageNode(shape=(3, 2, 2)), 4, label="in"))
    with pytest.raises(ng.InvalidInputError, match=r"epsilon must be finite and > 0"):
        ng.InstanceNormalization(ng.ImageNode(), 4, epsilon=0.0)
    short = AffineCapture(np.ones(3, np.float32), np.zeros(4, np.float32))
    with pytest.raises(ng.InvalidInputError, match=r"\[norm\] data source .norm. returned 4 beta, expected 3"):
        ng.Graph(ng.InstanceNormalization(ng.ImageNode(shape=(3, 2, 2)), short)).run(np.ones((1, 3, 2, 2), np.float32))


def test_layer_normalization_over_channels_reads_channels_last_rows(device, rng):
    """Channels-last graphs hand it each position's channels side by side (no NCHW copies): the
    same values and gradients as the NCHW graph."""
    x = (2 * rng.standard_normal((2, 6, 17, 19)) + 0.5).astype(np.float32)
    r = rng.standard_normal(x.shape).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, 6).astype(np.float32)
    beta = rng.standard_normal(6).astype(np.float32)
    out = {}
    for layout in ("NCHW", "NHWC"):
        src = AffineCapture(gamma, beta)
        node = make("layer_c", ng.ImageNode(label="x"), src, 1, eps=1e-3)
        y = ng.Graph(node, device=device, layout=layout).run(x)
        [g] = node.gradient_filters(ng.ImageNode(label="dy"))
        dx = ng.Graph(g, device=device, layout=layout).run({"x": x, "dy": r})
        out[layout] = (y, dx, *src.grads)
    for a, b in zip(out["NCHW"], out["NHWC"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
