"""The small networks: the WWDC 2018 session's digit and activity classifiers, a residual
network with batch normalization for 28×28 images and a denoising autoencoder."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nngraph._core import (
    LSTM,
    RNN,
    Addition,
    ArrayDataSource,
    BatchNormalization,
    Convolution,
    ConvolutionDescriptor,
    ConvolutionTranspose,
    Dropout,
    FilterNode,
    FullyConnected,
    ImageNode,
    InstanceNormalization,
    Neuron,
    NormalizationDescriptor,
    Pooling,
    SoftMax,
    Upsampling,
)
from nngraph.models._build import Classifier

# What the classifiers return, under their older names.
DigitNetwork = ActivityNetwork = ResidualNetwork = Classifier

DIGIT_LAYERS = (  # label, kernel, input channels, output channels
    ("conv1", 5, 1, 32),
    ("conv2", 5, 32, 64),
    ("fc1", 7, 64, 1024),
    ("fc2", 1, 1024, 10),
)


def digit_weights(seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """He-initialised (weights OIHW, zero biases) for each digit-network layer."""
    return {
        label: (ArrayDataSource(ConvolutionDescriptor(k, cin, cout), "he", seed=seed + i).weights(),
                np.zeros(cout, np.float32))
        for i, (label, k, cin, cout) in enumerate(DIGIT_LAYERS)
    }


def digit_network(weights=None, keep_probability: float = 0.5, seed: int = 0, optimizer=None) -> DigitNetwork:
    """1×28×28 → conv 5×5 32 + relu → max-pool 2 → conv 5×5 64 + relu → max-pool 2 →
    fc 1024 + relu → dropout → fc 10 → softmax. `weights` maps labels to (weights, biases)
    arrays (default: He initialisation); `optimizer` goes to every data source."""
    weights = weights or digit_weights(seed)
    sources = {
        label: ArrayDataSource(ConvolutionDescriptor(k, cin, cout), *weights[label], label=label, optimizer=optimizer)
        for label, k, cin, cout in DIGIT_LAYERS
    }
    image = ImageNode(shape=(1, 28, 28), label="digits")
    h = Pooling(Neuron(Convolution(image, sources["conv1"], padding="same"), "relu"), "max", 2)
    h = Pooling(Neuron(Convolution(h, sources["conv2"], padding="same"), "relu"), "max", 2)
    h = Dropout(Neuron(FullyConnected(h, sources["fc1"]), "relu"), keep_probability, seed)
    logits = FullyConnected(h, sources["fc2"])
    return DigitNetwork(image, logits, SoftMax(logits, label="probabilities"), sources)


def activity_network(classes: int = 4, channels: int = 6, length: int = 2000, steps: int = 20,
                     features: int = 32, hidden: int = 64, seed: int = 0, optimizer=None) -> ActivityNetwork:
    """The WWDC activity classifier: channels × 1 × length → 1-D convolution (kernel and stride
    length/steps, so 100:1 for 2000 samples in 20 steps) + relu → LSTM over the steps, final
    state → fully connected → softmax."""
    if length % steps:
        raise ValueError(f"[activity] length {length} must be a multiple of steps {steps}")
    window = length // steps
    sources = {
        "conv": ArrayDataSource(ConvolutionDescriptor((1, window), channels, features, stride=(1, window)), "he",
                                label="conv", seed=seed, optimizer=optimizer),
        "fc": ArrayDataSource(ConvolutionDescriptor(1, hidden, classes), "glorot", label="fc", seed=seed + 2,
                              optimizer=optimizer),
    }
    lstm = LSTM(features, hidden, seed=seed + 1, label="lstm")
    sources["lstm"] = lstm.data_sources[0]
    if optimizer is not None:
        sources["lstm"].optimizer = optimizer
    image = ImageNode(shape=(channels, 1, length), label="motion")
    h = Neuron(Convolution(image, sources["conv"]), "relu")
    h = RNN(h, lstm, output="last", label="lstm")
    logits = FullyConnected(h, sources["fc"])
    return ActivityNetwork(image, logits, SoftMax(logits, label="probabilities"), sources)


def residual_layers(widths=(32, 64, 128), channels: int = 1) -> list[tuple]:
    """The residual network's layers in order: (label, kind, input channels, output channels),
    kind "conv" (3×3, no biases), "bn" or "fc" (with biases)."""
    layers, cin = [], channels
    for stage, width in enumerate(widths, 1):
        layers += [(f"s{stage}_conv", "conv", cin, width), (f"s{stage}_bn", "bn", width, width)]
        for k in (1, 2):
            layers += [(f"s{stage}_block_conv{k}", "conv", width, width), (f"s{stage}_block_bn{k}", "bn", width, width)]
        cin = width
    return layers + [("fc", "fc", cin, 10)]


def residual_network(widths=(32, 64, 128), classes: int = 10, channels: int = 1, size: int = 28, seed: int = 0,
                     optimizer=None) -> ResidualNetwork:
    """A residual network with batch normalization: per stage of width w, a 3×3 convolution to w
    + batch norm + relu, then one residual block [3×3 conv + bn + relu, 3×3 conv + bn, + the
    block's input, relu]; 2×2 max pooling between stages; global average pooling, fully
    connected to `classes`. He-initialised, deterministic for a seed; `optimizer` goes to
    every data source."""
    sources = {}
    for i, (label, kind, cin, cout) in enumerate(residual_layers(widths, channels)):
        if kind == "bn":
            sources[label] = ArrayDataSource(NormalizationDescriptor(cout), label=label, optimizer=optimizer)
            continue
        k, cout = (3, cout) if kind == "conv" else (1, classes)
        sources[label] = ArrayDataSource(ConvolutionDescriptor(k, cin, cout), "he", "zeros" if kind == "fc" else None,
                                         label=label, seed=seed + i, optimizer=optimizer)

    image = ImageNode(shape=(channels, size, size), label="images")
    h, side = image, size
    for stage in range(1, len(widths) + 1):
        if stage > 1:
            h, side = Pooling(h, "max", 2), side // 2
        h = Neuron(BatchNormalization(Convolution(h, sources[f"s{stage}_conv"], padding="same"),
                                      sources[f"s{stage}_bn"]), "relu")
        r = Neuron(BatchNormalization(Convolution(h, sources[f"s{stage}_block_conv1"], padding="same"),
                                      sources[f"s{stage}_block_bn1"]), "relu")
        r = BatchNormalization(Convolution(r, sources[f"s{stage}_block_conv2"], padding="same"),
                               sources[f"s{stage}_block_bn2"])
        h = Neuron(Addition(h, r), "relu")
    h = Pooling(h, "average", side)
    logits = FullyConnected(h, sources["fc"])
    return ResidualNetwork(image, logits, SoftMax(logits, label="probabilities"), sources)


@dataclass
class DenoisingAutoencoder:
    """What denoising_autoencoder builds: its source, its output and its data sources."""

    image: ImageNode  # channels × H × W, the noisy image
    output: FilterNode  # the reconstruction, in (0, 1)
    sources: dict  # label → ArrayDataSource, in layer order


def autoencoder_layers(widths=(16, 32, 64), channels: int = 1) -> list[tuple]:
    """The autoencoder's convolutions in order: (label, input channels, output channels,
    kernel, stride, transposed). Each but "out" is followed by an instance normalization
    labelled label + "_norm"."""
    w0, w1, w2 = widths
    return [("enc1", channels, w0, 3, 1, False), ("enc2", w0, w1, 3, 2, False), ("enc3", w1, w2, 3, 2, False),
            ("dec1", w2, w1, 4, 2, True), ("dec2", w1, w0, 3, 1, False), ("out", w0, channels, 3, 1, False)]


def denoising_autoencoder(widths=(16, 32, 64), channels: int = 1, size: int = 28, seed: int = 0,
                          optimizer=None) -> DenoisingAutoencoder:
    """An image-to-image network from transpose convolution, instance normalization and
    upsampling. Encoder: 3×3 convolutions to widths[0] (stride 1), widths[1] and widths[2]
    (stride 2, padding 1), each + instance norm + relu, down to a quarter of the side. Decoder:
    4×4 transpose convolution (stride 2, padding 1) to widths[1] + instance norm + relu;
    nearest 2× upsampling, 3×3 convolution to widths[0] + instance norm + relu; 3×3
    convolution to `channels` + sigmoid, for size × size images (a multiple of 4). Convolutions before a
    normalization have no biases (it would remove them). He-initialised, deterministic for a
    seed; `optimizer` goes to every data source."""
    sources = {}
    for i, (label, cin, cout, k, stride, transposed) in enumerate(autoencoder_layers(widths, channels)):
        desc = ConvolutionDescriptor(k, cin, cout, stride=stride, transposed=transposed)
        sources[label] = ArrayDataSource(desc, "he", "zeros" if label == "out" else None, label=label, seed=seed + i,
                                         optimizer=optimizer)
        if label != "out":
            sources[label + "_norm"] = ArrayDataSource(NormalizationDescriptor(cout, statistics=False),
                                                       label=label + "_norm", optimizer=optimizer)

    def block(h, label, upsample=False):
        _, _, _, _, stride, transposed = next(layer for layer in autoencoder_layers(widths, channels)
                                              if layer[0] == label)
        if upsample:
            h = Upsampling(h, 2, "nearest")
        padding = (1, 1, 1, 1) if stride > 1 else "same"
        h = (ConvolutionTranspose if transposed else Convolution)(h, sources[label], padding=padding)
        return Neuron(InstanceNormalization(h, sources[label + "_norm"]), "relu")

    if size % 4:
        raise ValueError(f"[autoencoder] size must be a multiple of 4, got {size}")
    image = ImageNode(shape=(channels, size, size), label="noisy")
    h = block(block(block(image, "enc1"), "enc2"), "enc3")
    h = block(block(h, "dec1"), "dec2", upsample=True)
    output = Neuron(Convolution(h, sources["out"], padding="same"), "sigmoid")
    return DenoisingAutoencoder(image, output, sources)
