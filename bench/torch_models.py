"""The networks of nngraph.models in PyTorch, with the same weights as nngraph's, for comparisons."""

import numpy as np
import torch


def digit_network(weights: dict) -> torch.nn.Sequential:
    """Logits (no softmax); weights maps labels to (OIHW weights, biases) numpy arrays."""
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(3136, 1024), torch.nn.ReLU(), torch.nn.Dropout(0.5),
        torch.nn.Linear(1024, 10))
    with torch.no_grad():
        for layer, label in zip([net[0], net[3], net[7], net[10]], ["conv1", "conv2", "fc1", "fc2"]):
            w, b = weights[label]
            layer.weight.copy_(torch.from_numpy(np.ascontiguousarray(w)).reshape(layer.weight.shape))
            layer.bias.copy_(torch.from_numpy(b))
    return net


class ActivityNetwork(torch.nn.Module):
    """The activity classifier: Conv1d (kernel = stride = window) + ReLU → LSTM → final state → Linear."""

    def __init__(self, sources: dict, channels=6, window=100, features=32, hidden=64, classes=4):
        super().__init__()
        self.conv = torch.nn.Conv1d(channels, features, window, stride=window)
        self.lstm = torch.nn.LSTM(features, hidden, batch_first=True)
        self.fc = torch.nn.Linear(hidden, classes)
        with torch.no_grad():  # nngraph's layer source: [W_ih | W_hh] rows i, f, g, o (PyTorch's order)
            t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
            self.conv.weight.copy_(t(sources["conv"].weights()).reshape(self.conv.weight.shape))
            self.conv.bias.copy_(t(sources["conv"].biases()))
            w = sources["lstm"].weights().reshape(4 * hidden, features + hidden)
            self.lstm.weight_ih_l0.copy_(t(w[:, :features]))
            self.lstm.weight_hh_l0.copy_(t(w[:, features:]))
            self.lstm.bias_ih_l0.copy_(t(sources["lstm"].biases()))
            self.lstm.bias_hh_l0.zero_()
            self.fc.weight.copy_(t(sources["fc"].weights()).reshape(self.fc.weight.shape))
            self.fc.bias.copy_(t(sources["fc"].biases()))

    def forward(self, x):  # x: N × C × 1 × L, as nngraph takes it
        h = torch.relu(self.conv(x[:, :, 0, :]))
        _, (hn, _) = self.lstm(h.transpose(1, 2))
        return self.fc(hn[-1])


