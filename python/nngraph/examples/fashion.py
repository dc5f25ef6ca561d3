"""Trains a residual network with batch normalization on real Fashion-MNIST to 93% test accuracy.

Three stages of widths 16, 32, 64 (3×3 convolution + batch norm + relu, then one residual block;
2×2 max pooling between), global average pooling, fully connected to 10 classes; softmax
cross-entropy, SGD with Nesterov momentum and weight decay under a one-cycle learning rate. The
test accuracy is measured by the inference graph, where each batch normalization folds into
its convolution.

--network resnet18 trains torchvision's ResNet-18 with the 32×32 stem instead (to 94%), from a
DeviceDataset whose batches are translated by up to 2 pixels and mirrored at random on the
device, in bfloat16 on cuda.

Data: the IDX files of Debian's dataset-fashion-mnist package, or a folder given with --data."""

from __future__ import annotations

import argparse
import time

import nngraph as ng
from nngraph import schedules
from nngraph.datasets import load_fashion_mnist
from nngraph.examples import add_fit_arguments, finish, print_epoch, show_progress
from nngraph.models import residual_network, resnet18


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="folder with the four Fashion-MNIST IDX files (default: Debian's)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--network", choices=["residual", "resnet18"], default="residual")
    p.add_argument("--epochs", type=int, help="default 4 (residual), 16 (resnet18)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--learning-rate", type=float, default=0.2, help="the one-cycle schedule's peak")
    p.add_argument("--widths", type=int, nargs=3, default=(16, 32, 64), help="channels of the three stages")
    p.add_argument("--target", type=float, help="the test accuracy to reach: default 0.93 (residual), 0.94 (resnet18)")
    p.add_argument("--limit", type=int, help="train on the first N images only (a quick look)")
    add_fit_arguments(p)
    args = p.parse_args(argv)
    big = args.network == "resnet18"
    args.epochs = args.epochs or (16 if big else 4)
    args.target = args.target or (0.94 if big else 0.93)

    t0 = time.perf_counter()
    x_train, y_train, x_test, y_test = load_fashion_mnist(args.data)
    if args.limit:
        x_train, y_train = x_train[:args.limit], y_train[:args.limit]
    print(f"Fashion-MNIST: {len(x_train)} training and {len(x_test)} test images "
          f"({time.perf_counter() - t0:.1f} s to load)")
    optimizer = ng.SGD(learning_rate=args.learning_rate, momentum=0.9, nesterov=True, regularization="l2",
                       regularization_scale=5e-4)
    if big:
        net = resnet18(10, channels=1, size=28, stem="cifar", seed=args.seed, optimizer=optimizer)
        train = ng.DeviceDataset(x_train, y_train, args.device, classes=10, translate=2, pad="zero", flip="random",
                                 seed=args.seed)
        name = "ResNet-18"
    else:
        net = residual_network(tuple(args.widths), seed=args.seed, optimizer=optimizer)
        train = (x_train, y_train)
        name = f"residual network {'/'.join(map(str, args.widths))}"
    loss = ng.Loss(net.logits, ng.LossDescriptor("softmax_cross_entropy", "mean", label_smoothing=0.1))
    graph = loss.training_graph(device=args.device, format="bfloat16" if big and args.device != "cpu" else "float32")
    parameters = sum(v.size for tensors in graph.parameters().values() for v in tensors.values() if v is not None)
    print(f"{name} on {graph.device}: {parameters} parameters")

    steps = args.epochs * -(-len(x_train) // args.batch_size)
    start = time.perf_counter()
    history = ng.fit(graph, train, epochs=args.epochs, batch_size=args.batch_size,
                     validation=(x_test, y_test), callbacks=[print_epoch],
                     lr_schedule=schedules.one_cycle(args.learning_rate, steps, pct_start=0.25),
                     progress=show_progress(args), seed=args.seed)
    seconds = time.perf_counter() - start
    print(f"wall time {time.perf_counter() - t0:.1f} s (data, training and evaluation)")
    return finish(history, args.target, seconds, graph=graph, checkpoint=args.checkpoint)


if __name__ == "__main__":
    main()
