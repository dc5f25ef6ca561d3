"""Runnable examples: python -m nngraph.examples.<name>."""

import sys


def add_fit_arguments(parser) -> None:
    """Adds the options every fit-based example takes: --checkpoint, --seed and --quiet."""
    parser.add_argument("--checkpoint", help="save the trained weights and optimizer state here (.safetensors)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bar on a terminal")


def show_progress(args) -> bool:
    """Whether fit draws its progress bar: on a terminal, unless --quiet."""
    return not args.quiet and sys.stderr.isatty()


def print_epoch(epoch: int, logs: dict) -> None:
    """A fit callback: one line per epoch with the loss, train and test accuracy and seconds."""
    print(f"epoch {epoch + 1}: loss {logs['loss']:.4f}, train accuracy {100 * logs['accuracy']:.2f}%, "
          f"test accuracy {100 * logs['val_accuracy']:.2f}%, {logs['seconds']:.1f} s", flush=True)


def finish(history: dict, target: float, seconds: float, decimals: int = 1, graph=None, checkpoint=None) -> dict:
    """Saves the graph's weights and optimizer state to `checkpoint` (if given), prints whether
    the last test accuracy reached `target`, exits with status 1 if not, and returns the run's
    summary."""
    if checkpoint:
        from nngraph.checkpoint import save
        save(checkpoint, graph)
        print(f"saved {checkpoint}")
    accuracy = history["val_accuracy"][-1]
    reached = accuracy >= target
    print(f"{'reached' if reached else 'did not reach'} {100 * target:.{decimals}f}%: test accuracy "
          f"{100 * accuracy:.{decimals + 1}f}% after {len(history['loss'])} epoch(s), {seconds:.1f} s of training")
    if not reached:
        sys.exit(1)
    return {"accuracy": accuracy, "seconds": seconds, "history": history}
