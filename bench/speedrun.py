"""The speed run: airbench94's recipe in nngraph (nngraph.examples.speedrun) and the same recipe
in PyTorch (torch.compile, bfloat16 autocast, channels-last), each in its own process on the
same device, timed by airbench's rules: the whitening initialisation, training and the
evaluation with test-time augmentation; the data's upload and a first whole run (compilation,
capture, algorithm search) untimed. Each framework keeps the images on the device in bfloat16
(what autocast and nngraph's bfloat16 graph round them to) and gathers, shuffles and augments
its batches there (translate 2, reflected; flips alternating by epoch).

    python bench/speedrun.py --data synthetic   # 50,000 random 3×32×32 images (CIFAR-10's size): time
    python bench/speedrun.py --data fashion     # real Fashion-MNIST: time and test accuracy

Prints per framework the median seconds per run, the test accuracies (mean and spread over the
seeds) and the peak device memory, then nngraph's time as a ratio of PyTorch's."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import measure_in_subprocess  # noqa: E402


def data(kind: str):
    """(train images, train labels, test images, test labels), normalised, as numpy."""
    if kind == "fashion":
        from nngraph.datasets import load_fashion_mnist
        x, y, xt, yt = load_fashion_mnist()
    else:
        rng = np.random.default_rng(0)
        x, y = rng.standard_normal((50000, 3, 32, 32), np.float32), rng.integers(0, 10, 50000)
        xt, yt = rng.standard_normal((10000, 3, 32, 32), np.float32), rng.integers(0, 10, 10000)
    mean, std = x.mean(), x.std()
    return (x - mean) / std, y, (xt - mean) / std, yt


def nngraph_worker(args, x, y, xt, yt) -> dict:
    import nngraph as ng
    from nngraph.examples import speedrun

    train, test = speedrun.datasets(x, y, xt, yt, "cuda")
    options = argparse.Namespace(device="cuda", epochs=args.epochs, batch_size=args.batch_size,
                                 widths=(64, 256, 256), whiten_bias_epochs=3)
    setup = speedrun.build(x, len(train) // args.batch_size, options)
    speedrun.run(0, setup, train, test, options)  # untimed warm-up
    ng.reset_peak_memory("cuda")
    runs = [speedrun.run(seed, setup, train, test, options) for seed in range(args.seeds)]
    return {"seconds": [s for s, _ in runs], "accuracy": [a for _, a in runs],
            "peak_mib": ng.memory_stats("cuda")["peak_bytes"] / 2**20}


class TorchRecipe:
    """airbench94 in PyTorch: the network compiled once, its weights made afresh for each run."""

    def __init__(self, args, x, y, xt, yt):
        import torch
        from torch_models import SpeedrunNet
        self.torch, self.args = torch, args
        dev = "cuda"
        # Stored in bfloat16 as nngraph's are: autocast rounds them to it anyway.
        self.x = torch.tensor(x, device=dev, dtype=torch.bfloat16)
        self.xt = torch.tensor(xt, device=dev, dtype=torch.bfloat16)
        self.y, self.yt = (torch.tensor(v, device=dev, dtype=torch.long) for v in (y, yt))
        self.padded = torch.nn.functional.pad(self.x, (2,) * 4, mode="reflect")
        self.net = SpeedrunNet(10, x.shape[1], momentum=0.4).to(dev, memory_format=torch.channels_last)
        self.model = torch.compile(self.net, mode=args.compile_mode)

    def whitening(self, epsilon: float = 5e-4):
        """airbench's: the eigenvectors of the first 5000 images' 2×2 patch moments, on the GPU."""
        torch = self.torch
        x = self.x[:5000].float()
        c = x.shape[1]
        patches = x.unfold(2, 2, 1).unfold(3, 2, 1).transpose(1, 3).reshape(-1, c, 2, 2).flatten(1)
        values, vectors = torch.linalg.eigh(patches.T @ patches / len(patches))
        values, vectors = values.flip(0), vectors.T.flip(0)  # largest first
        scaled = (vectors / torch.sqrt(values + epsilon)[:, None]).reshape(-1, c, 2, 2)
        return torch.cat([scaled, -scaled])

    def reset(self, seed: int):
        torch = self.torch
        torch.manual_seed(seed)
        for m in self.net.modules():
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()
            if isinstance(m, torch.nn.BatchNorm2d):
                m.reset_running_stats()
        with torch.no_grad():
            self.net.whiten.weight.copy_(self.whitening())
            self.net.whiten.bias.zero_()
        self.net.whiten.bias.requires_grad = True  # frozen after the first epochs of the run before

    def batch(self, order, coins, epoch: int, start: int, count: int):
        torch = self.torch
        idx = order[start:start + count]
        images = self.padded[idx]
        shift = torch.randint(0, 5, (2, count), device=images.device)
        h, w = self.x.shape[2:]
        rows = (shift[0, :, None] + torch.arange(h, device=images.device))[:, None, :, None]
        cols = (shift[1, :, None] + torch.arange(w, device=images.device))[:, None, None, :]
        n = torch.arange(count, device=images.device)[:, None, None, None]
        c = torch.arange(images.shape[1], device=images.device)[None, :, None, None]
        images = images[n, c, rows, cols]
        flip = (coins[idx] ^ (epoch % 2)).bool()
        images = torch.where(flip[:, None, None, None], images.flip(3), images)
        return images.contiguous(memory_format=torch.channels_last), self.y[idx]

    def run(self, seed: int) -> tuple[float, float]:
        torch, args = self.torch, self.args
        torch.cuda.synchronize()
        start = time.perf_counter()
        self.reset(seed)
        momentum, bs = 0.85, args.batch_size
        kilostep = 1024 * (1 + 1 / (1 - momentum))
        lr, wd = 11.5 / kilostep, 0.0153 * bs / kilostep
        norms = [p for k, p in self.net.named_parameters() if "norm" in k and p.requires_grad]
        others = [p for k, p in self.net.named_parameters() if "norm" not in k and p.requires_grad]
        opt = torch.optim.SGD([{"params": norms, "lr": lr * 64, "weight_decay": wd / (lr * 64)},
                               {"params": others, "lr": lr, "weight_decay": wd / lr}], momentum=momentum, nesterov=True)
        steps_per_epoch = len(self.x) // bs
        total = args.epochs * steps_per_epoch
        warmup = int(total * 0.23)

        def factor(step):
            if step < warmup:
                return 0.2 + 0.8 * step / warmup
            return 1.0 - 0.93 * (step - warmup) / (total - warmup)

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        alpha = 0.95**5 * (torch.arange(total + 1) / total) ** 3
        slow = {k: v.clone() for k, v in self.net.state_dict().items()}
        lossf = torch.nn.CrossEntropyLoss(label_smoothing=0.2, reduction="none")
        coins = torch.randint(0, 2, (len(self.x),), device=self.x.device)
        step = 0
        self.model.train()
        for epoch in range(args.epochs):
            self.net.whiten.bias.requires_grad = epoch < 3
            order = torch.randperm(len(self.x), device=self.x.device)
            for start_at in range(0, steps_per_epoch * bs, bs):
                xb, yb = self.batch(order, coins, epoch, start_at, bs)
                with torch.autocast("cuda", torch.bfloat16):
                    loss = lossf(self.model(xb), yb).sum()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
                step += 1
                if step % 5 == 0:
                    self.lookahead(slow, float(alpha[step]))
        accuracy = self.evaluate()
        torch.cuda.synchronize()
        return time.perf_counter() - start, accuracy

    def lookahead(self, slow: dict, decay: float):
        with self.torch.no_grad():
            for (_, s), v in zip(slow.items(), self.net.state_dict().values()):
                if v.dtype.is_floating_point:
                    s.lerp_(v, 1 - decay)
                    v.copy_(s)

    def evaluate(self) -> float:
        from nngraph.training import TTA_VIEWS
        torch = self.torch
        self.model.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cuda", torch.bfloat16):
            for s in range(0, len(self.xt), 2000):
                x = self.xt[s:s + 2000]
                padded = torch.nn.functional.pad(x, (1,) * 4, mode="reflect")
                h, w = x.shape[2:]
                logits = 0
                for flip, (dy, dx), weight in TTA_VIEWS["flip_shift"]:
                    view = padded[:, :, 1 + dy:1 + dy + h, 1 + dx:1 + dx + w] if not flip else \
                        padded.flip(3)[:, :, 1 + dy:1 + dy + h, 1 + dx:1 + dx + w]
                    logits = logits + weight * self.model(view.contiguous(memory_format=torch.channels_last)).float()
                correct += int((logits.argmax(1) == self.yt[s:s + 2000]).sum())
        self.model.train()
        return correct / len(self.xt)


def torch_worker(args, x, y, xt, yt) -> dict:
    import torch
    recipe = TorchRecipe(args, x, y, xt, yt)
    recipe.run(0)  # untimed: compilation and autotuning
    torch.cuda.reset_peak_memory_stats()
    runs = [recipe.run(seed) for seed in range(args.seeds)]
    return {"seconds": [s for s, _ in runs], "accuracy": [a for _, a in runs],
            "peak_mib": torch.cuda.max_memory_allocated() / 2**20, "torch": torch.__version__}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", choices=["synthetic", "fashion"], default="synthetic")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--compile-mode", default="max-autotune")
    p.add_argument("--frameworks", nargs="+", default=["nngraph", "torch"])
    p.add_argument("--worker", nargs="?", const=None, default=False)
    args = p.parse_args()
    if args.worker is not False:
        x, y, xt, yt = data(args.data)
        work = nngraph_worker if args.worker == "nngraph" else torch_worker
        print(json.dumps(work(args, x, y, xt, yt)))
        return
    common = ["--data", args.data, "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
              "--seeds", str(args.seeds), "--compile-mode", args.compile_mode]
    results = {fw: measure_in_subprocess(__file__, [fw, *common]) for fw in args.frameworks}
    print(f"speed run on {args.data} data, {args.epochs} epochs of batch {args.batch_size}, {args.seeds} seeds "
          f"({platform.python_version()}, torch {results.get('torch', {}).get('torch', '-')}, "
          f"compile mode {args.compile_mode})")
    print("| framework | median s per run | test accuracy mean (std) | peak MiB |")
    print("|---|---:|---:|---:|")
    for fw, r in results.items():
        acc = np.array(r["accuracy"])
        print(f"| {fw} | {statistics.median(r['seconds']):.2f} | {100 * acc.mean():.2f}% ({100 * acc.std():.2f}) | "
              f"{r['peak_mib']:.0f} |")
    if len(results) == 2:
        a, b = (statistics.median(results[fw]["seconds"]) for fw in args.frameworks)
        print(f"{args.frameworks[0]} / {args.frameworks[1]} time: {a / b:.2f}")


if __name__ == "__main__":
    main()
