"""Labels enter a training graph as states: LossDataDescriptor and LossLabels (MPS names), or
plain arrays of class indices, one-hot rows or regression targets."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class LossDataDescriptor:
    """Label data for one batch: `data` in `layout` (NCHW or NHWC), one image of `size`
    (C, H, W) per batch entry."""

    data: np.ndarray
    layout: str = "NCHW"
    size: tuple[int, int, int] | None = None


class LossLabels:
    """Labels (and optional per-image weights) for one encode. Once the encode completes,
    `losses` holds each image's loss value."""

    def __init__(self, labels, weights=None):
        self.labels = labels
        self.weights = weights
        self._handle = None
        self._index = 0

    def _attach(self, handle, index):
        self._handle, self._index = handle, index

    @property
    def losses(self) -> np.ndarray | None:
        """Per-image loss values; waits for the encode that used these labels."""
        return None if self._handle is None else self._handle.losses(self._index)


def _label_array(labels, n: int, shape: tuple[int, int, int], name: str) -> np.ndarray:
    c, h, w = shape
    if isinstance(labels, LossDataDescriptor):
        data = np.asarray(labels.data)
        if labels.layout not in ("NCHW", "NHWC"):
            raise ValueError(f"[{name}] layout must be NCHW or NHWC, got {labels.layout!r}")
        if labels.size is not None and tuple(labels.size) != (c, h, w):
            raise ValueError(f"[{name}] label size {tuple(labels.size)} does not match the loss source {shape}")
        if labels.layout == "NHWC" and data.ndim == 4:
            data = data.transpose(0, 3, 1, 2)
        labels = data
    a = np.asarray(labels)
    if a.size and a.dtype.kind in "iub" and a.shape in ((n,), (n, h, w)):
        # Class indices, one per image (or per pixel): the engine makes them one-hot.
        if a.dtype.kind == "b":
            raise ValueError(f"[{name}] boolean labels are ambiguous: give class indices or float targets")
        return a
    if a.dtype.kind not in "fiu":
        raise ValueError(f"[{name}] labels must be class indices or float arrays, got {a.dtype}")
    if a.shape[:1] != (n,):
        raise ValueError(f"[{name}] labels hold {a.shape[0] if a.ndim else 0} entries but the batch has {n} images")
    if a.size != n * c * h * w and a.dtype.kind == "f" and a.shape in ((n,), (n, h, w)):
        raise ValueError(f"[{name}] class indices must be integers, got {a.dtype} (convert with .astype(int))")
    if a.size != n * c * h * w:
        raise ValueError(f"[{name}] labels must have shape ({n},) of class indices or ({n}, {c}, {h}, {w}), "
                         f"got {a.shape}")
    return np.ascontiguousarray(a, dtype=np.float32).reshape(n, c, h, w)


def _marshal_labels(labels, n: int, shape: tuple[int, int, int], name: str):
    """(labels: float32 (N, C, H, W) or integer class indices (N,) or (N, H, W); weights: float32
    (N, 1, 1, 1) or None, all 1) for one loss node."""
    weights = None
    if isinstance(labels, LossLabels):
        labels, weights = labels.labels, labels.weights
    array = _label_array(labels, n, shape, name)
    if weights is None:
        return array, None
    w = np.asarray(weights, np.float32)
    if w.shape != (n,):
        raise ValueError(f"[{name}] label weights must have shape ({n},), got {w.shape}")
    return array, w.reshape(n, 1, 1, 1)
