"""The training loop (the one loop that lives in Python), evaluation and checkpoints."""

from __future__ import annotations

import json
import os
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable

import numpy as np

from nngraph._core import ArrayDataSource, Graph, InvalidInputError

CHECKPOINT_FORMAT = "nngraph-checkpoint"


def _batches(n: int, batch_size: int, order: np.ndarray):
    for start in range(0, n, batch_size):
        yield order[start:start + batch_size]


def _correct(predictions: np.ndarray, labels: np.ndarray) -> int:
    """Correct classifications in a batch: argmax over channels against class indices."""
    guess = predictions.reshape(predictions.shape[0], predictions.shape[1], -1).argmax(axis=1)
    labels = np.asarray(labels)
    if labels.ndim > 1 and labels.dtype.kind == "f":  # one-hot rows
        labels = labels.reshape(labels.shape[0], labels.shape[1], -1).argmax(axis=1)
    return int((guess == labels.reshape(guess.shape)).sum())


def evaluate(graph: Graph, images: np.ndarray, labels: np.ndarray, batch_size: int = 256) -> dict:
    """Classification accuracy of `graph` (an inference graph, or a training graph's
    inference()) over a data set, with double-buffered encodes."""
    if graph.is_training:
        graph = graph.inference()
    correct, pending = 0, []
    for start in range(0, len(images), batch_size):
        pending.append((start, graph.encode(images[start:start + batch_size])))
        if len(pending) >= graph.max_in_flight:
            s, h = pending.pop(0)
            correct += _correct(h.result(), labels[s:s + batch_size])
    for s, h in pending:
        correct += _correct(h.result(), labels[s:s + batch_size])
    return {"accuracy": correct / max(1, len(images))}


def fit(graph: Graph, train: tuple[np.ndarray, np.ndarray], epochs: int = 1, batch_size: int = 64,
        shuffle: bool = True, test: tuple[np.ndarray, np.ndarray] | None = None,
        stop_at_accuracy: float | None = None, callbacks: Iterable[Callable[[int, dict], object]] = (),
        progress: bool = True, seed: int = 0) -> dict:
    """Trains `graph` (from Loss.training_graph) on (images, labels).

    Up to graph.max_in_flight batches are encoded ahead while Python prepares the next one.
    After each epoch the test set, if given, is evaluated through the inference graph, and
    each callback gets (epoch, logs); a callback returning True stops training, as does
    reaching `stop_at_accuracy` on the test set. Returns the history: per-epoch loss,
    accuracy, test_accuracy and seconds."""
    if not graph.is_training:
        raise InvalidInputError("[fit] needs a training graph: loss.training_graph(...)")
    x, y = train
    if len(x) != len(y):
        raise InvalidInputError(f"[fit] {len(x)} images but {len(y)} labels")
    if batch_size < 1 or epochs < 0:
        raise InvalidInputError("[fit] batch_size must be >= 1 and epochs >= 0")
    rng = np.random.default_rng(seed)
    inference = graph.inference() if test is not None else None
    history = {"loss": [], "accuracy": [], "test_accuracy": [], "seconds": []}
    for epoch in range(epochs):
        t0 = time.perf_counter()
        order = rng.permutation(len(x)) if shuffle else np.arange(len(x))
        totals = _Totals(_progress(len(x), epoch, epochs) if progress else None)
        pending = []
        for idx in _batches(len(x), batch_size, order):
            pending.append((idx, graph.encode(x[idx], labels=y[idx])))
            if len(pending) >= graph.max_in_flight:  # read the oldest while the newest runs
                totals.add(*pending.pop(0), y)
        for entry in pending:
            totals.add(*entry, y)
        totals.close()
        logs = {"loss": totals.loss / max(1, totals.seen), "accuracy": totals.correct / max(1, totals.seen)}
        if inference is not None:
            logs["test_accuracy"] = evaluate(inference, *test)["accuracy"]
        logs["seconds"] = time.perf_counter() - t0
        for key in history:
            history[key].append(logs.get(key))
        answers = [cb(epoch, logs) for cb in callbacks]  # every callback runs, then any may stop
        stop = any(a is True for a in answers)
        if stop or (stop_at_accuracy is not None and logs.get("test_accuracy", 0.0) >= stop_at_accuracy):
            break
    return history


