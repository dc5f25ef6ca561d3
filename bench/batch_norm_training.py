"""The evaluation of cuDNN's batch-normalization routines against our kernels: a training step of
a chain of batch normalization + relu layers (then global average pooling and softmax
cross-entropy over the channels), so the step is the normalizations' forward and backward
passes and their statistics. nngraph (our kernels in shaders/cuda/normalization.cu) against
PyTorch with the whole step captured in a CUDA graph (no launch overhead), once with cuDNN's
batch norm (cudnnBatchNormalizationForwardTrainingEx and BackwardEx, PyTorch's default) and
once with PyTorch's native kernels; each in its own process.

    python bench/batch_norm_training.py [--shapes 128x32x28x28 ...] [--layers 8] [--steps 40]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import measure_in_subprocess, measure_nngraph_training, measure_torch_training  # noqa: E402

SHAPES = ["128x32x28x28", "128x64x14x14", "128x128x7x7", "512x32x28x28", "512x128x7x7", "64x256x56x56"]


def batch_data(shape):
    n, c, h, w = shape
    rng = np.random.default_rng(3)
    return rng.standard_normal((n, c, h, w), dtype=np.float32), rng.integers(0, c, n).astype(np.int64)


def run_nngraph(shape, layers, steps):
    import nngraph as ng
    ng.reset_peak_memory("cuda")
    h = ng.ImageNode(label="x")
    for i in range(layers):
        h = ng.Neuron(ng.BatchNormalization(h, shape[1], label=f"bn{i}"), "relu")
    logits = ng.GlobalAveragePooling(h)
    graph = ng.Loss(logits, ng.LossDescriptor("softmax_cross_entropy", "mean")).training_graph(
        device="cuda", optimizer=ng.Adam(learning_rate=1e-4))
    return measure_nngraph_training(graph, *batch_data(shape), steps, "cuda", False)


def run_torch(shape, layers, steps, cudnn):
    import torch
    torch.backends.cudnn.enabled = cudnn

    def make():
        mods = []
        for _ in range(layers):
            mods += [torch.nn.BatchNorm2d(shape[1]), torch.nn.ReLU()]
        return torch.nn.Sequential(*mods, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    return measure_torch_training(make, *batch_data(shape), "cuda", steps, warmup=2, captured=True, threads=1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", nargs="+", default=SHAPES)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "SHAPE"))
    a = p.parse_args()
    if a.worker:
        shape = tuple(int(v) for v in a.worker[1].split("x"))
        fw = a.worker[0]
        r = run_nngraph(shape, a.layers, a.steps) if fw == "nngraph" else run_torch(shape, a.layers, a.steps,
                                                                                     fw == "cudnn")
        print(json.dumps(r))
        return
    import torch
    print(f"training step of {a.layers} × (batch norm + relu) → average pool → cross-entropy, cuda, "
          f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; median ms after warm-up")
    print("| N×C×H×W | nngraph | PyTorch captured, cuDNN BN | ratio | PyTorch captured, native BN | ratio |"
          " peak MiB (nngraph / cuDNN / native) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for s in a.shapes:
        args = ["--layers", str(a.layers), "--steps", str(a.steps)]
        r = {fw: measure_in_subprocess(__file__, [fw, s, *args]) for fw in ("nngraph", "cudnn", "native")}
        n, c, t = r["nngraph"], r["cudnn"], r["native"]  # no weights to compare: gamma 1, beta 0 in both
        print(f"| {s} | {n['ms']:.3f} | {c['ms']:.3f} | {n['ms'] / c['ms']:.2f} | {t['ms']:.3f} | "
              f"{n['ms'] / t['ms']:.2f} | {n['device_mib']:.0f} / {c['device_mib']:.0f} / {t['device_mib']:.0f} |")


if __name__ == "__main__":
    main()
