"""One training step of the residual network with batch normalization
(nngraph.models.residual_network, 1×28×28 images: forward with batch statistics, softmax
cross-entropy, gradients, Adam update, running statistics): nngraph against PyTorch on the same
machine, in the same run, each (framework, batch) in its own process; on cuda also against
PyTorch with the whole step captured in a CUDA graph. Every step takes its batch and labels from
host (numpy) memory, as a training loop does, and reads nothing back.

    python bench/residual_training.py [--batches 128 512] [--steps 20] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import measure_in_subprocess, measure_torch_training, median_ms, nngraph_pipelined_ms, peak_rss_mib, rss_mib  # noqa: E402


def batch_data(batch):
    rng = np.random.default_rng(2)
    return rng.random((batch, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, batch).astype(np.int64)


def initial_tensors():
    """The network's initial parameters, {label: {name: array}}: both frameworks start from them."""
    from nngraph.models import residual_network
    return {label: ds.tensors() for label, ds in residual_network().sources.items()}


def run_nngraph(batch, steps, threads, device, tf32):
    os.environ["NNGRAPH_NUM_THREADS"] = str(threads)
    import nngraph as ng
    from nngraph.models import residual_network
    ng.reset_peak_memory(device)
    net = residual_network(optimizer=ng.Adam(learning_rate=1e-4))
    graph = ng.Loss(net.logits, ng.LossDescriptor("softmax_cross_entropy", "mean")).training_graph(device=device)
    graph.allow_tf32 = tf32
    x, y = batch_data(batch)
    logits = graph.inference().run(x).reshape(batch, 10)  # before any step: running statistics 0 and 1
    base = rss_mib()
    ms = median_ms(lambda: graph.encode(x, labels=y).wait(), warmup=2, steps=steps)
    pipe = nngraph_pipelined_ms(graph, x, y, steps) if device.startswith("cuda") else float("nan")
    return {"ms": ms, "pipe_ms": pipe, "peak_mib": peak_rss_mib(), "base_mib": base,
            "check": float(np.abs(logits).sum()), "device_mib": ng.memory_stats(device)["peak_bytes"] / 2**20}


def run_torch(batch, steps, threads, device, tf32, captured=False):
    import torch
    from torch_models import ResidualNetwork
    torch.backends.cudnn.allow_tf32 = tf32  # PyTorch's default is True for convolutions
    torch.backends.cuda.matmul.allow_tf32 = tf32
    xn, yn = batch_data(batch)
    tensors = initial_tensors()
    return measure_torch_training(lambda: ResidualNetwork(tensors), xn, yn, device, steps, warmup=2,
                                  captured=captured, threads=threads)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batches", type=int, nargs="+", default=[128, 512])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--device", default="cpu")
    p.add_argument("--tf32", action="store_true", help="cuda: both frameworks may use tf32 tensor cores")
    p.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "BATCH"))
    a = p.parse_args()
    if a.worker:
        fw, batch = a.worker[0], int(a.worker[1])
        if fw == "nngraph":
            r = run_nngraph(batch, a.steps, a.threads, a.device, a.tf32)
        else:
            r = run_torch(batch, a.steps, a.threads, a.device, a.tf32, captured=fw == "torch-graph")
        print(json.dumps(r))
        return
    import torch
    print(f"residual BN network training step (Adam), {a.device}{', tf32' if a.tf32 else ', exact float32'}, "
          f"{a.threads} threads, {platform.machine()}, "
          f"torch {torch.__version__}; median of the steps after 2 warm-up")
    cuda = a.device.startswith("cuda")
    if cuda:
        print("| batch | steps | nngraph ms/step | PyTorch ms/step | ratio | PyTorch captured ms/step |"
              " ratio to captured | peak device MiB (nngraph / PyTorch) |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|")
    else:
        print("| batch | nngraph ms/step | PyTorch ms/step | ratio | peak RSS MiB, +over setup (nngraph / PyTorch) |")
        print("|---:|---:|---:|---:|---:|")
    for batch in a.batches:
        steps = max(5, a.steps * 128 // batch)
        args = [str(batch), "--steps", str(steps), "--threads", str(a.threads), "--device", a.device]
        args += ["--tf32"] if a.tf32 else []
        frameworks = ("nngraph", "torch", "torch-graph") if cuda else ("nngraph", "torch")
        r = {fw: measure_in_subprocess(__file__, [fw, *args]) for fw in frameworks}
        n, t = r["nngraph"], r["torch"]
        # Same weights and data: the logits before training must agree (tf32 rounds, so 1e-2).
        assert abs(n["check"] - t["check"]) < (1e-2 if a.tf32 else 1e-4) * abs(t["check"]), (n, t)
        if not cuda:
            print(f"| {batch} | {n['ms']:.2f} | {t['ms']:.2f} | {n['ms'] / t['ms']:.2f} | {n['peak_mib']:.0f} "
                  f"(+{n['peak_mib'] - n['base_mib']:.0f}) / {t['peak_mib']:.0f} "
                  f"(+{t['peak_mib'] - t['base_mib']:.0f}) |")
            continue
        c = r["torch-graph"]
        for mode, key in (("each waited for", "ms"), ("pipelined", "pipe_ms")):
            print(f"| {batch} | {mode} | {n[key]:.2f} | {t[key]:.2f} | {n[key] / t[key]:.2f} | {c[key]:.2f} | "
                  f"{n[key] / c[key]:.2f} | {n['device_mib']:.0f} / {t['device_mib']:.0f} |")

if __name__ == "__main__":
    main()
