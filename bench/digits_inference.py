"""Inference of the WWDC digit network: nngraph against PyTorch on the same machine, in the
same run. Each (framework, batch) runs in its own process so peak RSS belongs to it alone.

    python bench/digits_inference.py [--batches 64 1024] [--steps 30]
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


def weights(seed=0):
    from nngraph.models import DIGIT_LAYERS  # layer table only; no engine work
    rng = np.random.default_rng(seed)
    return {label: ((rng.standard_normal((cout, cin, k, k)) * np.sqrt(2 / (cin * k * k))).astype(np.float32),
                    (0.01 * rng.standard_normal(cout)).astype(np.float32))
            for label, k, cin, cout in DIGIT_LAYERS}


def run_nngraph(batch, steps, threads):
    os.environ["NNGRAPH_NUM_THREADS"] = str(threads)
    import nngraph as ng
    from nngraph.models import digit_network
    probs = digit_network(weights()).probabilities
    graph = ng.Graph(probs, device="cpu")
    x = np.random.default_rng(1).random((batch, 1, 28, 28), dtype=np.float32)
    base = rss_mib()
    ms = median_ms(lambda: graph.run(x), warmup=3, steps=steps)
    return {"ms": ms, "peak_mib": peak_rss_mib(), "base_mib": base, "checksum": float(graph.run(x)[:, 3].sum())}


def run_torch(batch, steps, threads):
    import torch
    from torch_models import digit_network
    torch.set_num_threads(threads)
    net = torch.nn.Sequential(digit_network(weights()), torch.nn.Softmax(dim=1)).eval()
    x = torch.from_numpy(np.random.default_rng(1).random((batch, 1, 28, 28), dtype=np.float32))
    base = rss_mib()
    with torch.inference_mode():
        ms = median_ms(lambda: net(x).numpy(), warmup=3, steps=steps)
        checksum = float(net(x)[:, 3].sum())
    return {"ms": ms, "peak_mib": peak_rss_mib(), "base_mib": base, "checksum": checksum}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batches", type=int, nargs="+", default=[64, 1024])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "BATCH"))
    a = p.parse_args()
    if a.worker:
        fn = run_nngraph if a.worker[0] == "nngraph" else run_torch
        print(json.dumps(fn(int(a.worker[1]), a.steps, a.threads)))
        return
    import torch
    print(f"digit network inference, cpu, {a.threads} threads, {platform.processor() or platform.machine()}, "
          f"torch {torch.__version__}; median of {a.steps} steps after 3 warm-up")
    print("| batch | nngraph ms | PyTorch ms | ratio | nngraph peak RSS MiB (+over setup) "
          "| PyTorch peak RSS MiB (+over setup) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for batch in a.batches:
        steps = max(5, a.steps * 64 // batch)
        r = {fw: measure_in_subprocess(__file__, [fw, str(batch), "--steps", str(steps), "--threads", str(a.threads)])
             for fw in ("nngraph", "torch")}
        n, t = r["nngraph"], r["torch"]
        check_checksums(n, t)
        print(f"| {batch} | {n['ms']:.2f} | {t['ms']:.2f} | {n['ms'] / t['ms']:.2f} | {rss_cell(n)} | {rss_cell(t)} |")


if __name__ == "__main__":
    main()
