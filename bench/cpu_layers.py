"""One layer at a time on the cpu: every distinct convolution and pooling of ResNet-18 and Network
in Network (as bench/onnx_inference.py exports them from PyTorch, batch normalization folded into
the convolutions) run as a one-node ONNX graph, in nngraph against onnxruntime at the same thread
count, in one process, taking turns. Medians after warm-up; GFLOP/s of the convolutions; outputs
checked equal. Where a network's latency ratio comes from, layer by layer, on a given machine.

    python bench/cpu_layers.py [--batch 1] [--threads N] [--networks resnet18 nin] [--steps 50]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from onnx_inference import NETWORKS, export, steady_ms  # noqa: E402

OPS = ("Conv", "MaxPool", "AveragePool")


def layers(path: str, batch: int):
    """(label, one-node model bytes, input shape, multiply-adds) for each distinct layer of OPS."""
    import onnx
    from onnx import helper
    model = onnx.shape_inference.infer_shapes(onnx.load(path))
    dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in [*model.graph.value_info, *model.graph.input, *model.graph.output]}
    weights = {t.name: t for t in model.graph.initializer}
    seen = set()
    for node in model.graph.node:
        if node.op_type not in OPS:
            continue
        shape_in = [batch, *dims[node.input[0]][1:]]
        shape_out = [batch, *dims[node.output[0]][1:]]
        params = [weights[name] for name in node.input[1:] if name]
        key = (node.op_type, tuple(shape_in), tuple(tuple(p.dims) for p in params),
               tuple(a.SerializeToString() for a in node.attribute))
        if key in seen:
            continue
        seen.add(key)
        one = helper.make_node(node.op_type, ["x", *[p.name for p in params]], ["y"])
        one.attribute.extend(node.attribute)
        graph = helper.make_graph([one], node.op_type, [helper.make_tensor_value_info("x", 1, shape_in)],
                                  [helper.make_tensor_value_info("y", 1, shape_out)], params)
        macs = 0
        if node.op_type == "Conv":
            w = params[0].dims  # O, I/groups, kh, kw
            macs = int(np.prod(shape_out)) * int(np.prod(w[1:]))
        label = f"{node.op_type} {'×'.join(map(str, shape_in[1:]))} → {'×'.join(map(str, shape_out[1:]))}"
        if node.op_type == "Conv":
            label += f" ({params[0].dims[2]}×{params[0].dims[3]})"
        yield label, helper.make_model(graph, opset_imports=model.opset_import).SerializeToString(), shape_in, macs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--networks", nargs="+", default=list(NETWORKS), choices=list(NETWORKS))
    p.add_argument("--steps", type=int, default=50)
    a = p.parse_args()
    os.environ["NNGRAPH_NUM_THREADS"] = str(a.threads)  # before nngraph starts its pool
    import onnxruntime

    import nngraph as ng
    import nngraph.onnx as ngx
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = a.threads
    print(f"One layer at a time, cpu, batch {a.batch}, {a.threads} threads, {platform.machine()}; nngraph "
          f"{ng.__version__}, onnxruntime {onnxruntime.__version__}; median of {a.steps} runs after warm-up")
    print("| network | layer | nngraph ms | onnxruntime ms | ratio | GFLOP/s nngraph / ort |")
    print("|---|---|---:|---:|---:|---|")
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        for name in a.networks:
            total = [0.0, 0.0]
            for label, model, shape, macs in layers(export(name, folder), a.batch):
                x = rng.standard_normal(shape).astype(np.float32)
                graph = ngx.load(model, device="cpu")
                session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
                got, want = graph.run(x), session.run(None, {"x": x})[0]
                assert np.allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max()), label
                ms = [steady_ms(lambda g=graph, v=x: g.run(v), a.steps),
                      steady_ms(lambda s=session, v=x: s.run(None, {"x": v}), a.steps)]
                total = [t + m for t, m in zip(total, ms)]
                rate = " / ".join(f"{2 * macs / m / 1e6:.0f}" for m in ms) if macs else ""
                print(f"| {name} | {label} | {ms[0]:.3f} | {ms[1]:.3f} | {ms[0] / ms[1]:.2f} | {rate} |", flush=True)
            print(f"| {name} | distinct layers, once each | {total[0]:.3f} | {total[1]:.3f} | "
                  f"{total[0] / total[1]:.2f} | |")


if __name__ == "__main__":
    main()
