"""The airbench94 CIFAR-10 speed-run network: a frozen whitening convolution, three
convolution groups, max pooling and a scaled linear head."""

from __future__ import annotations

import numpy as np

from nngraph._core import Image, ImageNode, Neuron, Pooling, patch_moments
from nngraph.models._build import Builder, Classifier

WHITENING_KERNEL = 2


def whitening_weights(images, epsilon: float = 5e-4, count: int | None = None) -> np.ndarray:
    """The whitening convolution's weights from training images (an Image, whose patch
    statistics are computed on its device, or a numpy array (N, C, H, W), on the cpu; the
    first `count` of them, all by default): the eigenvectors of the second moments of their
    2×2 patches, each divided by sqrt(its eigenvalue + epsilon), largest eigenvalue first,
    then the same negated: (2·C·4, C, 2, 2)."""
    if not isinstance(images, Image):
        images = np.asarray(images, np.float32)
        if images.ndim != 4:
            raise ValueError(f"[whiten] images must be (N, C, H, W), got shape {images.shape}")
    n, c, h, w = images.shape
    k = WHITENING_KERNEL
    count = n if count is None else count
    moments = patch_moments(images, (k, k), count) / (count * (h - k + 1) * (w - k + 1))
    values, vectors = np.linalg.eigh(moments)
    order = np.argsort(values)[::-1]
    scaled = (vectors[:, order] / np.sqrt(values[order] + epsilon)).T.reshape(c * k * k, c, k, k)
    return np.concatenate([scaled, -scaled]).astype(np.float32)


def speedrun_net(classes: int = 10, channels: int = 3, size: int = 32, widths=(64, 256, 256), whitening=None,
                 batch_norm_momentum: float = 0.4, seed: int = 0, optimizer=None) -> Classifier:
    """airbench94's network: a 2×2 whitening convolution (channels → 8·channels, with biases;
    its weights frozen) → GELU → per width w of `widths` a group [3×3 convolution to w → 2×2
    max pool → batch norm → GELU → 3×3 convolution → batch norm → GELU] → 3×3 max pool → fully
    connected without biases, ×1/9. Convolutions have no biases and keep the size ("same");
    batch norms have epsilon 1e-12 and a frozen scale of 1 (only their shift trains), momentum
    PyTorch's (airbench's 0.6 is 1 − 0.4). For 3×32×32 images (CIFAR) and 1×28×28 (MNIST,
    Fashion-MNIST): both reach 3×3 before the last pooling. whitening: weights from
    whitening_weights(training images), or None for He-initialised ones (set them later
    with sources["whiten"].set_weights). Labels: "whiten", "block1.conv1", "block1.norm1", ...,
    "head"."""
    side = size - WHITENING_KERNEL + 1
    for _ in widths:
        side //= 2
    if side != 3:
        raise ValueError(f"[speedrun_net] {size}×{size} images reach {side}×{side} before the 3×3 pooling, not 3×3")
    b = Builder(seed, optimizer)
    image = ImageNode(shape=(channels, size, size), label="images")
    width = 2 * channels * WHITENING_KERNEL**2
    h = b.conv(image, "whiten", channels, width, WHITENING_KERNEL, biases="zeros",
               weights="he" if whitening is None else np.asarray(whitening, np.float32), frozen=("weights",))
    h = Neuron(h, "gelu")
    for i, cout in enumerate(widths, 1):
        p = f"block{i}."
        h = b.conv(h, p + "conv1", width, cout, 3, padding="same")
        h = b.batch_norm(Pooling(h, "max", 2, label=p + "pool"), p + "norm1", cout, 1e-12, batch_norm_momentum,
                         frozen=("gamma",))
        h = b.conv(Neuron(h, "gelu"), p + "conv2", cout, cout, 3, padding="same")
        h = Neuron(b.batch_norm(h, p + "norm2", cout, 1e-12, batch_norm_momentum, frozen=("gamma",)), "gelu")
        width = cout
    h = Pooling(h, "max", 3, label="pool")
    logits = Neuron(b.fully_connected(h, "head", width, classes, biases=False), "linear", a=1 / 9, label="scale")
    return b.classifier(image, logits)
