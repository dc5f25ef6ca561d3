"""Shared benchmark plumbing: timing medians, peak memory, one subprocess per measurement."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np


def rss_mib() -> float:
    """Resident set size now, MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mib() -> float:
    """Peak RSS of this address space (VmHWM; ru_maxrss would carry the parent's across exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def median_ms(step, warmup: int, steps: int, sync=lambda: None) -> float:
    for _ in range(warmup):
        step()
    sync()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def pipelined_ms(step, wait, steps: int, window: int = 10) -> float:
    """Median ms per step over runs of `window` steps issued back to back, as a training loop
    issues them (the host prepares a step while the device runs the last), each run ended by
    waiting for the device; at least 5 runs, `steps` steps in all, after one untimed run (the
    first steps in flight side by side may still grow the memory pools)."""
    times = []
    for run in range(1 + max(5, steps // window)):
        t = time.perf_counter()
        for _ in range(window):
            step()
        wait()
        if run:
            times.append((time.perf_counter() - t) / window)
    return 1000 * statistics.median(times)


def nngraph_pipelined_ms(graph, x, y, steps: int) -> float:
    """pipelined_ms of graph.encode(x, labels=y): encode returns at once, at most max_in_flight run."""
    last = []
    return pipelined_ms(lambda: last.append(graph.encode(x, labels=y)), lambda: last.pop().wait() or last.clear(),
                        steps)


def rss_cell(r: dict) -> str:
    """A worker's peak RSS and its growth over the RSS after setup, as a table cell's text."""
    return f"{r['peak_mib']:.0f} (+{r['peak_mib'] - r['base_mib']:.0f})"


def check_checksums(n: dict, t: dict) -> None:
    """nngraph's and PyTorch's checksums of one result agree (the same weights and inputs)."""
    assert abs(n["checksum"] - t["checksum"]) <= 1e-3 * max(1.0, abs(t["checksum"])), (n, t)


def measure_in_subprocess(script: str, args: list[str]) -> dict:
    """Runs `script --worker args` in a fresh interpreter; it prints one JSON line. Its stderr
    passes through: a failure's traceback, warnings and NNGRAPH_TUNING_LOG's lines."""
    out = subprocess.run([sys.executable, script, "--worker", *args], check=True,
                         stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_frameworks(script: str, frameworks, args: list[str], rounds: int = 1) -> dict:
    """measure_in_subprocess(script, [fw, *args]) per framework, `rounds` times, the frameworks
    taking turns, so that a slow spell of a shared machine falls on each alike. Per framework:
    the median over the rounds of each time (ms, pipe_ms), the largest of each peak (*_mib),
    the rest from the first round."""
    runs = {fw: [] for fw in frameworks}
    for _ in range(rounds):
        for fw in frameworks:
            runs[fw].append(measure_in_subprocess(script, [fw, *args]))
    out = {}
    for fw, rs in runs.items():
        r = dict(rs[0])
        for key in r:
            if key in ("ms", "pipe_ms"):
                r[key] = statistics.median(x[key] for x in rs)
            elif key.endswith("_mib"):
                r[key] = max(x[key] for x in rs)
        out[fw] = r
    return out


def add_rounds_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rounds", type=int, default=1,
                   help="measure each framework this many times in turn, in a fresh process each (measure_frameworks)")


def torch_training_step(net, opt, lossf, x, y, xn, yn, captured: bool, amp=None, scaler=None):
    """A PyTorch training step that refills the device batch (x, y) from host arrays (xn, yn),
    as a training loop's data arrives (xn None: the batch stays on the device), then runs
    forward, loss, backward and the optimizer;
    captured: warmed up on a side stream, then the whole step recorded in one CUDA graph.
    amp: the autocast dtype (None: float32); scaler: a GradScaler (float16)."""
    import contextlib

    import torch

    def upload():
        if xn is None:
            return
        x.copy_(torch.from_numpy(xn))
        y.copy_(torch.from_numpy(yn))

    def train():
        with torch.autocast("cuda", dtype=amp) if amp is not None else contextlib.nullcontext():
            loss = lossf(net(x), y)
        if scaler is None:
            loss.backward()
            opt.step()
            return
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    def eager_step():
        upload()
        opt.zero_grad(set_to_none=True)
        train()

    if not captured:
        return eager_step
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            eager_step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        train()

    def replay():
        upload()
        graph.replay()
    return replay


def measure_torch_training(make_net, xn, yn, device: str, steps: int, warmup: int, captured: bool,
                           threads: int, fmt: str = "float32") -> dict:
    """Median ms of torch_training_step (Adam 1e-4, cross-entropy) over `steps`, each waited for
    (and on cuda also pipelined_ms), for the module
    make_net() returns, peak memory from before its weights are made, and the sum of |logits|
    before training (eval mode), which the caller compares with nngraph's. fmt bfloat16 or
    float16: PyTorch's mixed precision at its best, autocast to that dtype on channels-last
    tensors, fused Adam, and for float16 a GradScaler (capturable with the fused Adam)."""
    import contextlib

    import torch

    torch.set_num_threads(threads)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    amp = {"float32": None, "float16": torch.float16, "bfloat16": torch.bfloat16}[fmt]
    layout = torch.channels_last if amp is not None and xn.ndim == 4 else torch.contiguous_format
    net = make_net().to(device, memory_format=layout).train()
    opt = torch.optim.Adam(net.parameters(), lr=1e-4, capturable=captured, fused=amp is not None)
    scaler = torch.amp.GradScaler("cuda") if fmt == "float16" else None
    lossf = torch.nn.CrossEntropyLoss()
    x = torch.from_numpy(xn).to(device).contiguous(memory_format=layout)
    y = torch.from_numpy(yn).to(device)
    step = torch_training_step(net, opt, lossf, x, y, xn, yn, captured, amp, scaler)
    with torch.no_grad(), torch.autocast("cuda", dtype=amp) if amp is not None else contextlib.nullcontext():
        check = float(net.eval()(x).float().abs().sum())
    net.train()
    base = rss_mib()
    cuda = device.startswith("cuda")
    ms = median_ms(step, warmup=warmup, steps=steps, sync=torch.cuda.synchronize if cuda else (lambda: None))
    pipe = pipelined_ms(step, torch.cuda.synchronize, steps) if cuda else float("nan")
    device_mib = torch.cuda.max_memory_allocated() / 2**20 if cuda else float("nan")
    return {"ms": ms, "pipe_ms": pipe, "peak_mib": peak_rss_mib(), "base_mib": base, "check": check,
            "device_mib": device_mib}



def compare_training(script: str, a, title: str, base_batch: int) -> None:
    """The table of a training benchmark whose workers (`script --worker FRAMEWORK BATCH ...`)
    return measure_torch_training's fields: per batch of a.batches, nngraph against PyTorch
    (and on cuda PyTorch captured), each in its own process, steps scaled as base_batch/batch.
    Both must start from the same logits (checked)."""
    import torch
    precision = a.format if a.format != "float32" else "tf32" if a.tf32 else "exact float32"
    print(f"{title} training step (Adam), {a.device}, {precision}, "
          f"{a.threads} threads, {platform.machine()}, "
          f"torch {torch.__version__}; median of the steps after 2 warm-up{rounds_note(a.rounds)}")
    cuda = a.device.startswith("cuda")
    if cuda:
        print("| batch | steps | nngraph ms/step | PyTorch ms/step | ratio | PyTorch captured ms/step |"
              " ratio to captured | peak device MiB (nngraph / PyTorch) |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|")
    else:
        print("| batch | nngraph ms/step | PyTorch ms/step | ratio | peak RSS MiB, +over setup (nngraph / PyTorch) |")
        print("|---:|---:|---:|---:|---:|")
    for batch in a.batches:
        steps = max(5, a.steps * base_batch // batch)
        args = [str(batch), "--steps", str(steps), "--threads", str(a.threads), "--device", a.device]
        args += (["--tf32"] if a.tf32 else []) + ["--format", a.format]
        frameworks = ("nngraph", "torch", "torch-graph") if cuda else ("nngraph", "torch")
        r = measure_frameworks(script, frameworks, args, a.rounds)
        n, t = r["nngraph"], r["torch"]
        # Same weights and data: the logits before training must agree (tf32 and half round).
        assert abs(n["check"] - t["check"]) < check_tolerance(a) * abs(t["check"]), (n, t)
        if not cuda:
            print(f"| {batch} | {n['ms']:.2f} | {t['ms']:.2f} | {n['ms'] / t['ms']:.2f} | "
                  f"{rss_cell(n)} / {rss_cell(t)} |")
            continue
        g = r["torch-graph"]
        for mode, key in (("each waited for", "ms"), ("pipelined", "pipe_ms")):
            print(f"| {batch} | {mode} | {n[key]:.2f} | {t[key]:.2f} | {n[key] / t[key]:.2f} | {g[key]:.2f} | "
                  f"{n[key] / g[key]:.2f} | {n['device_mib']:.0f} / {t['device_mib']:.0f} |")


def rounds_note(rounds: int) -> str:
    """The title's words for --rounds."""
    return f", median of {rounds} processes each, taking turns" if rounds > 1 else ""


