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
