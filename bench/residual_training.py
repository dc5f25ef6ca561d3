"""One training step of the residual network with batch normalization
(nngraph.models.residual_network, 1×28×28 images: forward with batch statistics, softmax
cross-entropy, gradients, Adam update, running statistics): nngraph against PyTorch on the same
machine, in the same run, each (framework, batch) in its own process; on cuda also against
PyTorch with the whole step captured in a CUDA graph. Every step takes its batch and labels from
host (numpy) memory, as a training loop does, and reads nothing back.

    python bench/residual_training.py [--batches 128 512] [--steps 20] [--device cpu] [--format bfloat16]
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import measure_nngraph_training, measure_torch_training, training_main  # noqa: E402


def batch_data(batch):
    rng = np.random.default_rng(2)
    return rng.random((batch, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, batch).astype(np.int64)


def initial_tensors():
    """The network's initial parameters, {label: {name: array}}: both frameworks start from them."""
    from nngraph.models import residual_network
    return {label: ds.tensors() for label, ds in residual_network().sources.items()}


def run_nngraph(batch, steps, threads, device, tf32, fmt):
    os.environ["NNGRAPH_NUM_THREADS"] = str(threads)
    import nngraph as ng
    from nngraph.models import residual_network
    ng.reset_peak_memory(device)
    net = residual_network(optimizer=ng.Adam(learning_rate=1e-4))
    loss = ng.Loss(net.logits, ng.LossDescriptor("softmax_cross_entropy", "mean"))
    graph = loss.training_graph(device=device, format=fmt)
    return measure_nngraph_training(graph, *batch_data(batch), steps, device, tf32)


def run_torch(batch, steps, threads, device, tf32, fmt, captured=False):
    import torch
    from torch_models import ResidualNetwork
    torch.backends.cudnn.allow_tf32 = tf32  # PyTorch's default is True for convolutions
    torch.backends.cuda.matmul.allow_tf32 = tf32
    xn, yn = batch_data(batch)
    tensors = initial_tensors()
    return measure_torch_training(lambda: ResidualNetwork(tensors), xn, yn, device, steps, warmup=2,
                                  captured=captured, threads=threads, fmt=fmt)


def main():
    training_main(__file__, "residual BN network", [128, 512], 128, run_nngraph, run_torch)


if __name__ == "__main__":
    main()