class _Totals:
    """Running loss and accuracy of an epoch, shown on the progress bar."""

    def __init__(self, bar):
        self.bar, self.loss, self.correct, self.seen = bar, 0.0, 0, 0

    def add(self, idx, handle, labels):
        predictions = handle.result()
        self.loss += handle.loss() * len(idx)
        self.correct += _correct(predictions, labels[idx])
        self.seen += len(idx)
        if self.bar is not None:
            self.bar.update(len(idx))
            self.bar.set_postfix(loss=f"{self.loss / self.seen:.4f}", accuracy=f"{self.correct / self.seen:.4f}")

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _progress(total: int, epoch: int, epochs: int):
    from tqdm import tqdm
    return tqdm(total=total, desc=f"epoch {epoch + 1}/{epochs}", unit="img", leave=False)


def _array_sources(target) -> list[ArrayDataSource]:
    sources = target.data_sources if isinstance(target, Graph) else list(target)
    out = [s for s in sources if isinstance(s, ArrayDataSource)]
    labels = [s.label() for s in out]
    if len(set(labels)) != len(labels) or "" in labels:
        raise InvalidInputError(f"[checkpoint] data sources need distinct, non-empty labels, got {labels}")
    return out


def save(path: str | os.PathLike, target) -> None:
    """Writes the weights and optimizer state of a graph's (or a list of) ArrayDataSources to
    one .npz file, atomically: a temporary file in the same folder, then a rename."""
    arrays, meta = {}, {"format": CHECKPOINT_FORMAT, "version": 1, "sources": {}}
    for ds in _array_sources(target):
        label = ds.label()
        arrays[f"{label}/weights"] = ds.weights()
        biases = ds.biases()
        if biases is not None:
            arrays[f"{label}/biases"] = biases
        state = ds.optimizer_state() if ds.optimizer is not None else {"step": 0, "slots": []}
        for i, slot in enumerate(state["slots"]):
            arrays[f"{label}/slot{i}"] = slot
        meta["sources"][label] = {"step": state["step"], "slots": len(state["slots"]), "biases": biases is not None}
    arrays["__nngraph__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".nngraph-", suffix=".npz", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load(path: str | os.PathLike, target) -> None:
    """Restores what save() wrote into a graph's (or a list of) ArrayDataSources. Everything is
    checked before anything changes; a truncated or foreign file raises InvalidInputError.
    A graph given as target re-reads its data sources."""
    try:
        with np.load(os.fspath(path), allow_pickle=False) as f:
            data = {k: f[k] for k in f.files}
        meta = json.loads(bytes(data["__nngraph__"]).decode())
        if meta.get("format") != CHECKPOINT_FORMAT:
            raise ValueError("wrong format tag")
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as e:
        raise InvalidInputError(f"[checkpoint] {path} is not a readable nngraph checkpoint ({e})") from None
    plans = []
    for ds in _array_sources(target):
        label = ds.label()
        if label not in meta["sources"]:
            raise InvalidInputError(f"[checkpoint] {path} has no data source '{label}'")
        entry = meta["sources"][label]
        w = data[f"{label}/weights"]
        if w.shape != ds.weights().shape:
            raise InvalidInputError(f"[checkpoint] '{label}' weights are {w.shape}, the data source has "
                                    f"{ds.weights().shape}")
        b = data.get(f"{label}/biases")
        if (b is None) != (ds.biases() is None) or (b is not None and b.shape != ds.biases().shape):
            raise InvalidInputError(f"[checkpoint] '{label}' biases do not match the data source")
        slots = [data[f"{label}/slot{i}"] for i in range(entry["slots"])]
        plans.append((ds, w, b, {"step": entry["step"], "slots": slots}))
    for ds, w, b, state in plans:
        ds.set_weights(w, b)
        if ds.optimizer is not None and state["slots"]:
            ds.load_optimizer_state(state)
    if isinstance(target, Graph):
        target.reload_from_data_sources()
