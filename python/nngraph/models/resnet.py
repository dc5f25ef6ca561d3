"""ResNet-18 and ResNet-50 (v1.5: a bottleneck's stride on its 3×3 convolution), torchvision's
topology and layer names, so a torchvision state_dict maps onto the data sources by label."""

from __future__ import annotations

from nngraph._core import Addition, GlobalAveragePooling, ImageNode, Neuron, Pooling
from nngraph.models._build import Builder, Classifier

STEMS = ("imagenet", "cifar")


def _basic(b: Builder, h, prefix: str, cin: int, planes: int, stride: int):
    r = b.conv_bn(h, prefix, cin, planes, 3, stride, 1, names=("conv1", "bn1"))
    r = b.conv_bn(r, prefix, planes, planes, 3, 1, 1, relu=False, names=("conv2", "bn2"))
    return r, planes


def _bottleneck(b: Builder, h, prefix: str, cin: int, planes: int, stride: int):
    r = b.conv_bn(h, prefix, cin, planes, 1, names=("conv1", "bn1"))
    r = b.conv_bn(r, prefix, planes, planes, 3, stride, 1, names=("conv2", "bn2"))
    r = b.conv_bn(r, prefix, planes, 4 * planes, 1, relu=False, names=("conv3", "bn3"))
    return r, 4 * planes


def _resnet(block, depths, classes: int, channels: int, size: int, stem: str, seed: int, optimizer) -> Classifier:
    if stem not in STEMS:
        raise ValueError(f"[resnet] stem must be one of {STEMS}, got {stem!r}")
    smallest = 32 if stem == "imagenet" else 8
    if size < smallest:
        raise ValueError(f"[resnet] size must be at least {smallest} for the {stem} stem, got {size}")
    b = Builder(seed, optimizer)
    image = ImageNode(shape=(channels, size, size), label="images")
    if stem == "imagenet":
        h = b.conv_bn(image, "", channels, 64, 7, 2, 3, names=("conv1", "bn1"))
        h = Pooling(h, "max", 3, 2, padding=(1, 1, 1, 1), label="maxpool")
    else:  # small images: a 3×3 stride-1 stem and no pooling keep the first stage at full size
        h = b.conv_bn(image, "", channels, 64, 3, 1, 1, names=("conv1", "bn1"))
    cin = 64
    for stage, (planes, depth) in enumerate(zip((64, 128, 256, 512), depths), 1):
        for i in range(depth):
            stride = 2 if stage > 1 and i == 0 else 1
            prefix = f"layer{stage}.{i}."
            r, cout = block(b, h, prefix, cin, planes, stride)
            if stride != 1 or cin != cout:
                h = b.conv_bn(h, prefix, cin, cout, 1, stride, relu=False, names=("downsample.0", "downsample.1"))
            h = Neuron(Addition(h, r), "relu")
            cin = cout
    logits = b.fully_connected(GlobalAveragePooling(h, label="avgpool"), "fc", cin, classes)
    return b.classifier(image, logits)


def resnet18(classes: int = 1000, channels: int = 3, size: int = 224, stem: str = "imagenet", seed: int = 0,
             optimizer=None) -> Classifier:
    """ResNet-18: basic blocks [2, 2, 2, 2] of widths 64–512. stem "imagenet": 7×7 stride-2
    convolution and 3×3 stride-2 max pooling (224×224 images, any size from 32); "cifar": one
    3×3 stride-1 convolution (32×32 images). Convolutions have no biases; every batch norm is
    PyTorch's (epsilon 1e-5, momentum 0.1); labels are torchvision's ("layer1.0.conv1",
    "fc"). He-initialised, deterministic for a seed; `optimizer` goes to every data source."""
    return _resnet(_basic, (2, 2, 2, 2), classes, channels, size, stem, seed, optimizer)


def resnet50(classes: int = 1000, channels: int = 3, size: int = 224, stem: str = "imagenet", seed: int = 0,
             optimizer=None) -> Classifier:
    """ResNet-50 v1.5: bottleneck blocks [3, 4, 6, 3] (1×1, 3×3 carrying the stride, 1×1 to
    four times the width); otherwise as resnet18."""
    return _resnet(_bottleneck, (3, 4, 6, 3), classes, channels, size, stem, seed, optimizer)
