"""The airbench94 speed-run recipe on real Fashion-MNIST, timed to its test accuracy.

speedrun_net (a frozen whitening convolution initialised from the training patches, three
convolution groups with batch norm and GELU) trains on a DeviceDataset: the images are uploaded
once, and every batch is gathered, shuffled, translated by up to 2 pixels (reflected) and
flipped on alternate epochs on the device. The recipe is airbench94's: batch 1024, Nesterov SGD
(momentum 0.85, L2 decay, the batch norms' biases at 64× the learning rate), label smoothing 0.2
with a summed loss, a linear warm-up then decay of the learning rate, lookahead every 5 steps,
the whitening biases trained for the first 3 epochs only, and test-time augmentation (flip and
one-pixel shifts) in the evaluation. bfloat16 on cuda, float32 on the cpu. The network is small,
so the graph keeps its normalizations' results for the gradients (Graph.recompute off).

Timed as airbench times itself: the whitening initialisation, training and the evaluation with
TTA; the data's loading and upload, making the graph and a first warm-up run (its planning,
the cuDNN algorithm search and capture) are not: each seed resets the weights of that graph.
Prints the time and the test accuracy of each seed."""

from __future__ import annotations

import argparse
import time

import numpy as np

import nngraph as ng
from nngraph.datasets import load_fashion_mnist
from nngraph.models import speedrun_net, whitening_weights

MOMENTUM = 0.85
LOOKAHEAD_STEPS = 5


def recipe(epochs: int, steps_per_epoch: int, batch_size: int, lr: float = 11.5, weight_decay: float = 0.0153,
           bias_scaler: float = 64.0):
    """airbench94's hyper-parameters: (optimizer, batch-norm bias optimizer, lr_schedule).

    Its rates are per 1024 images and scaled by the Nesterov step's gain, 1 + 1/(1 − momentum);
    its decay is coupled (PyTorch's SGD), the same absolute amount for both groups."""
    kilostep = 1024 * (1 + 1 / (1 - MOMENTUM))
    base, decay = lr / kilostep, weight_decay * batch_size / kilostep
    total = epochs * steps_per_epoch
    weights = ng.SGD(base, momentum=MOMENTUM, nesterov=True, regularization="l2", regularization_scale=decay / base,
                     lookahead_steps=LOOKAHEAD_STEPS)
    biases = ng.SGD(base * bias_scaler, momentum=MOMENTUM, nesterov=True, regularization="l2",
                    regularization_scale=decay / (base * bias_scaler), lookahead_steps=LOOKAHEAD_STEPS)
    warmup = int(total * 0.23)

    def schedule(step: int) -> dict:
        if step < warmup:
            factor = 0.2 + 0.8 * step / warmup
        else:
            factor = 1.0 - 0.93 * (step - warmup) / (total - warmup)
        # The slow weights follow more closely as training ends: airbench's decay 0.95⁵·progress³.
        alpha = 1.0 - 0.95**5 * ((step + 1) / total) ** 3
        for opt in (weights, biases):
            opt.lookahead_alpha = alpha
        return {weights: base * factor, biases: base * bias_scaler * factor}

    return weights, biases, schedule


def image_format(device: str) -> str:
    """The training graph's format: bfloat16 on the GPU, float32 on the cpu."""
    return "bfloat16" if device != "cpu" else "float32"


def datasets(x_train, y_train, x_test, y_test, device: str) -> tuple[ng.DeviceDataset, ng.DeviceDataset]:
    """The training set (translate 2, flips alternating by epoch) and the test set on `device`,
    stored in the graph's format: the graph would round them to it at its edge anyway, so
    they train the same in half the memory."""
    fmt = image_format(device)
    train = ng.DeviceDataset(x_train, y_train, device, classes=10, dtype=fmt, translate=2, flip="alternating")
    return train, ng.DeviceDataset(x_test, y_test, device, classes=10, dtype=fmt)