class ResidualNetwork(torch.nn.Module):
    """nngraph.models.residual_network in PyTorch; `tensors` maps its labels to
    {tensor name: array} (ng.graph parameters() or ds.tensors())."""

    def __init__(self, tensors: dict, widths=(32, 64, 128), channels=1, classes=10):
        super().__init__()
        from nngraph.models import residual_layers
        self.layers = torch.nn.ModuleDict()
        for label, kind, cin, cout in residual_layers(widths, channels):
            t = tensors[label]
            if kind == "bn":
                m = torch.nn.BatchNorm2d(cout)
                pairs = [(m.weight, "gamma"), (m.bias, "beta"), (m.running_mean, "mean"), (m.running_var, "variance")]
            elif kind == "conv":
                m = torch.nn.Conv2d(cin, cout, 3, padding=1, bias=False)
                pairs = [(m.weight, "weights")]
            else:
                m = torch.nn.Linear(cin, classes)
                pairs = [(m.weight, "weights"), (m.bias, "biases")]
            with torch.no_grad():
                for param, name in pairs:
                    param.copy_(torch.from_numpy(np.ascontiguousarray(t[name])).reshape(param.shape))
            self.layers[label] = m
        self.stages = len(widths)

    def forward(self, x):
        L = self.layers
        for s in range(1, self.stages + 1):
            if s > 1:
                x = torch.nn.functional.max_pool2d(x, 2)
            x = torch.relu(L[f"s{s}_bn"](L[f"s{s}_conv"](x)))
            r = torch.relu(L[f"s{s}_block_bn1"](L[f"s{s}_block_conv1"](x)))
            r = L[f"s{s}_block_bn2"](L[f"s{s}_block_conv2"](r))
            x = torch.relu(x + r)
        return L["fc"](torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


class DenoisingAutoencoder(torch.nn.Module):
    """nngraph.models.denoising_autoencoder in PyTorch; `tensors` maps its labels to
    {tensor name: array}."""

    def __init__(self, tensors: dict, widths=(16, 32, 64), channels=1):
        super().__init__()
        from nngraph.models import autoencoder_layers
        self.convs, self.norms = torch.nn.ModuleDict(), torch.nn.ModuleDict()
        for label, cin, cout, k, stride, transposed in autoencoder_layers(widths, channels):
            kind = torch.nn.ConvTranspose2d if transposed else torch.nn.Conv2d
            conv = kind(cin, cout, k, stride=stride, padding=1, bias=label == "out")
            pairs = [(conv.weight, tensors[label]["weights"])]
            if label == "out":
                pairs.append((conv.bias, tensors[label]["biases"]))
            else:
                norm = torch.nn.InstanceNorm2d(cout, affine=True)
                t = tensors[label + "_norm"]
                pairs += [(norm.weight, t["gamma"]), (norm.bias, t["beta"])]
                self.norms[label] = norm
            with torch.no_grad():
                for param, value in pairs:
                    param.copy_(torch.from_numpy(np.ascontiguousarray(value)).reshape(param.shape))
            self.convs[label] = conv

    def forward(self, x):
        def block(h, label):
            return torch.relu(self.norms[label](self.convs[label](h)))
        h = block(block(block(x, "enc1"), "enc2"), "enc3")
        h = block(torch.nn.functional.interpolate(block(h, "dec1"), scale_factor=2, mode="nearest"), "dec2")
        return torch.sigmoid(self.convs["out"](h))


def load_sources(module: torch.nn.Module, sources: dict) -> torch.nn.Module:
    """Copies nngraph data sources into a module whose submodule names are their labels
    (torchvision's and airbench's names): weights/biases → weight/bias, gamma/beta/mean/variance →
    a batch norm's weight/bias/running_mean/running_var."""
    names = {"weights": "weight", "biases": "bias", "gamma": "weight", "beta": "bias", "mean": "running_mean",
             "variance": "running_var"}
    state = module.state_dict()
    for label, ds in sources.items():
        for name, value in ds.tensors().items():
            if value is not None:
                key = f"{label}.{names[name]}"
                state[key] = torch.from_numpy(np.ascontiguousarray(value)).reshape(state[key].shape)
    module.load_state_dict(state)
    return module


class ConvBN(torch.nn.Module):
    """Convolution without biases, batch norm (epsilon 1e-3), relu: torchvision's BasicConv2d."""

    def __init__(self, cin, cout, kernel, stride=1, padding=0):
        super().__init__()
        self.conv = torch.nn.Conv2d(cin, cout, kernel, stride, padding, bias=False)
        self.bn = torch.nn.BatchNorm2d(cout, eps=1e-3)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class ResNet(torch.nn.Module):
    """nngraph.models.resnet18 / resnet50 (torchvision's topology and names) in PyTorch."""

    def __init__(self, bottleneck: bool, depths, classes=1000, channels=3, stem="imagenet"):
        super().__init__()
        f = torch.nn
        k, s, p = (7, 2, 3) if stem == "imagenet" else (3, 1, 1)
        self.conv1, self.bn1 = f.Conv2d(channels, 64, k, s, p, bias=False), f.BatchNorm2d(64)
        self.pool = f.MaxPool2d(3, 2, 1) if stem == "imagenet" else f.Identity()
        cin = 64
        for stage, (planes, depth) in enumerate(zip((64, 128, 256, 512), depths), 1):
            blocks = []
            for i in range(depth):
                stride = 2 if stage > 1 and i == 0 else 1
                blocks.append(_Block(bottleneck, cin, planes, stride))
                cin = blocks[-1].cout
            setattr(self, f"layer{stage}", f.Sequential(*blocks))
        self.fc = f.Linear(cin, classes)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        for stage in range(1, 5):
            x = getattr(self, f"layer{stage}")(x)
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


class _Block(torch.nn.Module):
    def __init__(self, bottleneck, cin, planes, stride):
        super().__init__()
        f = torch.nn
        self.cout = 4 * planes if bottleneck else planes
        shapes = ([(cin, planes, 1, 1, 0), (planes, planes, 3, stride, 1), (planes, self.cout, 1, 1, 0)] if bottleneck
                  else [(cin, planes, 3, stride, 1), (planes, planes, 3, 1, 1)])
        self.depth = len(shapes)
        for i, (a, b, k, s, p) in enumerate(shapes, 1):
            setattr(self, f"conv{i}", f.Conv2d(a, b, k, s, p, bias=False))
            setattr(self, f"bn{i}", f.BatchNorm2d(b))
        self.downsample = (f.Sequential(f.Conv2d(cin, self.cout, 1, stride, bias=False), f.BatchNorm2d(self.cout))
                           if stride != 1 or cin != self.cout else None)

    def forward(self, x):
        r = x
        for i in range(1, self.depth + 1):
            r = getattr(self, f"bn{i}")(getattr(self, f"conv{i}")(r))
            r = torch.relu(r) if i < self.depth else r
        return torch.relu(r + (self.downsample(x) if self.downsample is not None else x))


class _Branches(torch.nn.Module):
    """An Inception block: named units, the branches as lists of (unit name or pooling), concatenated."""

    def __init__(self, units: dict, branches: list):
        super().__init__()
        for name, args in units.items():
            setattr(self, name, ConvBN(*args))
        self.branches = branches

    def forward(self, x):
        out = []
        for branch in self.branches:
            h = x
            for step in branch:
                if isinstance(step, tuple):  # a split: several units side by side
                    out += [getattr(self, s)(h) for s in step]
                    h = None
                    break
                h = (torch.nn.functional.avg_pool2d(h, 3, 1, 1) if step == "avg" else
                     torch.nn.functional.max_pool2d(h, 3, 2) if step == "max" else getattr(self, step)(h))
            if h is not None:
                out.append(h)
        return torch.cat(out, 1)


def _inception_blocks():
    """(name, units, branches) of Inception-v3's mixed blocks, torchvision's names."""
    def a(cin, pool):
        return ({"branch1x1": (cin, 64, 1), "branch5x5_1": (cin, 48, 1), "branch5x5_2": (48, 64, 5, 1, 2),
                 "branch3x3dbl_1": (cin, 64, 1), "branch3x3dbl_2": (64, 96, 3, 1, 1),
                 "branch3x3dbl_3": (96, 96, 3, 1, 1), "branch_pool": (cin, pool, 1)},
                [["branch1x1"], ["branch5x5_1", "branch5x5_2"], ["branch3x3dbl_1", "branch3x3dbl_2", "branch3x3dbl_3"],
                 ["avg", "branch_pool"]])

    def c(c7):
        r, q = ((1, 7), 1, (0, 3)), ((7, 1), 1, (3, 0))
        return ({"branch1x1": (768, 192, 1), "branch7x7_1": (768, c7, 1), "branch7x7_2": (c7, c7, *r),
                 "branch7x7_3": (c7, 192, *q), "branch7x7dbl_1": (768, c7, 1), "branch7x7dbl_2": (c7, c7, *q),
                 "branch7x7dbl_3": (c7, c7, *r), "branch7x7dbl_4": (c7, c7, *q), "branch7x7dbl_5": (c7, 192, *r),
                 "branch_pool": (768, 192, 1)},
                [["branch1x1"], ["branch7x7_1", "branch7x7_2", "branch7x7_3"],
                 [f"branch7x7dbl_{i}" for i in range(1, 6)], ["avg", "branch_pool"]])

    def e(cin):
        r, q = ((1, 3), 1, (0, 1)), ((3, 1), 1, (1, 0))
        return ({"branch1x1": (cin, 320, 1), "branch3x3_1": (cin, 384, 1), "branch3x3_2a": (384, 384, *r),
                 "branch3x3_2b": (384, 384, *q), "branch3x3dbl_1": (cin, 448, 1),
                 "branch3x3dbl_2": (448, 384, 3, 1, 1), "branch3x3dbl_3a": (384, 384, *r),
                 "branch3x3dbl_3b": (384, 384, *q), "branch_pool": (cin, 192, 1)},
                [["branch1x1"], ["branch3x3_1", ("branch3x3_2a", "branch3x3_2b")],
                 ["branch3x3dbl_1", "branch3x3dbl_2", ("branch3x3dbl_3a", "branch3x3dbl_3b")], ["avg", "branch_pool"]])

    b = ({"branch3x3": (288, 384, 3, 2), "branch3x3dbl_1": (288, 64, 1), "branch3x3dbl_2": (64, 96, 3, 1, 1),
          "branch3x3dbl_3": (96, 96, 3, 2)},
         [["branch3x3"], ["branch3x3dbl_1", "branch3x3dbl_2", "branch3x3dbl_3"], ["max"]])
    d = ({"branch3x3_1": (768, 192, 1), "branch3x3_2": (192, 320, 3, 2), "branch7x7x3_1": (768, 192, 1),
          "branch7x7x3_2": (192, 192, (1, 7), 1, (0, 3)), "branch7x7x3_3": (192, 192, (7, 1), 1, (3, 0)),
          "branch7x7x3_4": (192, 192, 3, 2)},
         [["branch3x3_1", "branch3x3_2"], [f"branch7x7x3_{i}" for i in range(1, 5)], ["max"]])
    return [("Mixed_5b", *a(192, 32)), ("Mixed_5c", *a(256, 64)), ("Mixed_5d", *a(288, 64)), ("Mixed_6a", *b),
            ("Mixed_6b", *c(128)), ("Mixed_6c", *c(160)), ("Mixed_6d", *c(160)), ("Mixed_6e", *c(192)),
            ("Mixed_7a", *d), ("Mixed_7b", *e(1280)), ("Mixed_7c", *e(2048))]


class InceptionV3(torch.nn.Module):
    """nngraph.models.inception_v3 (torchvision's topology and names, no auxiliary head) in PyTorch."""

    def __init__(self, classes=1000, channels=3):
        super().__init__()
        for name, args in (("Conv2d_1a_3x3", (channels, 32, 3, 2)), ("Conv2d_2a_3x3", (32, 32, 3)),
                           ("Conv2d_2b_3x3", (32, 64, 3, 1, 1)), ("Conv2d_3b_1x1", (64, 80, 1)),
                           ("Conv2d_4a_3x3", (80, 192, 3))):
            setattr(self, name, ConvBN(*args))
        self.mixed = [name for name, _, _ in _inception_blocks()]
        for name, units, branches in _inception_blocks():
            setattr(self, name, _Branches(units, branches))
        self.dropout, self.fc = torch.nn.Dropout(0.5), torch.nn.Linear(2048, classes)

    def forward(self, x):
        mp = torch.nn.functional.max_pool2d
        x = mp(self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x))), 3, 2)
        x = mp(self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x)), 3, 2)
        for name in self.mixed:
            x = getattr(self, name)(x)
        return self.fc(self.dropout(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1)))


