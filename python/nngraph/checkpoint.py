"""Checkpoints: the tensors (weights and biases; gamma, beta, mean and variance; ...) and
optimizer state of a graph's ArrayDataSources in one safetensors file, written atomically and
read all or nothing. The .npz checkpoints of earlier versions are still read."""

from __future__ import annotations

import json
import os

import numpy as np
import safetensors
import safetensors.numpy

from nngraph._core import ArrayDataSource, Graph, InvalidInputError
from nngraph._files import write_atomically

CHECKPOINT_FORMAT = "nngraph-checkpoint"
_RESERVED = ("format", "version", "sources")


def array_sources(target) -> list[ArrayDataSource]:
    """The ArrayDataSources of a graph (or of a list), checked to have distinct labels."""
    sources = target.data_sources if isinstance(target, Graph) else list(target)
    out = [s for s in sources if isinstance(s, ArrayDataSource)]
    labels = [s.label() for s in out]
    if len(set(labels)) != len(labels) or "" in labels:
        raise InvalidInputError(f"[checkpoint] data sources need distinct, non-empty labels, got {labels}: "
                                "name them with ArrayDataSource(..., label=...)")
    return out


def save(path: str | os.PathLike, target, metadata: dict | None = None) -> None:
    """Writes the tensors and optimizer state of a graph's (or a list of) ArrayDataSources to
    one safetensors file, atomically: a temporary file in the same folder, then a rename. Each
    tensor is stored as "label/name" (a convolution's "conv1/weights", "conv1/biases"), the
    optimizer state as "label/slot0", ...; `metadata` ({str: str}: an accuracy, a date) goes
    into the file's header, and load() returns it."""
    path = os.fspath(path)
    if path.endswith(".npz"):
        raise InvalidInputError(f"[checkpoint] {path}: checkpoints are safetensors files now; name it .safetensors "
                                "(load still reads .npz checkpoints)")
    user = {str(k): str(v) for k, v in (metadata or {}).items()}
    clash = [k for k in user if k in _RESERVED]
    if clash:
        raise InvalidInputError(f"[checkpoint] metadata keys {clash} are the file's own; use others")
    arrays, table = {}, {}
    for ds in array_sources(target):
        label = ds.label()
        held = {name: a for name, a in ds.tensors().items() if a is not None}
        for name, a in held.items():
            arrays[f"{label}/{name}"] = np.ascontiguousarray(a, np.float32)
        state = ds.optimizer_state() if ds.optimizer is not None else {"step": 0, "slots": []}
        for i, slot in enumerate(state["slots"]):
            arrays[f"{label}/slot{i}"] = np.ascontiguousarray(slot, np.float32)
        table[label] = {"step": state["step"], "slots": len(state["slots"]), "tensors": list(held)}
    header = {"format": CHECKPOINT_FORMAT, "version": "2", "sources": json.dumps(table), **user}
    write_atomically(path, safetensors.numpy.save(arrays, metadata=header))


def load(path: str | os.PathLike, target) -> dict:
    """Restores what save() wrote into a graph's (or a list of) ArrayDataSources and returns the
    metadata saved with it ({} for .npz checkpoints).

    Every value is checked (present, shapes, float dtype, finite, optimizer state that fits
    each source's optimizer) before anything changes, and a failure while writing puts back
    what was written: the sources end either all restored or all as they were. Any malformed
    file raises InvalidInputError. Optimizer state is restored where the source has an
    optimizer; an untrained checkpoint (step 0, no state) resets it. A graph given as target
    re-reads its data sources."""
    data, sources, user = _read(os.fspath(path))
    plans = [_plan(ds, sources, data, path) for ds in array_sources(target)]
    done = []
    try:
        for plan in plans:
            done.append(_current(plan[0]))
            _apply(*plan)
        if isinstance(target, Graph):
            target.reload_from_data_sources()
    except BaseException:
        for saved in reversed(done):
            _apply(*saved)
        raise
    return user


