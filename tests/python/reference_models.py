"""Plain numpy forwards (inference: running statistics) of the networks in nngraph.models,
written from their papers' and torchvision's descriptions, reading parameters by label."""

import numpy as np
from reference import conv2d, fully_connected, neuron, pooling


class Params:
    """{label: {tensor name: array}} of a network's data sources."""

    def __init__(self, sources):
        self.t = {label: ds.tensors() for label, ds in sources.items()}

    def conv(self, x, label, stride=1, padding=0):
        p = padding if isinstance(padding, str) else (
            (padding, padding, padding, padding) if isinstance(padding, int) else
            (padding[0], padding[0], padding[1], padding[1]))
        t = self.t[label]
        return conv2d(x, t["weights"], t.get("biases"), (stride, stride), padding=p)

    def bn(self, x, label, eps):
        t = self.t[label]
        shape = (1, -1, 1, 1)
        scale = t["gamma"].reshape(shape) / np.sqrt(t["variance"].reshape(shape) + eps)
        return (x - t["mean"].reshape(shape)) * scale + t["beta"].reshape(shape)

    def fc(self, x, label):
        t = self.t[label]
        return fully_connected(x, t["weights"], t.get("biases"))


def relu(x):
    return np.maximum(x, 0)


def global_average(x):
    return x.mean(axis=(2, 3), keepdims=True)


def resnet(p: Params, x, bottleneck: bool, depths, stem: str):
    def unit(h, label, bn, stride=1, padding=0, act=True):
        h = p.bn(p.conv(h, label, stride, padding), bn, 1e-5)
        return relu(h) if act else h

    if stem == "imagenet":
        h = unit(x, "conv1", "bn1", 2, 3)
        h = pooling(h, "max", (3, 3), (2, 2), (1, 1, 1, 1))
    else:
        h = unit(x, "conv1", "bn1", 1, 1)
    cin = 64
    for s, (planes, depth) in enumerate(zip((64, 128, 256, 512), depths), 1):
        for i in range(depth):
            stride, q = (2 if s > 1 and i == 0 else 1), f"layer{s}.{i}."
            if bottleneck:
                r = unit(h, q + "conv1", q + "bn1")
                r = unit(r, q + "conv2", q + "bn2", stride, 1)
                r, cout = unit(r, q + "conv3", q + "bn3", act=False), 4 * planes
            else:
                r = unit(h, q + "conv1", q + "bn1", stride, 1)
                r, cout = unit(r, q + "conv2", q + "bn2", 1, 1, act=False), planes
            if stride != 1 or cin != cout:
                h = unit(h, q + "downsample.0", q + "downsample.1", stride, act=False)
            h, cin = relu(h + r), cout
    return p.fc(global_average(h), "fc")


def inception_v3(p: Params, x):
    def u(h, label, stride=1, padding=0):
        return relu(p.bn(p.conv(h, label + ".conv", stride, padding), label + ".bn", 1e-3))

    def avg(h):
        return pooling(h, "average", (3, 3), (1, 1), (1, 1, 1, 1), count_include_pad=True)

    def maxpool(h):
        return pooling(h, "max", (3, 3), (2, 2))

    cat = np.concatenate
    h = u(u(u(x, "Conv2d_1a_3x3", 2), "Conv2d_2a_3x3"), "Conv2d_2b_3x3", 1, 1)
    h = maxpool(u(u(maxpool(h), "Conv2d_3b_1x1"), "Conv2d_4a_3x3"))
    for m in ("Mixed_5b", "Mixed_5c", "Mixed_5d"):  # InceptionA
        b = m + ".branch"
        h = cat([u(h, b + "1x1"), u(u(h, b + "5x5_1"), b + "5x5_2", 1, 2),
                 u(u(u(h, b + "3x3dbl_1"), b + "3x3dbl_2", 1, 1), b + "3x3dbl_3", 1, 1),
                 u(avg(h), b + "_pool")], axis=1)
    b = "Mixed_6a.branch"  # InceptionB
    h = cat([u(h, b + "3x3", 2), u(u(u(h, b + "3x3dbl_1"), b + "3x3dbl_2", 1, 1), b + "3x3dbl_3", 2),
             maxpool(h)], axis=1)
    row, col = (0, 3), (3, 0)
    for m in ("Mixed_6b", "Mixed_6c", "Mixed_6d", "Mixed_6e"):  # InceptionC
        b = m + ".branch"
        s = u(u(u(h, b + "7x7_1"), b + "7x7_2", 1, row), b + "7x7_3", 1, col)
        d = u(h, b + "7x7dbl_1")
        for k, pad in zip(range(2, 6), (col, row, col, row)):
            d = u(d, f"{b}7x7dbl_{k}", 1, pad)
        h = cat([u(h, b + "1x1"), s, d, u(avg(h), b + "_pool")], axis=1)
    b = "Mixed_7a.branch"  # InceptionD
    s = u(u(u(u(h, b + "7x7x3_1"), b + "7x7x3_2", 1, row), b + "7x7x3_3", 1, col), b + "7x7x3_4", 2)
    h = cat([u(u(h, b + "3x3_1"), b + "3x3_2", 2), s, maxpool(h)], axis=1)
    for m in ("Mixed_7b", "Mixed_7c"):  # InceptionE
        b = m + ".branch"
        mid = u(h, b + "3x3_1")
        dbl = u(u(h, b + "3x3dbl_1"), b + "3x3dbl_2", 1, 1)
        h = cat([u(h, b + "1x1"), u(mid, b + "3x3_2a", 1, (0, 1)), u(mid, b + "3x3_2b", 1, (1, 0)),
                 u(dbl, b + "3x3dbl_3a", 1, (0, 1)), u(dbl, b + "3x3dbl_3b", 1, (1, 0)),
                 u(avg(h), b + "_pool")], axis=1)
    return p.fc(global_average(h), "fc")


def speedrun_net(p: Params, x, widths=(64, 256, 256)):
    def gelu(h):
        return neuron(h, "gelu")

    h = gelu(p.conv(x, "whiten"))
    for i in range(1, len(widths) + 1):
        q = f"block{i}."
        h = gelu(p.bn(pooling(p.conv(h, q + "conv1", padding="same"), "max", (2, 2), (2, 2)), q + "norm1", 1e-12))
        h = gelu(p.bn(p.conv(h, q + "conv2", padding="same"), q + "norm2", 1e-12))
    return p.fc(pooling(h, "max", (3, 3), (3, 3)), "head") / 9
