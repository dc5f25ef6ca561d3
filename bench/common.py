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


def measure_in_subprocess(script: str, args: list[str]) -> dict:
    """Runs `script --worker args` in a fresh interpreter; it prints one JSON line."""
    out = subprocess.run([sys.executable, script, "--worker", *args], check=True,
                         capture_output=True, text=True, env=dict(os.environ))
    return json.loads(out.stdout.strip().splitlines()[-1])
