"""One training step of the WWDC digit network (forward, softmax cross-entropy, gradients,
Adam update): nngraph against PyTorch on the same machine, in the same run, each
(framework, batch) in its own process; on cuda also against PyTorch with the whole step
captured in a CUDA graph. Every step takes its batch and labels from host (numpy) memory,
as a training loop does, and reads nothing back.

    python bench/digits_training.py [--batches 64 1024] [--steps 20] [--device cpu] [--format bfloat16]
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import measure_nngraph_training, measure_torch_training, training_main  # noqa: E402
from digits_inference import weights  # noqa: E402


def batch_data(batch):
    rng = np.random.default_rng(2)
    return rng.random((batch, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, batch).astype(np.int64)


def run_nngraph(batch, steps, threads, device, tf32, fmt):
    os.environ["NNGRAPH_NUM_THREADS"] = str(threads)
    import nngraph as ng
    from nngraph.models import digit_network
    ng.reset_peak_memory(device)
    net = digit_network(weights(), optimizer=ng.Adam(learning_rate=1e-4))
    loss = ng.Loss(net.logits, ng.LossDescriptor("softmax_cross_entropy", "mean"))
    graph = loss.training_graph(device=device, format=fmt)
    return measure_nngraph_training(graph, *batch_data(batch), steps, device, tf32)


def run_torch(batch, steps, threads, device, tf32, fmt, captured=False):
    import torch
    from torch_models import digit_network
    torch.backends.cudnn.allow_tf32 = tf32  # PyTorch's default is True for convolutions
    torch.backends.cuda.matmul.allow_tf32 = tf32
    xn, yn = batch_data(batch)
    return measure_torch_training(lambda: digit_network(weights()), xn, yn, device, steps, warmup=2,
                                  captured=captured, threads=threads, fmt=fmt)


def main():
    training_main(__file__, "digit network", [64, 1024], 64, run_nngraph, run_torch)


if __name__ == "__main__":
    main()
