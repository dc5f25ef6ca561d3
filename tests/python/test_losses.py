"""Every loss type and reduction against numpy formulae, with weights and label smoothing."""

import numpy as np
import pytest
from test_gradients import numeric_grad

import nngraph as ng

PER_POSITION = {"softmax_cross_entropy", "categorical_cross_entropy", "kullback_leibler_divergence"}


def reference(kind, x, lab, reduction, weight, image_weights, smoothing=0.0, delta=1.0, eps=1e-7):
    """(per-image losses, reduced loss) in float64."""
    x, lab = x.astype(np.float64), lab.astype(np.float64)
    n, c = x.shape[:2]
    if smoothing:
        lab = lab * (1 - smoothing) + smoothing * (0.5 if kind == "sigmoid_cross_entropy" else 1 / c)
    if kind == "softmax_cross_entropy":
        z = x - x.max(axis=1, keepdims=True)
        e = -(lab * (z - np.log(np.exp(z).sum(axis=1, keepdims=True)))).sum(axis=1)
    elif kind == "categorical_cross_entropy":
        e = -(lab * np.log(np.maximum(x, eps))).sum(axis=1)
    elif kind == "kullback_leibler_divergence":
        safe = np.where(lab > 0, lab, 1)
        e = np.where(lab > 0, lab * (np.log(safe) - np.log(np.maximum(x, eps))), 0).sum(axis=1)
    elif kind == "cosine_distance":
        xf, lf = x.reshape(n, -1), lab.reshape(n, -1)
        e = 1 - (xf * lf).sum(1) / (np.linalg.norm(xf, axis=1) * np.linalg.norm(lf, axis=1))
    else:
        d = x - lab
        e = {
            "sigmoid_cross_entropy": lambda: np.maximum(x, 0) - x * lab + np.log1p(np.exp(-np.abs(x))),
            "mean_squared_error": lambda: d * d,
            "mean_absolute_error": lambda: np.abs(d),
            "huber": lambda: np.where(np.abs(d) <= delta, 0.5 * d * d, delta * (np.abs(d) - 0.5 * delta)),
            "hinge": lambda: np.maximum(0, 1 - lab * x),
            "log": lambda: -(lab * np.log(x + eps) + (1 - lab) * np.log(1 - x + eps)),
        }[kind]()
    per_image = weight * image_weights * e.reshape(n, -1).sum(axis=1)
    if reduction != "mean":
        return per_image, per_image.sum()
    if kind == "cosine_distance":
        divisor = n
    elif kind in PER_POSITION:
        divisor = n * x.shape[2] * x.shape[3]
    else:
        divisor = x.size
    return per_image, per_image.sum() / divisor


def inputs(kind, rng, shape):
    n, c = shape[:2]
    x = rng.standard_normal(shape)
    if kind in ("categorical_cross_entropy", "kullback_leibler_divergence"):
        x = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
        lab = rng.random(shape)
        lab /= lab.sum(axis=1, keepdims=True)
    elif kind == "softmax_cross_entropy":
        lab = np.eye(c)[rng.integers(0, c, (n,) + shape[2:])].transpose(0, 3, 1, 2)
    elif kind in ("sigmoid_cross_entropy", "log"):
        if kind == "log":
            x = 1 / (1 + np.exp(-x))
        lab = rng.random(shape)
    elif kind == "hinge":
        lab = rng.choice([-1.0, 1.0], shape)
        x = np.where(np.abs(1 - lab * x) < 0.05, x + 0.2, x)  # away from the kink
    else:
        lab = rng.standard_normal(shape)
        if kind in ("mean_absolute_error", "huber"):
            d = x - lab
            x = np.where(np.abs(np.abs(d) - (1.0 if kind == "huber" else 0)) < 0.05, x + 0.2, x)
    return x.astype(np.float32), lab.astype(np.float32)


