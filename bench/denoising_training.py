"""The denoising autoencoder (python -m nngraph.examples.denoise) trained by nngraph and by the
same network and recipe in PyTorch: the same initial weights, the same batches with the same
noise, Adam under the same cosine schedule. Reports each framework's test reconstruction error
after every epoch, their ratio, training time (evaluation excluded) and peak memory; each
framework runs in its own process.

    python bench/denoising_training.py [--device cuda] [--epochs 3] [--data DIR] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import measure_in_subprocess, peak_rss_mib  # noqa: E402


def run_nngraph(a) -> dict:
    import nngraph as ng
    from nngraph.examples import denoise
    ng.reset_peak_memory(a.device)
    args = ["--device", a.device, "--epochs", str(a.epochs)] + (["--data", a.data] if a.data else [])
    r = denoise.main(args + (["--limit", str(a.limit)] if a.limit else []))
    return {**r, "peak_mib": peak_rss_mib(), "device_mib": ng.memory_stats(a.device)["peak_bytes"] / 2**20}


def run_torch(a) -> dict:
    import torch
    from torch_models import DenoisingAutoencoder

    from nngraph import schedules
    from nngraph.datasets import load_fashion_mnist
    from nngraph.examples import denoise
    from nngraph.models import denoising_autoencoder
    torch.backends.cudnn.allow_tf32 = False  # nngraph trains in exact float32 by default
    torch.backends.cuda.matmul.allow_tf32 = False
    x_train, _, x_test, _ = load_fashion_mnist(a.data)
    x_train = x_train[:a.limit] if a.limit else x_train
    noisy_test, clean_test = denoise.noisy_test_set(x_test, denoise.SIGMA)
    cuda = a.device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    tensors = {label: ds.tensors() for label, ds in denoising_autoencoder(seed=0).sources.items()}
    net = DenoisingAutoencoder(tensors).to(a.device)
    opt = torch.optim.Adam(net.parameters(), lr=denoise.LEARNING_RATE)
    per_epoch = -(-len(x_train) // denoise.BATCH_SIZE)
    schedule = schedules.cosine(denoise.LEARNING_RATE, a.epochs * per_epoch)
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def error():
        with torch.no_grad():
            out = [net(torch.from_numpy(noisy_test[i:i + 500]).to(a.device)).cpu().numpy()
                   for i in range(0, len(noisy_test), 500)]
        return float(np.mean((np.concatenate(out) - clean_test) ** 2))

    history, seconds, t = [], 0.0, time.perf_counter()
    for step, (x, y) in enumerate(denoise.noisy_batches(x_train, a.epochs, denoise.BATCH_SIZE, denoise.SIGMA, 0)):
        for group in opt.param_groups:
            group["lr"] = schedule(step)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(net(torch.from_numpy(x).to(a.device)), torch.from_numpy(y).to(a.device))
        loss.backward()
        opt.step()
        if (step + 1) % per_epoch == 0:
            sync()
            seconds += time.perf_counter() - t
            history.append(error())
            t = time.perf_counter()
    device_mib = torch.cuda.max_memory_allocated() / 2**20 if cuda else float("nan")
    return {"error": history[-1], "history": history, "seconds": seconds, "peak_mib": peak_rss_mib(),
            "device_mib": device_mib}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--epochs", type=int, default=3, help="both frameworks (the example's default)")
    p.add_argument("--data", help="folder with the four Fashion-MNIST IDX files (default: Debian's)")
    p.add_argument("--limit", type=int, help="train on the first N images only")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--worker", choices=("nngraph", "torch"))
    a = p.parse_args()
    if a.worker:
        os.environ["NNGRAPH_NUM_THREADS"] = str(a.threads)
        if a.worker == "torch":
            import torch
            torch.set_num_threads(a.threads)
        r = run_nngraph(a) if a.worker == "nngraph" else run_torch(a)
        print(json.dumps({k: v for k, v in r.items() if k != "noisy_error"}))
        return
    import torch
    args = ["--device", a.device, "--epochs", str(a.epochs), "--threads", str(a.threads)]
    args += (["--data", a.data] if a.data else []) + (["--limit", str(a.limit)] if a.limit else [])
    r = {fw: measure_in_subprocess(__file__, [fw, *args]) for fw in ("nngraph", "torch")}
    n, t = r["nngraph"], r["torch"]
    from nngraph.examples import denoise
    print(f"denoising autoencoder on Fashion-MNIST (noise sigma {denoise.SIGMA}), {a.device}, exact float32, "
          f"{platform.machine()}, torch {torch.__version__}; {a.epochs} epochs of batch {denoise.BATCH_SIZE}, "
          f"Adam {denoise.LEARNING_RATE} cosine")
    print("| epoch | nngraph test MSE | PyTorch test MSE | ratio |")
    print("|---:|---:|---:|---:|")
    for e, (en, et) in enumerate(zip(n["history"], t["history"]), 1):
        print(f"| {e} | {en:.5f} | {et:.5f} | {en / et:.3f} |")
    memory = "device" if a.device.startswith("cuda") else "RSS"
    key = "device_mib" if a.device.startswith("cuda") else "peak_mib"
    print(f"training seconds (evaluation excluded): nngraph {n['seconds']:.1f}, PyTorch {t['seconds']:.1f} "
          f"(ratio {n['seconds'] / t['seconds']:.2f}); peak {memory} MiB: nngraph {n[key]:.0f}, PyTorch {t[key]:.0f}")


if __name__ == "__main__":
    main()
