"""Shared benchmark plumbing: timing medians, peak memory, one subprocess per measurement."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time


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


def measure_in_subprocess(script: str, args: list[str]) -> dict:
    """Runs `script --worker args` in a fresh interpreter; it prints one JSON line."""
    out = subprocess.run([sys.executable, script, "--worker", *args], check=True,
                         capture_output=True, text=True, env=dict(os.environ))
    return json.loads(out.stdout.strip().splitlines()[-1])


def torch_training_step(net, opt, lossf, x, y, xn, yn, captured: bool):
    """A PyTorch training step that refills the device batch (x, y) from host arrays (xn, yn),
    as a training loop's data arrives, then runs forward, loss, backward and the optimizer;
    captured: warmed up on a side stream, then the whole step recorded in one CUDA graph."""
    import torch

    def upload():
        x.copy_(torch.from_numpy(xn))
        y.copy_(torch.from_numpy(yn))

    def eager_step():
        upload()
        opt.zero_grad(set_to_none=True)
        lossf(net(x), y).backward()
        opt.step()

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
        lossf(net(x), y).backward()
        opt.step()

    def replay():
        upload()
        graph.replay()
    return replay


def measure_torch_training(make_net, xn, yn, device: str, steps: int, warmup: int, captured: bool,
                           threads: int) -> dict:
    """Median ms of torch_training_step (Adam 1e-4, cross-entropy) over `steps`, each waited for
    (and on cuda also pipelined_ms), for the module
    make_net() returns, peak memory from before its weights are made, and the sum of |logits|
    before training (eval mode), which the caller compares with nngraph's."""
    import torch

    torch.set_num_threads(threads)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    net = make_net().to(device).train()
    opt = torch.optim.Adam(net.parameters(), lr=1e-4, capturable=captured)
    lossf = torch.nn.CrossEntropyLoss()
    x, y = torch.from_numpy(xn).to(device), torch.from_numpy(yn).to(device)
    step = torch_training_step(net, opt, lossf, x, y, xn, yn, captured)
    with torch.no_grad():
        check = float(net.eval()(x).abs().sum())
    net.train()
    base = rss_mib()
    cuda = device.startswith("cuda")
    ms = median_ms(step, warmup=warmup, steps=steps, sync=torch.cuda.synchronize if cuda else (lambda: None))
    pipe = pipelined_ms(step, torch.cuda.synchronize, steps) if cuda else float("nan")
    device_mib = torch.cuda.max_memory_allocated() / 2**20 if cuda else float("nan")
    return {"ms": ms, "pipe_ms": pipe, "peak_mib": peak_rss_mib(), "base_mib": base, "check": check,
            "device_mib": device_mib}