KINDS = ["softmax_cross_entropy", "sigmoid_cross_entropy", "categorical_cross_entropy", "mean_squared_error",
         "mean_absolute_error", "huber", "hinge", "log", "kullback_leibler_divergence", "cosine_distance"]


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("kind", KINDS)
def test_loss_values_and_gradient(device, rng, kind, reduction):
    shape = (3, 4, 2, 1)
    x, lab = inputs(kind, rng, shape)
    smoothing = 0.1 if kind in ("softmax_cross_entropy", "sigmoid_cross_entropy",
                                "categorical_cross_entropy") else 0.0
    w_img = rng.random(3).astype(np.float32) + 0.5
    desc = ng.LossDescriptor(kind, reduction, weight=0.7, label_smoothing=smoothing)
    g = ng.Graph(ng.Loss(ng.ImageNode(), desc), device=device)
    labels = ng.LossLabels(lab, weights=w_img)
    h = g.encode(x, labels=labels)
    per_image, total = reference(kind, x, lab, reduction, 0.7, w_img, smoothing)
    np.testing.assert_allclose(h.losses(), per_image, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(labels.losses, per_image, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(h.loss(), total, rtol=2e-5, atol=1e-6)
    want = numeric_grad(lambda v: reference(kind, v, lab, reduction, 0.7, w_img, smoothing)[1], x, eps=1e-6)
    np.testing.assert_allclose(h.result(), want, rtol=2e-3, atol=2e-5)


def test_unweighted_steps_after_weighted_ones(device, rng):
    """Steps without label weights weigh every image 1, whatever an earlier step was given."""
    x = rng.standard_normal((4, 3, 1, 1)).astype(np.float32)
    lab = rng.integers(0, 3, 4)
    g = ng.Graph(ng.Loss(ng.ImageNode(), ng.LossDescriptor("softmax_cross_entropy", "sum")), device=device)
    w = np.array([0.5, 2.0, 0.0, 1.5], np.float32)
    per_image = g.encode(x, labels=lab).losses()
    for _ in range(3):  # past the warm-up of backends that capture the step
        np.testing.assert_allclose(g.encode(x, labels=ng.LossLabels(lab, weights=w)).losses(), per_image * w,
                                   rtol=1e-6)
        np.testing.assert_allclose(g.encode(x, labels=lab).losses(), per_image, rtol=1e-6)


def test_huber_delta(device, rng):
    x = (3 * rng.standard_normal((4, 3, 1, 1))).astype(np.float32)
    lab = np.zeros_like(x)
    g = ng.Graph(ng.Loss(ng.ImageNode(), ng.LossDescriptor("huber", "sum", delta=2.0)), device=device)
    h = g.encode(x, labels=lab)
    np.testing.assert_allclose(h.loss(), reference("huber", x, lab, "sum", 1, np.ones(4), delta=2.0)[1], rtol=1e-5)


def test_label_forms_agree(device, rng):
    """Class indices, one-hot arrays, LossLabels and an NHWC LossDataDescriptor give one loss."""
    x = rng.standard_normal((5, 6, 1, 1)).astype(np.float32)
    idx = rng.integers(0, 6, 5)
    onehot = np.eye(6, dtype=np.float32)[idx]
    g = ng.Graph(ng.Loss(ng.ImageNode(), "softmax_cross_entropy"), device=device)
    values = [g.encode(x, labels=lab).loss() for lab in (
        idx, idx.astype(np.uint8), onehot, onehot.reshape(5, 6, 1, 1), ng.LossLabels(idx),
        ng.LossLabels(ng.LossDataDescriptor(onehot.reshape(5, 1, 1, 6), layout="NHWC", size=(6, 1, 1))))]
    np.testing.assert_allclose(values, values[0], rtol=1e-6)
    # per-pixel class indices for a segmentation-shaped loss
    xs = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    pix = rng.integers(0, 3, (2, 4, 5))
    gs = ng.Graph(ng.Loss(ng.ImageNode(), "softmax_cross_entropy"), device=device)
    a = gs.encode(xs, labels=pix).loss()
    b = gs.encode(xs, labels=np.eye(3, dtype=np.float32)[pix].transpose(0, 3, 1, 2)).loss()
    np.testing.assert_allclose(a, b, rtol=1e-6)
    with pytest.raises(ValueError, match="2 class indices for 2 images of 4x5 labels: expected 40"):
        gs.encode(xs, labels=pix[:, 0, 0])  # one index per image where the loss takes one per pixel


def test_loss_descriptor_validation():
    with pytest.raises(ValueError, match="unknown loss type"):
        ng.LossDescriptor("cross_entropy")
    with pytest.raises(ValueError, match="unknown reduction"):
        ng.LossDescriptor(reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing applies to the cross-entropy"):
        ng.LossDescriptor("mean_squared_error", label_smoothing=0.1)
    with pytest.raises(ValueError, match="delta"):
        ng.LossDescriptor("huber", delta=0)