def _read(path: str) -> tuple[dict, dict, dict]:
    """(arrays by name, the table of sources, the user's metadata) of a checkpoint file."""
    with open(path, "rb") as f:
        zipped = f.read(2) == b"PK"
    try:
        if zipped:  # an .npz checkpoint of an earlier version
            with np.load(path, allow_pickle=False) as f:
                data = {k: f[k] for k in f.files}
            meta, user = json.loads(bytes(data.pop("__nngraph__")).decode()), {}
        else:
            with safetensors.safe_open(path, framework="np") as f:
                header = f.metadata() or {}
                data = {k: f.get_tensor(k) for k in f.keys()}
            meta = {"format": header.get("format"), "sources": json.loads(header.get("sources", "null"))}
            user = {k: v for k, v in header.items() if k not in _RESERVED}
        if not isinstance(meta, dict) or meta.get("format") != CHECKPOINT_FORMAT:
            raise ValueError("wrong format tag")
        if not isinstance(meta.get("sources"), dict):
            raise ValueError("no table of data sources")
    except Exception as e:  # a truncated, foreign or mutated file, whatever the reader raised
        raise InvalidInputError(f"[checkpoint] {path} is not a readable nngraph checkpoint ({e})") from None
    return data, meta["sources"], user


def _plan(ds: ArrayDataSource, sources: dict, data: dict, path) -> tuple:
    """(source, {tensor name: array}, optimizer state or None) from the file, checked against ds."""
    label = ds.label()

    def bad(what: str):
        return InvalidInputError(f"[checkpoint] {path}: '{label}' {what}")

    entry = sources.get(label)
    if entry is None:
        raise InvalidInputError(f"[checkpoint] {path} has no data source '{label}'")
    if not isinstance(entry, dict) or not all(isinstance(entry.get(k), int) for k in ("step", "slots")):
        raise bad("has a malformed entry (step and slots must be integers)")

    def array(name: str, shape) -> np.ndarray:
        key = f"{label}/{name}"
        if key not in data:
            raise bad(f"{name} are missing")
        a = data[key]
        if a.dtype.kind != "f":
            raise bad(f"{name} hold {a.dtype}, expected floats")
        if _without_trailing_ones(a.shape) != _without_trailing_ones(shape):
            raise bad(f"{name} are {a.shape}, the data source has {shape}")
        if not np.isfinite(a).all():
            raise bad(f"{name} hold NaN or inf")
        return a.astype(np.float32).reshape(shape)  # files from before matrix descriptors: (O, I, 1, 1)

    tensors, held = {}, ds.tensors()
    for spec in ds.descriptor().tensors:
        name, now = spec.name, held[spec.name]
        if spec.optional and (f"{label}/{name}" in data) != (now is not None):
            raise bad(f"{name} do not match the data source (one has them, the other not)")
        if now is not None:
            tensors[name] = array(name, now.shape)
    state = None
    if ds.optimizer is not None:
        step, count = entry["step"], entry["slots"]
        if count < 0 or count > 64:
            raise bad(f"has {count} optimizer state vectors")
        slots = [data[f"{label}/slot{i}"] if f"{label}/slot{i}" in data else None for i in range(count)]
        if any(s is None for s in slots):
            raise bad("is missing optimizer state vectors")
        if count == 0 and step == 0:  # saved untrained: the optimizer starts afresh
            slots = _fresh_slots(ds)
        state = {"step": step, "slots": slots}
        ds.check_optimizer_state(state)
    return ds, tensors, state


def _without_trailing_ones(shape) -> tuple:
    shape = tuple(shape)
    while len(shape) > 1 and shape[-1] == 1:
        shape = shape[:-1]
    return shape


def _fresh_slots(ds: ArrayDataSource) -> list[np.ndarray]:
    """Zero optimizer state: slot_count() vectors per trained tensor the source holds."""
    k = ds.optimizer.slot_count()
    held = ds.tensors()
    return [np.zeros(held[t.name].size, np.float32)
            for t in ds.descriptor().tensors if t.trained and held[t.name] is not None for _ in range(k)]


def _current(ds: ArrayDataSource) -> tuple:
    state = ds.optimizer_state() if ds.optimizer is not None else None
    if state is not None and not state["slots"] and ds.optimizer.slot_count():
        state = {"step": state["step"], "slots": _fresh_slots(ds)}  # no update yet: fresh state
    return ds, {name: a for name, a in ds.tensors().items() if a is not None}, state


def _apply(ds: ArrayDataSource, tensors: dict, state) -> None:
    ds.set_tensors(tensors)
    if state is not None:
        ds.load_optimizer_state(state)
