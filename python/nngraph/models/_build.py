"""What the larger networks are built from: layers whose data sources are made, labelled and
seeded in one place."""

from __future__ import annotations

from dataclasses import dataclass, field

from nngraph._core import (
    ArrayDataSource,
    BatchNormalization,
    Convolution,
    ConvolutionDescriptor,
    FilterNode,
    FullyConnected,
    ImageNode,
    Neuron,
    NormalizationDescriptor,
    SoftMax,
)


@dataclass
class Classifier:
    """A classifier network: its source image, logits (what a loss reads), softmax
    probabilities, every data source by label in layer order, an auxiliary classifier's
    logits where the network has one (Inception-v3's, else None), and what reset() draws the
    sources from again: the build's seed and each source's initializer arguments."""

    image: ImageNode
    logits: FilterNode
    probabilities: FilterNode
    sources: dict
    aux_logits: FilterNode | None = None
    seed: int = 0
    initial: dict = field(default_factory=dict, repr=False)  # label: ArrayDataSource keyword arguments

    def reset(self, seed: int | None = None) -> None:
        """Every source back to its initial values, drawn again from `seed` (layer i from
        seed + i; None: the seed it was built with), with its first frozen tensors and fresh
        optimizer state (step 0, zero momentum and lookahead). The graphs over the network
        keep their plans and captures, so the next run trains afresh without them being made
        again (PyTorch's reset_parameters). The new values are all drawn before any is set."""
        seed = self.seed if seed is None else seed
        missing = [label for label in self.sources if label not in self.initial]
        if missing:
            raise ValueError(f"[reset] no initializer recorded for source(s) {missing}: they were not made by "
                             "the network's builder")
        fresh = [ArrayDataSource(ds.descriptor(), label=label, seed=seed + i, **self.initial[label])
                 for i, (label, ds) in enumerate(self.sources.items())]
        for ds, new in zip(self.sources.values(), fresh):
            ds.set_tensors({name: v for name, v in new.tensors().items() if v is not None})
            ds.frozen = new.frozen
            ds.reset_optimizer_state()


def pair(v) -> tuple[int, int]:
    """(v, v) for an int, else v as a pair."""
    return (v, v) if isinstance(v, int) else tuple(v)


class Builder:
    """Makes each layer and its ArrayDataSource under the layer's label: layer i is seeded with
    seed + i (convolutions He-initialised, fully connected layers Glorot) and gets `optimizer`."""

    def __init__(self, seed: int, optimizer):
        self.seed, self.optimizer = seed, optimizer
        self.sources: dict = {}
        self.initial: dict = {}

    def _source(self, label: str, descriptor, **kwargs) -> ArrayDataSource:
        if label in self.sources:
            raise ValueError(f"[{label}] two layers have this label")
        ds = ArrayDataSource(descriptor, label=label, seed=self.seed + len(self.sources), optimizer=self.optimizer,
                             **kwargs)
        self.sources[label] = ds
        self.initial[label] = kwargs
        return ds

    def conv(self, h, label: str, cin: int, cout: int, kernel, stride=1, padding=0, biases=None, weights="he",
             frozen=()) -> FilterNode:
        """A convolution; padding (rows, columns) on each side, or "same"."""
        ds = self._source(label, ConvolutionDescriptor(kernel, cin, cout, stride=stride), weights=weights,
                          biases=biases, frozen=list(frozen))
        if padding != "same":
            py, px = pair(padding)
            padding = (py, py, px, px)
        return Convolution(h, ds, padding=padding, label=label)

    def batch_norm(self, h, label: str, channels: int, epsilon: float = 1e-5, momentum: float = 0.1,
                   frozen=()) -> FilterNode:
        ds = self._source(label, NormalizationDescriptor(channels), frozen=list(frozen))
        return BatchNormalization(h, ds, epsilon=epsilon, momentum=momentum, label=label)

    def conv_bn(self, h, prefix: str, cin: int, cout: int, kernel, stride=1, padding=0, epsilon: float = 1e-5,
                relu: bool = True, names=("conv", "bn")) -> FilterNode:
        """Convolution without biases → batch norm (→ relu), labelled prefix + names."""
        h = self.conv(h, prefix + names[0], cin, cout, kernel, stride, padding)
        h = self.batch_norm(h, prefix + names[1], cout, epsilon)
        return Neuron(h, "relu") if relu else h

    def fully_connected(self, h, label: str, cin: int, cout: int, biases=True) -> FilterNode:
        ds = self._source(label, ConvolutionDescriptor(1, cin, cout), weights="glorot",
                          biases="zeros" if biases else None)
        return FullyConnected(h, ds, label=label)

    def classifier(self, image, logits, aux_logits=None) -> Classifier:
        return Classifier(image, logits, SoftMax(logits, label="probabilities"), self.sources, aux_logits, self.seed,
                          self.initial)
