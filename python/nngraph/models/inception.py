"""Inception-v3: torchvision's topology and layer names ("Mixed_5b.branch1x1.conv"), so a
torchvision state_dict maps onto the data sources by label."""

from __future__ import annotations

from nngraph._core import Concatenation, Dropout, GlobalAveragePooling, ImageNode, Neuron, Pooling
from nngraph.models._build import Builder, Classifier

EPSILON = 1e-3  # torchvision's BasicConv2d batch norm


def _unit(b: Builder, h, label: str, cin: int, cout: int, kernel, stride=1, padding=0):
    """torchvision's BasicConv2d: convolution without biases, batch norm, relu."""
    return b.conv_bn(h, label + ".", cin, cout, kernel, stride, padding, EPSILON)


def _chain(b: Builder, h, prefix: str, cin: int, layers):
    """Units in a row: layers = (name, cout, kernel, padding) each, stride 1."""
    for name, cout, kernel, padding in layers:
        h, cin = _unit(b, h, prefix + name, cin, cout, kernel, 1, padding), cout
    return h


def _average_branch(b: Builder, h, prefix: str, cin: int, cout: int):
    """torchvision's pooling branch: 3×3 average pooling (the zero padding counted), then a 1×1
    unit. The unit's convolution runs first: both are linear and the convolution has no biases,
    so they commute, and the pooling then averages cout channels rather than cin (192 of up to
    2048) forward and backward. Same function, same sources."""
    h = b.conv(h, prefix + "branch_pool.conv", cin, cout, 1)
    h = Pooling(h, "average", 3, 1, padding=(1, 1, 1, 1), count_include_pad=True, label=prefix + "avg_pool")
    return Neuron(b.batch_norm(h, prefix + "branch_pool.bn", cout, EPSILON), "relu")


def _block_a(b, h, p, cin, pool_features):
    return [_unit(b, h, p + "branch1x1", cin, 64, 1),
            _chain(b, h, p, cin, [("branch5x5_1", 48, 1, 0), ("branch5x5_2", 64, 5, 2)]),
            _chain(b, h, p, cin, [("branch3x3dbl_1", 64, 1, 0), ("branch3x3dbl_2", 96, 3, 1),
                                  ("branch3x3dbl_3", 96, 3, 1)]),
            _average_branch(b, h, p, cin, pool_features)], 224 + pool_features


def _block_b(b, h, p, cin):
    dbl = _chain(b, h, p, cin, [("branch3x3dbl_1", 64, 1, 0), ("branch3x3dbl_2", 96, 3, 1)])
    return [_unit(b, h, p + "branch3x3", cin, 384, 3, 2),
            _unit(b, dbl, p + "branch3x3dbl_3", 96, 96, 3, 2),
            Pooling(h, "max", 3, 2, label=p + "max_pool")], 480 + cin


def _block_c(b, h, p, cin, c7):
    row, col = ((1, 7), (0, 3)), ((7, 1), (3, 0))
    return [_unit(b, h, p + "branch1x1", cin, 192, 1),
            _chain(b, h, p, cin, [("branch7x7_1", c7, 1, 0), ("branch7x7_2", c7, *row), ("branch7x7_3", 192, *col)]),
            _chain(b, h, p, cin, [("branch7x7dbl_1", c7, 1, 0), ("branch7x7dbl_2", c7, *col),
                                  ("branch7x7dbl_3", c7, *row), ("branch7x7dbl_4", c7, *col),
                                  ("branch7x7dbl_5", 192, *row)]),
            _average_branch(b, h, p, cin, 192)], 768


def _block_d(b, h, p, cin):
    a = _unit(b, h, p + "branch3x3_1", cin, 192, 1)
    c = _chain(b, h, p, cin, [("branch7x7x3_1", 192, 1, 0), ("branch7x7x3_2", 192, (1, 7), (0, 3)),
                              ("branch7x7x3_3", 192, (7, 1), (3, 0))])
    return [_unit(b, a, p + "branch3x3_2", 192, 320, 3, 2), _unit(b, c, p + "branch7x7x3_4", 192, 192, 3, 2),
            Pooling(h, "max", 3, 2, label=p + "max_pool")], 512 + cin


