"""Conveniences on Graph written in Python: batched prediction, named parameters, a summary."""

from __future__ import annotations

import numpy as np

from nngraph._core import Graph, InvalidInputError
from nngraph.checkpoint import array_sources
from nngraph.training import as_images, drain


def predict(graph: Graph, images, batch_size: int = 256, layout: str = "NCHW"):
    """Runs the inference graph (a training graph's inference()) over `images` in batches
    and returns the results as one array: (N, C) where each result is 1×1 (a classifier's
    scores), else (N, C, H, W) (or NHWC with layout="NHWC"); a list for several results.
    Images are converted to float32 once (float64 is numpy's default)."""
    if batch_size < 1:
        raise InvalidInputError(f"[predict] batch_size must be >= 1, got {batch_size}")
    if graph.is_training:
        graph = graph.inference()
    x = as_images(images, "predict")
    if len(x) == 0:
        raise InvalidInputError("[predict] no images given")
    outputs, pending = [], []
    try:
        for start in range(0, len(x), batch_size):
            pending.append(graph.encode(x[start:start + batch_size], layout=layout))
            if len(pending) >= graph.max_in_flight:
                outputs.append(pending.pop(0).result(layout))
        outputs.extend(h.result(layout) for h in pending)
    except BaseException:
        drain(pending)
        raise
    several = isinstance(outputs[0], list)
    columns = zip(*outputs) if several else [outputs]
    joined = [_squeeze(np.concatenate(list(parts)), layout) for parts in columns]
    return joined if several else joined[0]


def _squeeze(a: np.ndarray, layout: str) -> np.ndarray:
    spatial = a.shape[2:] if layout == "NCHW" else a.shape[1:3]
    return a.reshape(a.shape[0], -1) if spatial == (1, 1) else a


def parameters(graph: Graph) -> dict:
    """{label: {tensor name: array or None}} of every data source of the graph, in node order
    (copies of the latest values): a convolution's {"weights": ..., "biases": ...}, a
    normalization's gamma, beta, mean and variance."""
    out = {}
    for ds in graph.data_sources:
        if ds.label() in out:
            array_sources(graph)  # raises naming the duplicate labels
        out[ds.label()] = ds.tensors()
    return out


def summary(graph: Graph) -> str:
    """A table of the graph's forward nodes: label, kind, output shape (C, H, W) and
    parameter count, then the totals and the planned memory of intermediate images for one
    image. Shapes are known once declared on the source nodes or after a first run."""
    rows = graph._summary_rows()
    lines = [("node", "kind", "output (C, H, W)", "parameters")]
    for label, kind, shape, count in rows:
        lines.append((label, kind, "?" if shape is None else str(shape), f"{count:,}"))
    widths = [max(len(r[i]) for r in lines) for i in range(4)]
    text = [" ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in lines]
    text.insert(1, "-" * len(text[0]))
    total = sum(r[3] for r in rows)
    text.append("-" * len(text[0]))
    text.append(f"{len(rows)} nodes, {total:,} parameters ({total * 4 / 2**20:.2f} MiB float32), "
                f"{'training' if graph.is_training else 'inference'} graph on {graph.device}")
    if all(r[2] is not None for r in rows):
        plan = graph.memory_plan(1)
        text.append(f"intermediate images per image: {plan['planned_bytes'] / 2**10:.1f} KiB planned, "
                    f"{plan['naive_bytes'] / 2**10:.1f} KiB with one buffer each")
    return "\n".join(text)


def describe(graph: Graph) -> str:
    """Graph(<device>, training|inference, N nodes, P parameters): the graph's repr."""
    rows = graph._summary_rows()
    kind = "training" if graph.is_training else "inference"
    return f"Graph({graph.device}, {kind}, {len(rows)} nodes, {sum(r[3] for r in rows):,} parameters)"
