"""Where a headline network's training step goes on the GPU: the device time of every kernel
of a few nngraph steps (CUPTI, through torch.profiler), summed by kernel name, per step.

    python bench/kernel_profile.py --network inception_v3 [--format bfloat16] [--batch 64] [--top 45]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import headline_training as H  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--network", choices=sorted(H.NETWORKS), required=True)
    p.add_argument("--format", default="bfloat16", choices=("float32", "bfloat16", "float16"))
    p.add_argument("--batch", type=int)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--top", type=int, default=45)
    a = p.parse_args()
    import torch

    import nngraph as ng
    batch = a.batch or H.NETWORKS[a.network].batches[0]
    net = H.build(a.network, ng.SGD(learning_rate=H.LEARNING_RATE, momentum=H.MOMENTUM, nesterov=True))
    graph = ng.Loss(net.logits, "softmax_cross_entropy").training_graph(device="cuda", format=a.format)
    graph.recompute = H.NETWORKS[a.network].recompute
    xn, y = H.batch_data(a.network, batch)
    x = ng.Image(xn, device="cuda")
    for _ in range(5):  # past the captures and the algorithm searches
        graph.encode(x, labels=y).wait()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(a.steps - 1):
            graph.encode(x, labels=y)
        graph.encode(x, labels=y).wait()
    total, count = collections.Counter(), collections.Counter()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total[e.name] += e.device_time_total
            count[e.name] += 1
    busy = sum(total.values()) / a.steps / 1000
    print(f"{a.network} {a.format} batch {batch}: {busy:.3f} ms of kernels a step, "
          f"{sum(count.values()) / a.steps:.0f} launches; {torch.cuda.get_device_name()}")
    print("| ms a step | launches | kernel |\n|---:|---:|---|")
    for name, us in total.most_common(a.top):
        print(f"| {us / a.steps / 1000:.3f} | {count[name] / a.steps:.1f} | {name[:100]} |")
    assert np.isfinite(busy) and busy > 0


if __name__ == "__main__":
    main()
