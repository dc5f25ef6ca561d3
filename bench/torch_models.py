"""The digit network in PyTorch, with the same weights as nngraph's, for comparisons."""

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
