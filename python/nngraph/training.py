"""The training loop (the one loop that lives in Python) and evaluation."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable

import numpy as np

from nngraph._core import ArrayDataSource, Graph, InvalidInputError


def as_images(x, what: str):
    """Images as the engine reads them, converted once: float64 (numpy's default), other byte
    orders and nested lists become float32; float32 and float16 arrays pass unchanged."""
    if x is None:
        raise InvalidInputError(f"[{what}] no images given")
    a = np.asarray(x) if not isinstance(x, np.ndarray) else x
    if a.dtype.kind == "f" and (a.dtype.itemsize not in (2, 4) or not a.dtype.isnative):
        return a.astype(np.float32)
    if a.dtype == object or (a.dtype.kind in "iub" and not isinstance(x, np.ndarray)):
        return np.asarray(x, np.float32)  # nested lists of numbers
    return a


def _data(pair, what: str):
    """(images, labels) checked to match in count; labels as an array."""
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise InvalidInputError(f"[{what}] expected (images, labels)")
    x, y = pair
    if y is None:
        raise InvalidInputError(f"[{what}] no labels given: pass (images, labels)")
    x = as_images(x, what)
    y = np.asarray(y)
    if y.ndim == 0 or len(x) != len(y):
        raise InvalidInputError(f"[{what}] {len(x)} images but {y.size if y.ndim == 0 else len(y)} labels")
    return x, y


def _correct(predictions: np.ndarray, labels: np.ndarray) -> int:
    """Correct classifications in a batch: argmax over channels against class indices."""
    guess = predictions.reshape(predictions.shape[0], predictions.shape[1], -1).argmax(axis=1)
    labels = np.asarray(labels)
    if labels.ndim > 1 and labels.dtype.kind == "f":  # one-hot rows
        labels = labels.reshape(labels.shape[0], labels.shape[1], -1).argmax(axis=1)
    return int((guess == labels.reshape(guess.shape)).sum())


def drain(handles) -> None:
    """Waits for encodes still in flight, so that nothing runs on once an error is raised."""
    for handle in handles:
        try:
            handle.wait()
        except Exception:  # noqa: S110  (the error being raised already is the one to report)
            pass


def evaluate(graph: Graph, images, labels, batch_size: int = 256) -> dict:
    """Loss and classification accuracy of `graph` over a data set, with double-buffered
    encodes: {"loss": mean loss, "accuracy": fraction correct}.

    A training graph is evaluated through its evaluation() graph: forward nodes in inference
    mode (no dropout), the loss computed, nothing trained. An inference graph has no loss, so
    "loss" is None."""
    images, labels = _data((images, labels), "evaluate")
    if batch_size < 1:
        raise InvalidInputError(f"[evaluate] batch_size must be >= 1, got {batch_size}")
    if graph.is_training:
        graph = graph.evaluation()
    with_loss = bool(graph.loss_labels)
    correct, loss, pending = 0, 0.0, []

    def finish(start, handle):
        nonlocal correct, loss
        batch = labels[start:start + batch_size]
        correct += _correct(handle.result(), batch)
        if with_loss:
            loss += handle.loss() * len(batch)

    try:
        for start in range(0, len(images), batch_size):
            batch_labels = labels[start:start + batch_size] if with_loss else None
            pending.append((start, graph.encode(images[start:start + batch_size], labels=batch_labels)))
            if len(pending) >= graph.max_in_flight:
                finish(*pending.pop(0))
        while pending:
            finish(*pending.pop(0))
    except BaseException:
        drain(h for _, h in pending)
        raise
    n = max(1, len(images))
    return {"loss": loss / n if with_loss else None, "accuracy": correct / n}


def fit(graph: Graph, train: tuple, epochs: int = 1, batch_size: int = 64, shuffle: bool = True,
        validation: tuple | None = None, stop_at_accuracy: float | None = None,
        callbacks: Iterable[Callable[[int, dict], object]] = (),
        batch_callbacks: Iterable[Callable[[int, dict], object]] = (),
        lr_schedule: Callable[[int], float] | None = None, progress: bool = True, seed: int = 0,
        test: tuple | None = None) -> dict:
    """Trains `graph` (from Loss.training_graph) on train = (images, labels).

    - Up to graph.max_in_flight batches are encoded ahead while Python prepares the next one;
      images are converted to float32 once (float64 is numpy's default).
    - lr_schedule(step) sets the learning rate of the graph's optimizers before each step
      (steps count from 0 over all epochs); see nngraph.schedules.
    - batch_callbacks get (step, {"loss", "learning_rate", "epoch"}) after each step;
      callbacks get (epoch, logs) after each epoch. Any returning True stops training.
    - validation = (images, labels) is evaluated after each epoch (loss and accuracy, no
      dropout); stop_at_accuracy stops once its accuracy reaches that value. `test` is the
      older name of `validation`.
    - progress: a bar redrawn in place on a terminal; elsewhere (a log file) one line per epoch.

    Returns the history, one entry per epoch: loss, accuracy, val_loss, val_accuracy,
    learning_rate (at the epoch's last step) and seconds. If an exception escapes (Ctrl-C, a
    raising callback), the steps already encoded finish before it is re-raised, so the weights
    are those of whole steps."""
    if not graph.is_training:
        raise InvalidInputError("[fit] needs a training graph: loss.training_graph(...)")
    if test is not None and validation is not None:
        raise InvalidInputError("[fit] give validation= (or its older name test=), not both")
    validation = validation if validation is not None else test
    x, y = _data(train, "fit")
    if validation is not None:
        validation = _data(validation, "fit validation")
    if batch_size < 1 or epochs < 0:
        raise InvalidInputError(f"[fit] batch_size must be >= 1 and epochs >= 0, got {batch_size} and {epochs}")
    optimizers = _optimizers(graph)
    if lr_schedule is not None and not optimizers:
        raise InvalidInputError("[fit] lr_schedule needs an optimizer: the graph's data sources have none")
    rng = np.random.default_rng(seed)
    evaluation = graph.evaluation() if validation is not None else None
    keys = ("loss", "accuracy", "val_loss", "val_accuracy", "learning_rate", "seconds")
    history = {k: [] for k in keys}
    step, callbacks, batch_callbacks = 0, list(callbacks), list(batch_callbacks)
    for epoch in range(epochs):
        t0 = time.perf_counter()
        order = rng.permutation(len(x)) if shuffle else np.arange(len(x))
        totals = _Totals(_progress(len(x), epoch, epochs) if progress and sys.stderr.isatty() else None)
        pending, stop = [], False
        lr = optimizers[0].learning_rate if optimizers else None

        def finish(idx, handle, at_step, at_lr, totals=totals, epoch=epoch):
            totals.add(idx, handle, y)
            logs = {"loss": handle.loss(), "learning_rate": at_lr, "epoch": epoch}
            answers = [cb(at_step, logs) for cb in batch_callbacks]  # every callback runs, then any may stop
            return any(a is True for a in answers)

        try:
            for start in range(0, len(x), batch_size):
                if stop:
                    break
                idx = order[start:start + batch_size]
                if lr_schedule is not None:
                    lr = float(lr_schedule(step))
                    for opt in optimizers:
                        opt.learning_rate = lr
                pending.append((idx, graph.encode(x[idx], labels=y[idx]), step, lr))
                step += 1
                if len(pending) >= graph.max_in_flight:  # read the oldest while the newest runs
                    stop = finish(*pending.pop(0)) or stop
            while pending:
                stop = finish(*pending.pop(0)) or stop
        except BaseException:
            drain(entry[1] for entry in pending)
            totals.close()
            raise
        totals.close()
        logs = {"loss": totals.loss / max(1, totals.seen), "accuracy": totals.correct / max(1, totals.seen)}
        if evaluation is not None:
            result = evaluate(evaluation, *validation)
            logs["val_loss"], logs["val_accuracy"] = result["loss"], result["accuracy"]
        logs["learning_rate"] = lr
        logs["seconds"] = time.perf_counter() - t0
        for key in keys:
            history[key].append(logs.get(key))
        if progress and not sys.stderr.isatty():
            print(_epoch_line(epoch, epochs, logs), file=sys.stderr, flush=True)
        answers = [cb(epoch, logs) for cb in callbacks]  # every callback runs, then any may stop
        stop = stop or any(a is True for a in answers)
        if stop or (stop_at_accuracy is not None and (logs.get("val_accuracy") or 0.0) >= stop_at_accuracy):
            break
    return history


def _optimizers(graph: Graph) -> list:
    """The distinct optimizers of the graph's ArrayDataSources."""
    out = []
    for ds in graph.data_sources:
        opt = ds.optimizer if isinstance(ds, ArrayDataSource) else None
        if opt is not None and all(opt is not o for o in out):
            out.append(opt)
    return out


def _epoch_line(epoch: int, epochs: int, logs: dict) -> str:
    parts = [f"loss {logs['loss']:.4f}", f"accuracy {logs['accuracy']:.4f}"]
    if logs.get("val_loss") is not None:
        parts.append(f"val_loss {logs['val_loss']:.4f}")
    if logs.get("val_accuracy") is not None:
        parts.append(f"val_accuracy {logs['val_accuracy']:.4f}")
    if logs.get("learning_rate") is not None:
        parts.append(f"lr {logs['learning_rate']:.3g}")
    return f"epoch {epoch + 1}/{epochs}: " + ", ".join(parts) + f", {logs['seconds']:.1f} s"


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
            self.bar = None


def _progress(total: int, epoch: int, epochs: int):
    from tqdm import tqdm
    return tqdm(total=total, desc=f"epoch {epoch + 1}/{epochs}", unit="img", leave=False)
