"""The training loop (the one loop that lives in Python) and evaluation."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from nngraph._core import ArrayDataSource, DeviceDataset, Graph, InvalidInputError

# Test-time augmentations: (flip, (dy, dx), weight) per view, the plain view first. "flip_shift"
# is airbench's: half the mirrored pair, half the same pair shifted one pixel either way.
TTA_VIEWS = {
    "flip": ((False, (0, 0), 0.5), (True, (0, 0), 0.5)),
    "flip_shift": ((False, (0, 0), 0.25), (True, (0, 0), 0.25), (False, (-1, -1), 0.125), (True, (-1, 1), 0.125),
                   (False, (1, 1), 0.125), (True, (1, -1), 0.125)),
}


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


def _per_loss(graph: Graph, labels):
    """A graph with several loss nodes (an auxiliary classifier's beside the main one) takes the
    same labels for each."""
    n = len(graph.loss_labels)
    return [labels] * n if n > 1 and labels is not None else labels


def _scores(handle):
    """The main result of an encode: the first loss's source where there are several."""
    result = handle.result()
    return result[0] if isinstance(result, list) else result


def _loss(handle, graph: Graph) -> float:
    """The step's loss: the sum of its loss nodes' (each weighted as its descriptor says)."""
    return sum(handle.loss(i) for i in range(len(graph.loss_labels)))


def drain(handles) -> None:
    """Waits for encodes still in flight, so that nothing runs on once an error is raised."""
    for handle in handles:
        try:
            handle.wait()
        except Exception:  # noqa: S110  (the error being raised already is the one to report)
            pass


def evaluate(graph: Graph, images, labels=None, batch_size: int = 256, tta: str | None = None) -> dict:
    """Loss and classification accuracy of `graph` over a data set, with double-buffered
    encodes: {"loss": mean loss, "accuracy": fraction correct}.

    images, labels: arrays, or a DeviceDataset in place of both (its images unaugmented, in
    order). A training graph is evaluated through its evaluation() graph: forward nodes in
    inference mode (no dropout), the loss computed, nothing trained. An inference graph has no
    loss, so "loss" is None.

    tta (test-time augmentation) classifies by the weighted mean of the results over views of
    each image, made on the device: "flip" (the image and its mirror), "flip_shift" (half that,
    half the same pair shifted one pixel up-left and down-right, reflected at the edges). The
    loss stays the plain view's."""
    if isinstance(images, DeviceDataset):
        if labels is not None:
            raise InvalidInputError("[evaluate] a DeviceDataset holds its labels: pass labels=None")
        data = images
    else:
        images, labels = _data((images, labels), "evaluate")
        data = None
    if batch_size < 1:
        raise InvalidInputError(f"[evaluate] batch_size must be >= 1, got {batch_size}")
    if tta is not None and tta not in TTA_VIEWS:
        raise InvalidInputError(f"[evaluate] tta must be None or one of {sorted(TTA_VIEWS)}, got {tta!r}")
    if graph.is_training:
        graph = graph.evaluation()
    if data is not None:
        labels = data.labels
    elif tta is not None:  # the views are made on the device; the labels stay these
        data = DeviceDataset(images, labels, graph.device)
    views = TTA_VIEWS[tta] if tta is not None else ((False, (0, 0), 1.0),)
    with_loss = bool(graph.loss_labels)
    correct, loss, pending, sums = 0, 0.0, [], {}
    count = len(data) if data is not None else len(images)

    def finish(start, view, handle):
        nonlocal correct, loss
        batch = labels[start:start + batch_size]
        if view == 0 and with_loss:
            loss += _loss(handle, graph) * len(batch)
        weighted = _scores(handle) * views[view][2]
        sums[start] = weighted if view == 0 else sums[start] + weighted
        if view == len(views) - 1:
            correct += _correct(sums.pop(start), batch)

    try:
        for start in range(0, count, batch_size):
            batch_labels = labels[start:start + batch_size] if with_loss else None
            for view, (flip, shift, _) in enumerate(views):
                if data is None:
                    x = images[start:start + batch_size]
                else:
                    x = data.view(start, min(batch_size, count - start), flip=flip, shift=shift)
                pending.append((start, view, graph.encode(x, labels=_per_loss(graph, batch_labels))))
                if len(pending) >= graph.max_in_flight:
                    finish(*pending.pop(0))
        while pending:
            finish(*pending.pop(0))
    except BaseException:
        drain(h for _, _, h in pending)
        raise
    n = max(1, count)
    return {"loss": loss / n if with_loss else None, "accuracy": correct / n}


def fit(graph: Graph, train: tuple, epochs: int = 1, batch_size: int = 64, shuffle: bool = True,
        validation: tuple | None = None, stop_at_accuracy: float | None = None,
        callbacks: Iterable[Callable[[int, dict], object]] = (),
        batch_callbacks: Iterable[Callable[[int, dict], object]] = (),
        lr_schedule: Callable[[int], float | dict] | None = None, progress: bool = True, seed: int = 0,
        test: tuple | None = None, drop_last: bool = False) -> dict:
    """Trains `graph` (from Loss.training_graph) on train = (images, labels), or on a
    DeviceDataset, whose batches are gathered, shuffled (in its own seed's order) and augmented
    on the device, so no image crosses the host.

    - Up to graph.max_in_flight batches are encoded ahead while Python prepares the next one;
      images are converted to float32 once (float64 is numpy's default).
    - lr_schedule(step) sets the learning rate of the graph's optimizers before each step is
      encoded (steps count from 0 over all epochs); see nngraph.schedules. It returns one rate
      for every optimizer, or {optimizer: rate} for optimizers with rates of their own (the
      first one's is logged).
    - batch_callbacks get (step, {"loss", "learning_rate", "epoch"}) after each step;
      callbacks get (epoch, logs) after each epoch. Any returning True stops training.
    - validation = (images, labels) or a DeviceDataset is evaluated after each epoch (loss and
      accuracy, no dropout); stop_at_accuracy stops once its accuracy reaches that value.
      `test` is the older name of `validation`.
    - drop_last leaves out each epoch's last batch where it is smaller than batch_size.
    - A graph of several losses (Graph.training([loss, aux_loss])) gets the same labels for
      each; its loss is their weighted sum, its accuracy the first loss's source's.
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
    if isinstance(train, DeviceDataset):
        on_device, x, y = train, None, train.labels
    else:
        on_device, (x, y) = None, _data(train, "fit")
    if validation is not None and not isinstance(validation, DeviceDataset):
        validation = _data(validation, "fit validation")
    elif validation is not None:
        validation = (validation, None)
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
    count = len(y)
    last = count - count % batch_size if drop_last else count
    for epoch in range(epochs):
        t0 = time.perf_counter()
        if on_device is not None:
            order = on_device.order(epoch, shuffle)
        else:
            order = rng.permutation(count) if shuffle else np.arange(count)
        totals = _Totals(_progress(last, epoch, epochs) if progress and sys.stderr.isatty() else None)
        pending, stop = [], False
        lr = optimizers[0].learning_rate if optimizers else None

        def finish(idx, handle, at_step, at_lr, totals=totals, epoch=epoch):
            loss = _loss(handle, graph)
            totals.add(idx, handle, y, loss)
            logs = {"loss": loss, "learning_rate": at_lr, "epoch": epoch}
            answers = [cb(at_step, logs) for cb in batch_callbacks]  # every callback runs, then any may stop
            return any(a is True for a in answers)

        try:
            for start in range(0, last, batch_size):
                if stop:
                    break
                idx = order[start:start + batch_size]
                if lr_schedule is not None:
                    lr = _set_rates(lr_schedule(step), optimizers)
                if on_device is not None:
                    images, labels = on_device.batch(epoch, start, len(idx), shuffle)
                else:
                    images, labels = x[idx], y[idx]
                pending.append((idx, graph.encode(images, labels=_per_loss(graph, labels)), step, lr))
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


def _set_rates(rates, optimizers: list) -> float:
    """Sets a schedule's rate(s) (one for all, or {optimizer: rate}), all or none: every rate is
    checked before any is set. Returns the one logged."""
    rates = {opt: float(lr) for opt, lr in rates.items()} if isinstance(rates, dict) else \
        dict.fromkeys(optimizers, float(rates))
    for opt, lr in rates.items():
        if all(opt is not o for o in optimizers):
            raise InvalidInputError("[fit] lr_schedule set the rate of an optimizer that trains none of the graph's "
                                    "data sources")
        if not (np.isfinite(lr) and lr >= 0):
            raise InvalidInputError(f"[fit] lr_schedule returned the rate {lr}: rates must be finite and >= 0")
    for opt, lr in rates.items():
        opt.learning_rate = lr
    return rates[optimizers[0]] if optimizers[0] in rates else next(iter(rates.values()))


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

    def add(self, idx, handle, labels, loss: float):
        predictions = _scores(handle)
        self.loss += loss * len(idx)
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


@contextlib.contextmanager
def averaged_weights(sources) -> Iterator[list]:
    """Within the block, the trained tensors of every data source whose optimizer keeps an
    exponential moving average of them (ema_decay > 0) hold that average; after it, their
    values again (ArrayDataSource.swap_average, twice). sources: a Graph (its data sources), a
    dict of sources (a model's .sources) or an iterable of them. Yields the sources swapped;
    raises InvalidInputError where none keeps an average.

        with ng.averaged_weights(model.sources):
            ng.evaluate(evaluation_graph, test)
    """
    if isinstance(sources, Graph):
        sources = sources.data_sources
    elif isinstance(sources, dict):
        sources = sources.values()
    averaged = [ds for ds in sources if isinstance(ds, ArrayDataSource) and ds.optimizer is not None
                and getattr(ds.optimizer, "ema_decay", 0.0) > 0.0]
    if not averaged:
        raise InvalidInputError("[averaged_weights] no data source's optimizer keeps an average of the weights "
                                "(give the optimizer ema_decay > 0)")
    swapped = []
    try:
        for ds in averaged:
            ds.swap_average()
            swapped.append(ds)
        yield swapped
    finally:
        for ds in reversed(swapped):
            ds.swap_average()
