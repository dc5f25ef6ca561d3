"""One training step of the WWDC activity classifier (6 × 1 × 2000 → 1-D convolution 100:1 +
relu → LSTM over 20 steps → fully connected, softmax cross-entropy, Adam): nngraph against
PyTorch on the same machine, in the same run, each in its own process, with the same weights
and data. Every step takes its batch from host (numpy) memory and reads nothing back; on cuda
PyTorch also runs with the whole step captured in a CUDA graph.

    python bench/activity_training.py [--batch 32] [--steps 50] [--device cpu] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import (  # noqa: E402
    add_format_argument,
    add_rounds_argument,
    check_tolerance,
    measure_frameworks,
    measure_torch_training,
    median_ms,
    nngraph_pipelined_ms,
    peak_rss_mib,
    rounds_note,
    rss_cell,
    rss_mib,
)

LENGTH, STEPS, CLASSES = 2000, 20, 4


def network():
    import nngraph as ng
    from nngraph.models import activity_network
    return activity_network(classes=CLASSES, length=LENGTH, steps=STEPS, seed=5, optimizer=ng.Adam(learning_rate=1e-4))


def batch_data(batch):
    rng = np.random.default_rng(3)
    return rng.standard_normal((batch, 6, 1, LENGTH), dtype=np.float32), rng.integers(0, CLASSES, batch)


def run_nngraph(batch, steps, threads, device, fmt):
    os.environ["NNGRAPH_NUM_THREADS"] = str(threads)
    import nngraph as ng
    ng.reset_peak_memory(device)
    net = network()
    graph = ng.Loss(net.logits, "softmax_cross_entropy").training_graph(device=device, format=fmt)
    x, y = batch_data(batch)
    logits = graph.inference().run(x).reshape(batch, CLASSES)
    base = rss_mib()
    ms = median_ms(lambda: graph.encode(x, labels=y).wait(), warmup=3, steps=steps)
    pipe = nngraph_pipelined_ms(graph, x, y, steps) if device.startswith("cuda") else float("nan")
    return {"ms": ms, "pipe_ms": pipe, "peak_mib": peak_rss_mib(), "base_mib": base,
            "check": float(np.abs(logits).sum()), "device_mib": ng.memory_stats(device)["peak_bytes"] / 2**20}


def run_torch(batch, steps, threads, device, fmt, captured=False):
    from torch_models import ActivityNetwork
    xn, yn = batch_data(batch)
    return measure_torch_training(lambda: ActivityNetwork(network().sources, window=LENGTH // STEPS, classes=CLASSES),
                                  xn, yn, device, steps, warmup=3, captured=captured, threads=threads,
                                  fmt=fmt)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--device", default="cpu")
    p.add_argument("--worker")
    add_format_argument(p)
    add_rounds_argument(p)
    a = p.parse_args()
    if a.worker:
        r = (run_nngraph(a.batch, a.steps, a.threads, a.device, a.format) if a.worker == "nngraph"
             else run_torch(a.batch, a.steps, a.threads, a.device, a.format, captured=a.worker == "torch-graph"))
        print(json.dumps(r))
        return
    import torch
    cuda = a.device.startswith("cuda")
    print(f"activity classifier training step (Adam), batch {a.batch}, 6×{LENGTH} → {STEPS} steps, {a.device}, "
          f"{a.format}, {a.threads} threads, {platform.machine()}, torch {torch.__version__}; "
          f"median of {a.steps} steps after 3 warm-up{rounds_note(a.rounds)}")
    args = ["--batch", str(a.batch), "--steps", str(a.steps), "--threads", str(a.threads), "--device", a.device,
            "--format", a.format]
    frameworks = ("nngraph", "torch", "torch-graph") if cuda else ("nngraph", "torch")
    r = measure_frameworks(__file__, frameworks, args, a.rounds)
    n, t = r["nngraph"], r["torch"]
    assert abs(n["check"] - t["check"]) < check_tolerance(a) * abs(t["check"]), (n, t)  # same logits before training
    if cuda:
        print("| steps | nngraph ms/step | PyTorch ms/step | ratio | PyTorch captured | ratio |"
              " peak device MiB (nngraph / PyTorch) |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        c = r["torch-graph"]
        for mode, key in (("each waited for", "ms"), ("pipelined", "pipe_ms")):
            print(f"| {mode} | {n[key]:.2f} | {t[key]:.2f} | {n[key] / t[key]:.2f} | {c[key]:.2f} | "
                  f"{n[key] / c[key]:.2f} | {n['device_mib']:.0f} / {t['device_mib']:.0f} |")
        return
    print("| nngraph ms/step | PyTorch ms/step | ratio | peak RSS MiB, +over setup (nngraph / PyTorch) |")
    print("|---:|---:|---:|---:|")
    print(f"| {n['ms']:.2f} | {t['ms']:.2f} | {n['ms'] / t['ms']:.2f} | {rss_cell(n)} / {rss_cell(t)} |")


if __name__ == "__main__":
    main()