def build(images: np.ndarray, steps_per_epoch: int, args):
    """(network, training graph, its evaluation graph, lr schedule), made once: each run resets
    the weights (whitening set per run) and trains and evaluates the same graphs (their plans,
    algorithm choices and captures kept)."""
    weights, biases, schedule = recipe(args.epochs, steps_per_epoch, args.batch_size)
    net = speedrun_net(10, channels=images.shape[1], size=images.shape[2], widths=tuple(args.widths),
                       optimizer=weights)
    for label, source in net.sources.items():
        if ".norm" in label:
            source.optimizer = biases
    loss = ng.Loss(net.logits, ng.LossDescriptor("softmax_cross_entropy", "sum", label_smoothing=0.2))
    graph = loss.training_graph(device=args.device, format=image_format(args.device))
    graph.recompute = False  # a small network: keeping its normalizations' results is the faster
    return net, graph, graph.evaluation(), schedule


def run(seed: int, setup: tuple, train: ng.DeviceDataset, test: ng.DeviceDataset, args,
        epochs: int | None = None) -> tuple[float, float]:
    """One timed run of build()'s `setup` from fresh weights (seed) and whitening from the first
    5000 training images (their statistics on the dataset's device): (seconds, test accuracy
    with TTA). epochs: fewer than the recipe's (a warm-up)."""
    net, graph, evaluation, schedule = setup
    start = time.perf_counter()
    net.reset(seed)
    net.sources["whiten"].set_weights(whitening_weights(train.images, count=min(5000, len(train))), "zeros")

    def stop_whitening_biases(epoch: int, logs: dict) -> None:
        if epoch + 1 == args.whiten_bias_epochs:
            net.sources["whiten"].frozen = ["weights", "biases"]

    ng.fit(graph, train, epochs=epochs or args.epochs, batch_size=args.batch_size, drop_last=True,
           lr_schedule=schedule, callbacks=[stop_whitening_biases], progress=False)
    accuracy = ng.evaluate(evaluation, test, batch_size=2000, tta="flip_shift")["accuracy"]
    return time.perf_counter() - start, accuracy


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="folder with the four Fashion-MNIST IDX files (default: Debian's)")
    p.add_argument("--device", default="cuda" if ng.device_count("cuda") else "cpu")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--whiten-bias-epochs", type=int, default=3)
    p.add_argument("--seeds", type=int, default=5, help="runs, with seeds 0, 1, ...")
    p.add_argument("--widths", type=int, nargs=3, default=(64, 256, 256), help="channels of the three groups")
    p.add_argument("--limit", type=int, help="train on the first N images only (a quick look)")
    p.add_argument("--test-limit", type=int, help="test on the first N images only")
    p.add_argument("--target", type=float, default=0.935, help="the mean test accuracy to reach")
    args = p.parse_args(argv)

    x_train, y_train, x_test, y_test = load_fashion_mnist(args.data)
    if args.limit:
        x_train, y_train = x_train[:args.limit], y_train[:args.limit]
    if args.test_limit:
        x_test, y_test = x_test[:args.test_limit], y_test[:args.test_limit]
    mean, std = x_train.mean(), x_train.std()
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    train, test = datasets(x_train, y_train, x_test, y_test, args.device)
    print(f"Fashion-MNIST on {args.device}: {len(train)} training and {len(test)} test images, "
          f"{args.epochs} epochs of batch {args.batch_size}")
    setup = build(x_train, len(train) // args.batch_size, args)
    run(0, setup, train, test, args, epochs=1)  # untimed: planning, algorithm search, capture
    results = []
    for seed in range(args.seeds):
        seconds, accuracy = run(seed, setup, train, test, args)
        results.append((seconds, accuracy))
        print(f"seed {seed}: test accuracy {100 * accuracy:.2f}% in {seconds:.2f} s", flush=True)
    accuracies = np.array([a for _, a in results])
    seconds = float(np.median([s for s, _ in results]))
    print(f"mean test accuracy {100 * accuracies.mean():.2f}% (std {100 * accuracies.std():.2f}) over "
          f"{len(results)} seed(s); median time {seconds:.2f} s")
    reached = accuracies.mean() >= args.target
    print(f"{'reached' if reached else 'did not reach'} {100 * args.target:.1f}%")
    if not reached:
        raise SystemExit(1)
    return {"accuracies": accuracies.tolist(), "seconds": seconds}


if __name__ == "__main__":
    main()
