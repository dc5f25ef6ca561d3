"""A model store: a folder of named, versioned models (DeepLearningKit's store of pretrained
models), each the network with its weights as an ONNX file beside its metadata, and the models
already loaded kept resident on their devices, so that switching between them reloads nothing.

    store = ng.store.Store("models")
    store.put("digits", graph, classes=[str(d) for d in range(10)], accuracy=0.991)
    a = store.get("digits", device="cuda")       # loaded once; resident from then on
    b = store.get("fashion", device="cuda")      # another model resident on the same device
    store.get("digits", device="cuda") is a      # switching back: no file is read

Layout: <root>/<name>/v<version>/model.onnx and meta.json (inputs, outputs, classes,
accuracy, date, the model file's SHA-256 and any other metadata). Needs the onnx package."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from nngraph._core import Device, Graph, InvalidInputError
from nngraph._files import write_atomically

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class ModelInfo:
    """One stored version of a model: what its meta.json says."""

    name: str
    version: int
    path: Path  # its folder
    date: str  # ISO 8601, UTC, when it was put
    inputs: list  # [(name, ONNX shape with None for the batch), ...]
    outputs: list
    classes: list | None = None
    accuracy: float | None = None
    sha256: str = ""
    metadata: dict = field(default_factory=dict)


class Store:
    """Named, versioned models in the folder `root` (made if missing), loaded onto `device` by
    default; at most `capacity` graphs stay resident (None: no limit; the least recently used
    goes first)."""

    def __init__(self, root: str | os.PathLike, device="cpu", capacity: int | None = None):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.device = Device(device) if isinstance(device, str) else device
        self.capacity = capacity
        self._resident: OrderedDict = OrderedDict()  # (name, version, device) → Graph

    def put(self, name: str, model, *, classes=None, accuracy: float | None = None, metadata: dict | None = None,
            opset: int | None = None) -> int:
        """Stores a new version of model `name` and returns its number (1, 2, ...). `model` is a
        graph (a training graph's inference graph is stored), or an ONNX model (a path, its
        bytes or a ModelProto), which is checked to import first. Nothing is written unless all of
        it is: the version's folder appears whole or not at all."""
        import nngraph.onnx as ngx
        from nngraph.onnx._import import load_model
        _check_name(name)
        if isinstance(model, Graph):
            proto = ngx.save(model, opset=opset or ngx.DEFAULT_OPSET)
        else:
            proto = load_model(model)  # checked, malformed files raising InvalidInputError
            ngx.load(proto)  # raises where nngraph cannot run it
        data = proto.SerializeToString()
        info = {"name": name, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "inputs": _values(proto.graph.input, {i.name for i in proto.graph.initializer}),
                "outputs": _values(proto.graph.output, set()), "classes": None if classes is None else list(classes),
                "accuracy": None if accuracy is None else float(accuracy), "sha256": hashlib.sha256(data).hexdigest(),
                "metadata": dict(metadata or {})}
        folder = self.root / name
        folder.mkdir(exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".put-", dir=folder))
        try:
            (staging / "model.onnx").write_bytes(data)
            while True:  # the next free version; a concurrent put takes the one before
                version = max(self.versions(name), default=0) + 1
                info["version"] = version
                write_atomically(staging / "meta.json", json.dumps(info, indent=1).encode())
                try:
                    os.rename(staging, folder / f"v{version}")
                    return version
                except OSError:
                    if not (folder / f"v{version}").exists():
                        raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def versions(self, name: str) -> list[int]:
        """The stored versions of `name`, in order ([] where none)."""
        folder = self.root / name
        if not folder.is_dir():
            return []
        return sorted(int(p.name[1:]) for p in folder.iterdir() if re.fullmatch(r"v\d+", p.name)
                      and (p / "meta.json").is_file())

    def list(self) -> list[ModelInfo]:
        """Every stored version of every model, by name then version."""
        names = sorted(p.name for p in self.root.iterdir() if p.is_dir() and _NAME.fullmatch(p.name))
        return [self.info(n, v) for n in names for v in self.versions(n)]

    def info(self, name: str, version: int | None = None) -> ModelInfo:
        """The metadata of a stored version (None: the latest)."""
        _check_name(name)
        versions = self.versions(name)
        if version is None and versions:
            version = versions[-1]
        if version not in versions:
            raise InvalidInputError(f"[store] no model '{name}'" + (f" version {version}" if version else "") +
                                    f" in {self.root} (versions: {versions or 'none'})")
        path = self.root / name / f"v{version}"
        try:
            meta = json.loads((path / "meta.json").read_text())
            return ModelInfo(name=name, version=version, path=path, date=meta["date"],
                             inputs=[tuple(i) for i in meta["inputs"]], outputs=[tuple(o) for o in meta["outputs"]],
                             classes=meta.get("classes"), accuracy=meta.get("accuracy"), sha256=meta["sha256"],
                             metadata=meta.get("metadata", {}))
        except (ValueError, KeyError, TypeError) as e:
            raise InvalidInputError(f"[store] {path / 'meta.json'} is malformed ({e})") from None

    def get(self, name: str, version: int | None = None, device=None) -> Graph:
        """The model's inference graph on `device` (None: the store's), loaded from the store the
        first time and resident from then on: later calls return the same graph, its weights,
        plans and captures in place. The model file is checked against its SHA-256 first."""
        info = self.info(name, version)
        device = self.device if device is None else Device(device) if isinstance(device, str) else device
        key = (name, info.version, str(device))
        graph = self._resident.get(key)
        if graph is None:
            import nngraph.onnx as ngx
            data = (info.path / "model.onnx").read_bytes()
            if hashlib.sha256(data).hexdigest() != info.sha256:
                raise InvalidInputError(f"[store] {info.path / 'model.onnx'} does not match its SHA-256: the file "
                                        "changed after it was stored")
            graph = ngx.load(data, device=device)
            self._resident[key] = graph
            while self.capacity is not None and len(self._resident) > self.capacity:
                self._resident.popitem(last=False)
        self._resident.move_to_end(key)
        return graph

    def resident(self) -> list[tuple[str, int, str]]:
        """(name, version, device) of the resident graphs, least recently used first."""
        return list(self._resident)

    def evict(self, name: str | None = None, version: int | None = None, device=None) -> int:
        """Drops resident graphs matching the arguments (None: any) and returns how many; their
        device memory goes once nothing else holds them."""
        keys = [k for k in self._resident if (name is None or k[0] == name) and (version is None or k[1] == version)
                and (device is None or k[2] == str(Device(device) if isinstance(device, str) else device))]
        for k in keys:
            del self._resident[k]
        return len(keys)


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidInputError(f"[store] model names are letters, digits, '.', '_' and '-' (not first), got {name!r}")


def _values(values, skip: set) -> list:
    out = []
    for v in values:
        if v.name in skip:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]
        out.append((v.name, dims))
    return out
