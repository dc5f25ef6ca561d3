"""Inference whose result is a large image (a per-pixel layer over a batch: 64 × 64 × 56 × 56
floats, 49 MiB, past the size glibc maps afresh for every allocation) on the cpu: nngraph
against PyTorch on the same machine, in the same run, each in its own process. What it
measures is the cost around the kernel: where the result is written and whether its pages are
faulted in again on every run.

    python bench/image_results.py [--batches 8 64] [--steps 30]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import check_checksums, measure_in_subprocess, median_ms, peak_rss_mib, rss_cell, rss_mib

CHANNELS, SIDE = 64, 56


def data(batch):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((CHANNELS, CHANNELS, 1, 1)) / np.sqrt(CHANNELS)).astype(np.float32)
    b = (0.1 * rng.standard_normal(CHANNELS)).astype(np.float32)
    return w, b, rng.standard_normal((batch, CHANNELS, SIDE, SIDE), dtype=np.float32)


def run_nngraph(batch, steps):
    import nngraph as ng
    w, b, x = data(batch)
    d = ng.ConvolutionDescriptor(1, CHANNELS, CHANNELS, neuron=ng.NeuronDescriptor("relu"))
    graph = ng.Graph(ng.Convolution(ng.ImageNode(), ng.ArrayDataSource(d, w, b, "conv")), device="cpu")
    base = rss_mib()
    ms = median_ms(lambda: graph.run(x), warmup=3, steps=steps)
    return {"ms": ms, "peak_mib": peak_rss_mib(), "base_mib": base, "checksum": float(graph.run(x)[:, 3].sum())}


def run_torch(batch, steps):
    import torch
    w, b, x = data(batch)
    conv = torch.nn.Conv2d(CHANNELS, CHANNELS, 1).eval()
    conv.weight.data, conv.bias.data = torch.from_numpy(w), torch.from_numpy(b)
    xt = torch.from_numpy(x)
    base = rss_mib()
    with torch.inference_mode():
        ms = median_ms(lambda: torch.relu(conv(xt)).numpy(), warmup=3, steps=steps)
        checksum = float(torch.relu(conv(xt))[:, 3].sum())
    return {"ms": ms, "peak_mib": peak_rss_mib(), "base_mib": base, "checksum": checksum}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batches", type=int, nargs="+", default=[8, 64])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "BATCH"))
    a = p.parse_args()
    if a.worker:
        fn = run_nngraph if a.worker[0] == "nngraph" else run_torch
        print(json.dumps(fn(int(a.worker[1]), a.steps)))
        return
    import torch
    print(f"1×1 convolution + relu, {CHANNELS} → {CHANNELS} channels at {SIDE}×{SIDE}, cpu, "
          f"{platform.processor() or platform.machine()}, torch {torch.__version__}; median of {a.steps} runs "
          "after 3 warm-up, result to numpy")
    print("| batch | result MiB | nngraph ms | PyTorch ms | ratio | peak RSS MiB (+over setup) nngraph / PyTorch |")
    print("|---:|---:|---:|---:|---:|---|")
    for batch in a.batches:
        args = [str(batch), "--steps", str(a.steps)]
        r = {fw: measure_in_subprocess(__file__, [fw, *args]) for fw in ("nngraph", "torch")}
        n, t = r["nngraph"], r["torch"]
        check_checksums(n, t)
        print(f"| {batch} | {batch * CHANNELS * SIDE * SIDE * 4 / 2**20:.0f} | {n['ms']:.2f} | {t['ms']:.2f} | "
              f"{n['ms'] / t['ms']:.2f} | {rss_cell(n)} / {rss_cell(t)} |")


if __name__ == "__main__":
    main()