class SpeedrunNet(torch.nn.Module):
    """nngraph.models.speedrun_net (airbench94's network) in PyTorch."""

    def __init__(self, classes=10, channels=3, widths=(64, 256, 256), momentum=0.4):
        super().__init__()
        f = torch.nn
        self.whiten = f.Conv2d(channels, 8 * channels, 2, bias=True)
        cin = 8 * channels
        for i, w in enumerate(widths, 1):
            block = f.Module()
            block.conv1 = f.Conv2d(cin, w, 3, padding=1, bias=False)
            block.conv2 = f.Conv2d(w, w, 3, padding=1, bias=False)
            block.norm1, block.norm2 = f.BatchNorm2d(w, 1e-12, momentum), f.BatchNorm2d(w, 1e-12, momentum)
            setattr(self, f"block{i}", block)
            cin = w
        self.blocks = len(widths)
        self.head = f.Linear(cin, classes, bias=False)
        for p in [self.whiten.weight] + [getattr(getattr(self, f"block{i}"), n).weight
                                         for i in range(1, self.blocks + 1) for n in ("norm1", "norm2")]:
            p.requires_grad = False

    def forward(self, x):
        g = torch.nn.functional.gelu
        x = g(self.whiten(x))
        for i in range(1, self.blocks + 1):
            b = getattr(self, f"block{i}")
            x = g(b.norm1(torch.nn.functional.max_pool2d(b.conv1(x), 2)))
            x = g(b.norm2(b.conv2(x)))
        return self.head(torch.flatten(torch.nn.functional.max_pool2d(x, 3), 1)) / 9