def _split(b, h, prefix, cin):
    """The 1×3 and 3×1 pair an InceptionE branch ends in, side by side."""
    return [_unit(b, h, prefix + "a", cin, 384, (1, 3), 1, (0, 1)),
            _unit(b, h, prefix + "b", cin, 384, (3, 1), 1, (1, 0))]


def _block_e(b, h, p, cin):
    mid = _unit(b, h, p + "branch3x3_1", cin, 384, 1)
    dbl = _chain(b, h, p, cin, [("branch3x3dbl_1", 448, 1, 0), ("branch3x3dbl_2", 384, 3, 1)])
    return [_unit(b, h, p + "branch1x1", cin, 320, 1), *_split(b, mid, p + "branch3x3_2", 384),
            *_split(b, dbl, p + "branch3x3dbl_3", 384), _average_branch(b, h, p, cin, 192)], 2048


def _mixed(b, h, name, block, cin, *args):
    branches, cout = block(b, h, name + ".", cin, *args)
    return Concatenation(branches, label=name), cout


def _aux(b: Builder, h, cin: int, classes: int):
    """torchvision's InceptionAux: 5×5 stride-3 average pooling, 1×1 unit to 128, 5×5 unit to
    768, global average pooling, fully connected."""
    h = Pooling(h, "average", 5, 3, label="AuxLogits.avg_pool")
    h = _unit(b, h, "AuxLogits.conv0", cin, 128, 1)
    h = _unit(b, h, "AuxLogits.conv1", 128, 768, 5)
    return b.fully_connected(GlobalAveragePooling(h, label="AuxLogits.pool"), "AuxLogits.fc", 768, classes)


def inception_v3(classes: int = 1000, channels: int = 3, size: int = 299, aux: bool = False,
                 keep_probability: float = 0.5, seed: int = 0, optimizer=None) -> Classifier:
    """Inception-v3 as torchvision builds it: the stem (3×3 units, two 3×3 stride-2 max pools),
    Mixed_5b–5d (InceptionA), 6a (B), 6b–6e (C, 7×1 and 1×7 factorised), 7a (D), 7b–7c (E),
    global average pooling, dropout, fully connected; each unit a convolution without biases,
    batch norm (epsilon 1e-3) and relu; each block's branches joined by a Concatenation (a
    pooling branch's convolution before its average pooling: the same function, cheaper).
    299×299 images (any size from 75; from 299 with the auxiliary classifier). aux: the auxiliary
    classifier on Mixed_6e, its logits in `aux_logits`. He-initialised, deterministic for a
    seed; `optimizer` goes to every data source."""
    smallest = 299 if aux else 75  # the auxiliary head needs the 17×17 grid
    if size < smallest:
        raise ValueError(f"[inception_v3] size must be at least {smallest}{' with aux' if aux else ''}, got {size}")
    b = Builder(seed, optimizer)
    image = ImageNode(shape=(channels, size, size), label="images")
    h = _unit(b, image, "Conv2d_1a_3x3", channels, 32, 3, 2)
    h = _unit(b, h, "Conv2d_2a_3x3", 32, 32, 3)
    h = _unit(b, h, "Conv2d_2b_3x3", 32, 64, 3, 1, 1)
    h = Pooling(h, "max", 3, 2, label="maxpool1")
    h = _unit(b, h, "Conv2d_3b_1x1", 64, 80, 1)
    h = _unit(b, h, "Conv2d_4a_3x3", 80, 192, 3)
    h = Pooling(h, "max", 3, 2, label="maxpool2")
    h, c = _mixed(b, h, "Mixed_5b", _block_a, 192, 32)
    h, c = _mixed(b, h, "Mixed_5c", _block_a, c, 64)
    h, c = _mixed(b, h, "Mixed_5d", _block_a, c, 64)
    h, c = _mixed(b, h, "Mixed_6a", _block_b, c)
    for name, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        h, c = _mixed(b, h, name, _block_c, c, c7)
    aux_logits = _aux(b, h, c, classes) if aux else None
    h, c = _mixed(b, h, "Mixed_7a", _block_d, c)
    h, c = _mixed(b, h, "Mixed_7b", _block_e, c)
    h, c = _mixed(b, h, "Mixed_7c", _block_e, c)
    h = Dropout(GlobalAveragePooling(h, label="avgpool"), keep_probability, seed, label="dropout")
    return b.classifier(image, b.fully_connected(h, "fc", c, classes), aux_logits)
