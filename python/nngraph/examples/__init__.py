"""Runnable examples: python -m nngraph.examples.<name>."""

import sys


def finish(history: dict, target: float, seconds: float, decimals: int = 1) -> dict:
    """Prints whether the last test accuracy reached `target`, exits with status 1 if not, and
    returns the run's summary."""
    accuracy = history["val_accuracy"][-1]
    reached = accuracy >= target
    print(f"{'reached' if reached else 'did not reach'} {100 * target:.{decimals}f}%: test accuracy "
          f"{100 * accuracy:.{decimals + 1}f}% after {len(history['loss'])} epoch(s), {seconds:.1f} s of training")
    if not reached:
        sys.exit(1)
    return {"accuracy": accuracy, "seconds": seconds, "history": history}