class NetworkInNetwork(torch.nn.Module):
    """Network in Network for CIFAR-10 (Lin et al. 2014; DeepLearningKit's demo network): three
    stacks of a spatial convolution and two 1×1 ones, each followed by relu, between ceil-mode
    poolings, then global average pooling of the ten class maps."""

    def __init__(self, classes=10):
        super().__init__()
        f = torch.nn

        def stack(cin, k, widths):
            layers = []
            for i, w in enumerate(widths):
                layers += [f.Conv2d(cin, w, k if i == 0 else 1, padding=k // 2 if i == 0 else 0), f.ReLU()]
                cin = w
            return layers
        self.features = f.Sequential(
            *stack(3, 5, (192, 160, 96)), f.MaxPool2d(3, 2, ceil_mode=True), f.Dropout(0.5),
            *stack(96, 5, (192, 192, 192)), f.AvgPool2d(3, 2, ceil_mode=True), f.Dropout(0.5),
            *stack(192, 3, (192, 192, classes)), f.AdaptiveAvgPool2d(1), f.Flatten())

    def forward(self, x):
        return self.features(x)


class ViT(torch.nn.Module):
    """A vision transformer as timm writes one: patches, a class token, a learned position
    embedding, pre-norm blocks of attention (a fused query-key-value projection reshaped
    (N, T, 3, heads, d), scaled_dot_product_attention) and a GELU MLP; the class token's logits.
    `patches` is the number of patches (the image's side over `patch`, squared)."""

    def __init__(self, width=24, heads=3, depth=2, classes=10, patches=16, patch=4):
        super().__init__()
        f = torch.nn
        self.heads = heads
        self.patch = f.Conv2d(3, width, patch, stride=patch)
        self.cls = f.Parameter(torch.randn(1, 1, width))
        self.pos = f.Parameter(torch.randn(1, patches + 1, width) * 0.1)
        self.blocks = f.ModuleList(f.ModuleDict({
            "norm1": f.LayerNorm(width), "qkv": f.Linear(width, 3 * width), "proj": f.Linear(width, width),
            "norm2": f.LayerNorm(width), "mlp": f.Sequential(f.Linear(width, 2 * width), f.GELU(),
                                                             f.Linear(2 * width, width))}) for _ in range(depth))
        self.norm, self.head = f.LayerNorm(width), f.Linear(width, classes)

    def forward(self, x):
        t = self.patch(x).flatten(2).transpose(1, 2)
        t = torch.cat([self.cls.expand(t.shape[0], -1, -1), t], dim=1) + self.pos
        n, length, c = t.shape
        for b in self.blocks:
            q, k, v = b["qkv"](b["norm1"](t)).reshape(n, length, 3, self.heads, c // self.heads).permute(
                2, 0, 3, 1, 4).unbind(0)
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
            t = t + b["proj"](o.transpose(1, 2).reshape(n, length, c))
            t = t + b["mlp"](b["norm2"](t))
        return self.head(self.norm(t)[:, 0])
