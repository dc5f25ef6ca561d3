"""ONNX models in and out (needs the `onnx` package: `pip install nngraph[onnx]`).

`load` imports a model as an inference Graph whose weights sit in ArrayDataSources labelled
from the model's initializers; `run` feeds it arrays shaped as the model's inputs and returns
its outputs shaped as the model's; `save` exports an inference graph (or a training graph's
inference graph) as a model any ONNX runtime runs."""

from __future__ import annotations

import os
import weakref

try:
    import onnx
except ImportError as e:  # pragma: no cover - the package is an optional dependency
    raise ImportError("nngraph.onnx needs the onnx package: pip install onnx (or nngraph[onnx])") from e

import numpy as np

from nngraph._core import Graph, InvalidInputError
from nngraph._files import write_atomically
from nngraph.onnx._export import export
from nngraph.onnx._import import import_graph
from nngraph.onnx._layout import from_image, to_image

DEFAULT_OPSET = 17
_imported: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def load(model, device="cpu", *, format: str = "float32", input_shapes: dict | None = None) -> Graph:
    """An inference Graph computing the ONNX model `model` (a path, the file's bytes or an
    onnx.ModelProto; opsets 11 to the newest the onnx package knows, older ones raised to 11 by
    onnx's version converter first) on `device`.

    Its sources are the model's inputs in order, labelled with their names: an input of shape
    (N, C, H, W) or (N, C) is an image as it is; (N, H, W, C) read only through a Transpose to
    (N, C, H, W) is the image of C channels that Transpose gives; (N, C, L) read by convolutions is an image of one
    row (N, C, 1, L); a sequence (N, T, F) or (T, N, F) is (N, F, 1, T). `run` does that for you.
    Every dim but the batch must be known: `input_shapes={name: dims without the batch}` gives
    those the model leaves open. Its results are the model's outputs, labelled likewise.

    Weights become ArrayDataSources labelled from their initializers ("conv1.weight" →
    "conv1"), so the graph can be fine-tuned: add a Loss on `graph.result_images[0]` and make its
    training graph. Operators nngraph builds from others with fixed weights (LRN's window, sums
    over the channels, DepthToSpace's one-hot moves) keep those in data sources of their own,
    frozen, so fine-tuning leaves them as they are. An operator, attribute or layout nngraph
    does not compute raises UnsupportedError naming the node and the operator; a malformed model
    InvalidInputError."""
    graph, info = import_graph(model, device, format, input_shapes)
    _imported[graph] = info
    return graph


def run(graph: Graph, inputs) -> list[np.ndarray]:
    """Runs a graph from `load` on arrays shaped as the model's inputs (a list in the model's
    order, or {name: array}) and returns its outputs shaped as the model's and of its float type
    (computed in the graph's format), as onnxruntime's InferenceSession.run does."""
    info = _imported.get(graph)
    if info is None:
        raise InvalidInputError("[onnx] run takes a graph made by nngraph.onnx.load")
    names = [name for name, _ in info["inputs"]]
    if isinstance(inputs, dict):
        missing = [n for n in names if n not in inputs]
        if missing:
            raise InvalidInputError(f"[onnx] no array for input(s) {missing}")
        inputs = [inputs[n] for n in names]
    inputs = list(inputs)
    if len(inputs) != len(names):
        raise InvalidInputError(f"[onnx] the model takes {len(names)} input(s) {names}, got {len(inputs)}")
    images = [to_image(np.asarray(a, np.float32), act) for a, (_, act) in zip(inputs, info["inputs"])]
    results = graph.run(images if len(images) > 1 else images[0])
    results = results if isinstance(results, list) else [results]
    return [from_image(r, act).astype(dtype, copy=False)
            for r, (_, act), dtype in zip(results, info["outputs"], info["dtypes"])]


def save(graph: Graph, path: str | os.PathLike | None = None, *, opset: int = DEFAULT_OPSET,
         input_shapes=None) -> onnx.ModelProto:
    """Exports an inference graph (of a training graph, its inference graph) as an ONNX model
    of `opset` (13 or later), checked by onnx.checker with full shape inference, and writes it
    to `path` atomically where given. Sources and results keep their labels as names; weights
    are initializers named "label.tensor" ("conv1.weights"). Sources need declared shapes
    (ImageNode(shape=...)) or `input_shapes=[(C, H, W), ...]`; the batch dim stays open."""
    if opset < 13 or opset > onnx.defs.onnx_opset_version():
        raise InvalidInputError(f"[onnx] opset must be 13..{onnx.defs.onnx_opset_version()}, got {opset}")
    model = export(graph, opset, input_shapes)
    onnx.checker.check_model(model, full_check=True)
    if path is not None:
        write_atomically(path, model.SerializeToString())
    return model


__all__ = ["DEFAULT_OPSET", "load", "run", "save"]
