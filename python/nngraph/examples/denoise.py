"""Trains a denoising autoencoder on real Fashion-MNIST: clean images from noisy ones.

The network (nngraph.models.denoising_autoencoder) is built from stride-2 convolutions, a
transpose convolution, nearest upsampling and instance normalization. Each training batch gets
fresh Gaussian noise (clipped to [0, 1]); the loss is the mean squared error against the clean
image; Adam under a cosine learning rate. Reports the test set's reconstruction error next to
the error of the noisy images themselves. bench/denoising_training.py trains the same network
with the same weights, batches and noise in PyTorch. Data: the IDX files of Debian's
dataset-fashion-mnist package, or a folder given with --data."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

import numpy as np

import nngraph as ng
from nngraph import schedules
from nngraph.datasets import load_fashion_mnist
from nngraph.models import denoising_autoencoder

# The recipe's defaults; bench/denoising_training.py trains PyTorch's twin with the same.
SIGMA, BATCH_SIZE, LEARNING_RATE, EPOCHS = 0.4, 128, 2e-3, 3


def noisy(images: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """images + N(0, sigma²) noise, clipped to [0, 1]."""
    return np.clip(images + sigma * rng.standard_normal(images.shape, dtype=np.float32), 0, 1)


def noisy_batches(images: np.ndarray, epochs: int, batch_size: int, sigma: float,
                  seed: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(noisy, clean) training batches: each epoch in a new order, each batch with new noise.
    Deterministic for a seed, so another framework can train on the very same batches."""
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        order = rng.permutation(len(images))
        for start in range(0, len(images), batch_size):
            clean = images[order[start:start + batch_size]]
            yield noisy(clean, sigma, rng), clean


def noisy_test_set(images: np.ndarray, sigma: float, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The test set with fixed noise: (noisy, clean)."""
    return noisy(images, sigma, np.random.default_rng(seed)), images


def reconstruction_error(graph: ng.Graph, noisy_images: np.ndarray, clean: np.ndarray) -> float:
    """Mean squared error of the graph's reconstructions of noisy_images against clean."""
    return float(np.mean((graph.predict(noisy_images, batch_size=500) - clean) ** 2))


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="folder with the four Fashion-MNIST IDX files (default: Debian's)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--epochs", type=int, default=EPOCHS)
    p.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    p.add_argument("--learning-rate", type=float, default=LEARNING_RATE)
    p.add_argument("--sigma", type=float, default=SIGMA, help="standard deviation of the noise")
    p.add_argument("--limit", type=int, help="train on the first N images only (a quick look)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    t0 = time.perf_counter()
    x_train, _, x_test, _ = load_fashion_mnist(args.data)
    if args.limit:
        x_train = x_train[:args.limit]
    noisy_test, clean_test = noisy_test_set(x_test, args.sigma)
    optimizer = ng.Adam(learning_rate=args.learning_rate)
    net = denoising_autoencoder(seed=args.seed, optimizer=optimizer)
    loss = ng.Loss(net.output, ng.LossDescriptor("mean_squared_error", "mean"))
    graph = loss.training_graph(device=args.device)
    print(f"Fashion-MNIST: {len(x_train)} training and {len(x_test)} test images, noise sigma {args.sigma}; "
          f"denoising autoencoder on {graph.device}")

    per_epoch = -(-len(x_train) // args.batch_size)
    schedule = schedules.cosine(args.learning_rate, args.epochs * per_epoch)
    inference = graph.inference()
    start = time.perf_counter()
    pending, total, history, evaluating = [], 0.0, [], 0.0
    for step, (x, y) in enumerate(noisy_batches(x_train, args.epochs, args.batch_size, args.sigma, args.seed)):
        optimizer.learning_rate = schedule(step)
        pending.append(graph.encode(x, labels=y))
        if len(pending) >= graph.max_in_flight:  # read the oldest while the newest runs
            total += pending.pop(0).loss()
        if (step + 1) % per_epoch == 0:
            while pending:
                total += pending.pop(0).loss()
            t = time.perf_counter()
            error = reconstruction_error(inference, noisy_test, clean_test)
            evaluating += time.perf_counter() - t
            history.append(error)
            print(f"epoch {len(history)}: training loss {total / per_epoch:.5f}, test reconstruction error "
                  f"{error:.5f}, {time.perf_counter() - start:.1f} s", flush=True)
            total = 0.0
    seconds = time.perf_counter() - start - evaluating
    baseline = float(np.mean((noisy_test - clean_test) ** 2))
    print(f"test reconstruction error {history[-1]:.5f} (the noisy images: {baseline:.5f}); "
          f"{seconds:.1f} s of training (evaluation excluded), wall time {time.perf_counter() - t0:.1f} s")
    return {"error": history[-1], "noisy_error": baseline, "history": history, "seconds": seconds}


if __name__ == "__main__":
    main()
