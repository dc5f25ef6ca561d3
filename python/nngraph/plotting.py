"""Training curves as a picture (matplotlib, an optional dependency: pip install nngraph[plot])."""

from __future__ import annotations

import os


def plot_history(history: dict, path: str | os.PathLike) -> None:
    """Draws fit()'s history to an image file (PNG, SVG or PDF by its suffix): loss and
    val_loss per epoch on the left, accuracy and val_accuracy on the right."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError("plot_history needs matplotlib: pip install matplotlib") from e
    epochs = range(1, len(history.get("loss", [])) + 1)
    if not len(epochs):
        raise ValueError("[plot_history] the history holds no epoch")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, name in zip(axes, ("loss", "accuracy")):
        for key, label in ((name, "training"), (f"val_{name}", "validation")):
            values = history.get(key) or []
            if any(v is not None for v in values):
                ax.plot(epochs, [float("nan") if v is None else v for v in values], marker="o", label=label)
        ax.set_xlabel("epoch")
        ax.set_title(name)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.fspath(path))
    plt.close(fig)