def check_tolerance(a) -> float:
    """How far the two frameworks' sums of |logits| before training may differ."""
    return {"float16": 1e-2, "bfloat16": 5e-2}.get(a.format, 1e-2 if getattr(a, "tf32", False) else 1e-4)


def add_format_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", default="float32", choices=("float32", "bfloat16", "float16"),
                   help="cuda: nngraph's graph format against PyTorch autocast to that dtype (channels-last, "
                        "GradScaler for float16)")


def training_main(script: str, title: str, batches: list[int], base_batch: int, run_nngraph, run_torch) -> None:
    """The command line of a training benchmark: the table (compare_training), or with --worker
    one measurement, run_nngraph(batch, steps, threads, device, tf32, fmt) or run_torch(...,
    captured), printed as one JSON line."""
    p = argparse.ArgumentParser()
    p.add_argument("--batches", type=int, nargs="+", default=batches)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--device", default="cpu")
    p.add_argument("--tf32", action="store_true", help="cuda: both frameworks may use tf32 tensor cores")
    p.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "BATCH"))
    add_format_argument(p)
    add_rounds_argument(p)
    a = p.parse_args()
    if not a.worker:
        compare_training(script, a, title, base_batch)
        return
    fw, batch = a.worker[0], int(a.worker[1])
    if fw == "nngraph":
        r = run_nngraph(batch, a.steps, a.threads, a.device, a.tf32, a.format)
    else:
        r = run_torch(batch, a.steps, a.threads, a.device, a.tf32, a.format, captured=fw == "torch-graph")
    print(json.dumps(r))


def measure_nngraph_training(graph, x, y, steps: int, device: str, tf32: bool) -> dict:
    """Median ms of graph's training step on (x, y) (and on cuda pipelined_ms), peak memory,
    and the sum of |logits| of its inference graph before any step, as
    measure_torch_training reports them."""
    import nngraph as ng
    graph.allow_tf32 = tf32
    logits = graph.inference().run(x)  # before any step: no dropout, initial statistics
    base = rss_mib()
    ms = median_ms(lambda: graph.encode(x, labels=y).wait(), warmup=2, steps=steps)
    pipe = nngraph_pipelined_ms(graph, x, y, steps) if device.startswith("cuda") else float("nan")
    return {"ms": ms, "pipe_ms": pipe, "peak_mib": peak_rss_mib(), "base_mib": base,
            "check": float(np.abs(logits).sum()), "device_mib": ng.memory_stats(device)["peak_bytes"] / 2**20}
