"""Where a headline network's training step goes on the GPU: the device time of every kernel
of a few steps (CUPTI, through torch.profiler), summed by kernel name and by kind (convolutions,
matrix products, the rest), per step; nngraph's step as the benchmark's recipe trains, or
PyTorch's in one of the benchmark's modes, so the two can be set side by side.

    python bench/kernel_profile.py --network inception_v3 [--framework nngraph | torch-eager |
        torch-graph | torch-compile] [--format bfloat16] [--tf32] [--batch 64] [--top 45]
        [--launches FILE]

--launches profiles one more step and writes its kernels in the order they ran, one a line:
start (µs from the step's first kernel), device µs and name, tab-separated, to set two
frameworks' steps side by side.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import headline_training as H  # noqa: E402

# cuDNN's and our convolution kernels by name; the other products are cuBLAS's (nvjet_* on
# Hopper) or CUTLASS's.
CONVOLUTION = re.compile(r"conv|fprop|dgrad|wgrad|implicit", re.I)
PRODUCT = re.compile(r"gemm|cutlass|cublas|nvjet", re.I)


def kind(name: str) -> str:
    """A kernel's kind by its name: convolution, matrix product or other. Inductor's Triton
    kernels are the fused elementwise and reduction passes, whatever ops their names list
    (`..._convolution_backward_native_batch_norm_backward_...`)."""
    if name.startswith("triton_"):
        return "other"
    return "convolution" if CONVOLUTION.search(name) else "matrix product" if PRODUCT.search(name) else "other"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--network", choices=sorted(H.NETWORKS), required=True)
    p.add_argument("--framework", default="nngraph", choices=("nngraph", "torch-eager", "torch-graph", "torch-compile"))
    p.add_argument("--format", default="bfloat16", choices=("float32", "bfloat16", "float16"))
    p.add_argument("--tf32", action="store_true", help="float32 products may use tf32 tensor cores")
    p.add_argument("--batch", type=int)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--top", type=int, default=45)
    p.add_argument("--launches", help="write one step's kernels in order to this file")
    a = p.parse_args()
    import torch
    batch = a.batch or H.NETWORKS[a.network].batches[0]
    if a.framework == "nngraph":
        graph, x, y = H.nngraph_training(a.network, batch, "cuda", a.tf32, a.format)

        def step(wait=False):
            run = graph.encode(x, labels=y)
            if wait:
                run.wait()
    else:
        torch_step, _, _ = H.torch_training(a.network, batch, "cuda", a.tf32, a.format, a.framework.split("-")[1])

        def step(wait=False):
            torch_step()
            if wait:
                torch.cuda.synchronize()
    for _ in range(5):  # past the captures, compiles and algorithm searches
        step(wait=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for i in range(a.steps):
            step(wait=i == a.steps - 1)
    total, count = collections.Counter(), collections.Counter()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total[e.name] += e.device_time_total
            count[e.name] += 1
    busy = sum(total.values()) / a.steps / 1000
    print(f"{a.framework}: {a.network} {a.format}{' tf32' if a.tf32 else ''} batch {batch}: {busy:.3f} ms of kernels a "
          f"step, {sum(count.values()) / a.steps:.0f} launches; {torch.cuda.get_device_name()}")
    kinds = collections.Counter()
    for name, us in total.items():
        kinds[kind(name)] += us
    print(" · ".join(f"{k} {us / a.steps / 1000:.3f} ms" for k, us in kinds.most_common()))
    print("| ms a step | launches | kernel |\n|---:|---:|---|")
    for name, us in total.most_common(a.top):
        print(f"| {us / a.steps / 1000:.3f} | {count[name] / a.steps:.1f} | {name[:100]} |")
    assert np.isfinite(busy) and busy > 0
    if a.launches:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as one:
            step(wait=True)
        write_launches(one, a.launches)


def write_launches(prof, path: str):
    """One step's kernels in the order they began, to path."""
    import torch

    kernels = sorted(
        (e.time_range.start, e.device_time_total, e.name)
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
    )
    with open(path, "w") as f:
        for start, us, name in kernels:
            f.write(f"{start - kernels[0][0]:.1f}\t{us:.1f}\t{name}\n")


if __name__ == "__main__":
    main()
