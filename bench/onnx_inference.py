"""Imported ONNX models: import time and inference latency of ResNet-18 (224×224) and Network
in Network (CIFAR, 32×32) (and, with --networks vit_tiny, a ViT-Ti/16 at 224×224), exported
from PyTorch with random weights, in nngraph against onnxruntime and PyTorch on the cpu
(against PyTorch on cuda, the batch already on the device in both and the result read back);
and the time to switch between two models resident in an nngraph.store against loading one
from disk. Each (framework, network, batch) runs in its own process; outputs are checked equal
across frameworks.

    python bench/onnx_inference.py [--device cpu|cuda] [--batches 1 64] [--steps 20] [--rounds 1]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import add_rounds_argument, measure_frameworks, measure_in_subprocess, median_ms, peak_rss_mib, rss_mib

NETWORKS = {"resnet18": (3, 224, 224), "nin": (3, 32, 32), "vit_tiny": (3, 224, 224)}
DEFAULT = ["resnet18", "nin"]  # the networks; vit_tiny (ViT-Ti/16) where asked


def torch_network(name: str):
    import torch
    import torch_models
    torch.manual_seed(0)
    if name == "vit_tiny":
        net = torch_models.ViT(width=192, heads=3, depth=12, classes=1000, patches=196, patch=16)
    else:
        net = torch_models.ResNet(False, (2, 2, 2, 2), classes=1000) if name == "resnet18" else \
            torch_models.NetworkInNetwork()
    with torch.no_grad():  # statistics and shifts that are not the defaults
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_var.uniform_(0.5, 2.0)
                m.bias.uniform_(-0.2, 0.2)
    return net.eval()


def export(name: str, folder: str) -> str:
    import warnings

    import torch
    warnings.filterwarnings("ignore", category=DeprecationWarning)  # the TorchScript exporter's notice
    path = os.path.join(folder, f"{name}.onnx")
    torch.onnx.export(torch_network(name), (torch.randn(2, *NETWORKS[name]),), path, dynamo=False,
                      input_names=["x"], dynamic_axes={"x": {0: "N"}})
    return path


def batch_of(name: str, batch: int) -> np.ndarray:
    return np.random.default_rng(1).standard_normal((batch, *NETWORKS[name])).astype(np.float32)


def steady_ms(step, steps, sync=lambda: None) -> float:
    """median_ms after a warm-up of at least 3 runs and half a second: a short run's first tens of
    milliseconds on a machine that was idle are slower (its cores wake up), in every framework."""
    start = time.perf_counter()
    for i in range(1000):
        step()
        if i >= 2 and time.perf_counter() - start > 0.5:
            break
    return median_ms(step, warmup=0, steps=steps, sync=sync)


def run_nngraph(path, name, batch, steps, device, tf32):
    import nngraph as ng
    import nngraph.onnx as ngx
    x = batch_of(name, batch)
    ng.reset_peak_memory(device)
    t = time.perf_counter()
    graph = ngx.load(path, device=device)
    graph.allow_tf32 = tf32
    out = graph.run(x)
    ready = time.perf_counter() - t
    base = rss_mib()
    if device != "cpu":  # the batch already on the device, as PyTorch's is
        x = ng.Image(x, device=device)
    ms = steady_ms(lambda: graph.run(x), steps)
    peak = ng.memory_stats(device)["peak_bytes"] / 2**20 if device != "cpu" else peak_rss_mib()
    return _result(ms, ready, peak, base, out)


def run_onnxruntime(path, name, batch, steps, device, tf32, threads=None):
    import onnxruntime as ort
    x = batch_of(name, batch)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or os.cpu_count()
    t = time.perf_counter()
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    out = session.run(None, {"x": x})[0]
    ready = time.perf_counter() - t
    base = rss_mib()
    ms = steady_ms(lambda: session.run(None, {"x": x}), steps)
    return _result(ms, ready, peak_rss_mib(), base, out)


def run_torch(path, name, batch, steps, device, tf32):
    import torch
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = tf32  # the same arithmetic as ours
    net = torch_network(name).to(device)
    x = torch.from_numpy(batch_of(name, batch)).to(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    base = rss_mib()
    with torch.inference_mode():  # the result read back, as nngraph's run does
        out = net(x).cpu().numpy()
        ms = steady_ms(lambda: net(x).cpu(), steps, sync)
    peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else peak_rss_mib()
    return _result(ms, None, peak, base, out)


def _result(ms, ready, peak, base, out) -> dict:
    """A worker's numbers; `out`: the first values of each image's output, for the check."""
    return {"ms": ms, "import_s": ready, "peak_mib": peak, "base_mib": base,
            "out": out.reshape(out.shape[0], -1)[:, :8].tolist()}


def _cell(r: dict, key: str, fw: str) -> str:
    return f"{r[fw][key]:.2f}" if fw in r and r[fw][key] is not None else "—"


def run_switch(paths, device, steps):
    """Two models put in a store and got once (resident); then, per step, get the other model
    and classify one image with it, against evicting it first so that get loads it from disk."""
    import statistics

    from nngraph.store import Store
    names = list(paths)
    xs = {n: batch_of(n, 1) for n in names}
    with tempfile.TemporaryDirectory() as root:
        store = Store(root, device=device)
        for n in names:
            store.put(n, paths[n])
            store.get(n).run(xs[n])

        def timed(evict):
            times = []
            for i in range(2 * steps):
                n = names[i % 2]
                if evict:
                    store.evict(n)
                t = time.perf_counter()
                store.get(n).run(xs[n])
                times.append(time.perf_counter() - t)
            return 1000 * statistics.median(times[2:])
        return {"resident_ms": timed(False), "disk_ms": timed(True)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    p.add_argument("--networks", nargs="+", default=DEFAULT, choices=list(NETWORKS))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--tf32", action="store_true", help="cuda: tf32 convolutions and products in both frameworks")
    add_rounds_argument(p)
    p.add_argument("--worker", nargs="+")
    a = p.parse_args()
    if a.worker:
        import json
        os.environ["NNGRAPH_NUM_THREADS"] = str(a.threads)
        if a.worker[0] == "switch":
            pairs = a.worker[1:]  # name, path, name, path
            print(json.dumps(run_switch(dict(zip(pairs[::2], pairs[1::2])), a.device, a.steps)))
            return
        fw, path, name, batch = a.worker
        if fw == "torch":
            import torch
            torch.set_num_threads(a.threads)
        run = {"nngraph": run_nngraph, "onnxruntime": run_onnxruntime, "torch": run_torch}[fw]
        extra = {"threads": a.threads} if fw == "onnxruntime" else {}
        print(json.dumps(run(path, name, int(batch), a.steps, a.device, a.tf32, **extra)))
        return
    import onnxruntime
    import torch

    import nngraph as ng
    frameworks = ["nngraph", "onnxruntime", "torch"] if a.device == "cpu" else ["nngraph", "torch"]
    precision = "tf32" if a.tf32 else "exact float32"
    print(f"ONNX import and inference, {a.device} ({precision}), {a.threads} threads, "
          f"{platform.processor() or platform.machine()}; "
          f"nngraph {ng.__version__}, onnxruntime {onnxruntime.__version__}, torch {torch.__version__}; "
          f"median of {a.steps} runs after at least 3 warm-up runs and 0.5 s; import = load + first run")
    print("| network | batch | nngraph ms | onnxruntime ms | PyTorch ms | nngraph / best | import s nngraph / ort "
          "| peak MiB nngraph / ort / PyTorch |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        paths = {n: export(n, folder) for n in a.networks}
        for name in a.networks:
            for batch in a.batches:
                steps = a.steps if batch <= 8 else max(5, a.steps // 4)
                args = [paths[name], name, str(batch), "--steps", str(steps), "--threads", str(a.threads),
                        "--device", a.device] + (["--tf32"] if a.tf32 else [])
                r = measure_frameworks(__file__, frameworks, args, a.rounds)
                want = np.array(r["torch"]["out"])
                for fw in frameworks:
                    got = np.array(r[fw]["out"])
                    assert np.allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max()), (fw, got, want)
                ort_ms = r.get("onnxruntime", {}).get("ms")
                best = min(x for x in (ort_ms, r["torch"]["ms"]) if x is not None)
                print(f"| {name} | {batch} | {r['nngraph']['ms']:.2f} | {_cell(r, 'ms', 'onnxruntime')} | "
                      f"{r['torch']['ms']:.2f} | {r['nngraph']['ms'] / best:.2f} | "
                      f"{r['nngraph']['import_s']:.2f} / {_cell(r, 'import_s', 'onnxruntime')} | "
                      + " / ".join(f"{r[fw]['peak_mib']:.0f}" if fw in r else "—"
                                   for fw in ("nngraph", "onnxruntime", "torch")) + " |")
        if len(a.networks) == 2:
            named = [v for pair in paths.items() for v in pair]
            s = measure_in_subprocess(__file__, ["switch", *named, "--steps", str(a.steps), "--threads",
                                                 str(a.threads), "--device", a.device])
            print(f"\nswitching between the two models (get + one image): resident {s['resident_ms']:.2f} ms, "
                  f"loaded from disk {s['disk_ms']:.2f} ms ({s['disk_ms'] / s['resident_ms']:.0f}×)")


if __name__ == "__main__":
    main()
