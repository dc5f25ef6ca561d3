"""Learning-rate schedules: callables of the step (0, 1, ...) that return a learning rate.

`fit(..., lr_schedule=...)` sets the graph's optimizers to `schedule(step)` before it encodes
each step; any callable of the step works the same way."""

from __future__ import annotations

import math
from collections.abc import Callable

Schedule = Callable[[int], float]


def constant(lr: float) -> Schedule:
    """lr at every step."""
    return lambda step: lr


def step_decay(lr: float, step_size: int, gamma: float = 0.1) -> Schedule:
    """lr · gamma^(step // step_size): multiplied by gamma every step_size steps."""
    _positive(step_size=step_size)
    return lambda step: lr * gamma ** (step // step_size)


def exponential(lr: float, decay_rate: float, decay_steps: int = 1) -> Schedule:
    """lr · decay_rate^(step / decay_steps), smoothly."""
    _positive(decay_steps=decay_steps)
    return lambda step: lr * decay_rate ** (step / decay_steps)


def cosine(lr: float, total_steps: int, warmup_steps: int = 0, final_lr: float = 0.0) -> Schedule:
    """Linear warm-up from 0 to lr over warmup_steps, then a half cosine from lr down to
    final_lr at total_steps (final_lr after)."""
    _positive(total_steps=total_steps)
    if not 0 <= warmup_steps < total_steps:
        raise ValueError(f"[schedule] warmup_steps must be in [0, total_steps), got {warmup_steps}")

    def schedule(step: int) -> float:
        if step < warmup_steps:
            return lr * (step + 1) / warmup_steps
        t = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return final_lr + 0.5 * (lr - final_lr) * (1 + math.cos(math.pi * t))

    return schedule


def one_cycle(max_lr: float, total_steps: int, pct_start: float = 0.3, div_factor: float = 25.0,
              final_div_factor: float = 1e4) -> Schedule:
    """The one-cycle policy (Smith): cosine up from max_lr/div_factor to max_lr over the first
    pct_start of total_steps, then cosine down to max_lr/(div_factor·final_div_factor)."""
    _positive(total_steps=total_steps)
    if not 0 < pct_start < 1:
        raise ValueError(f"[schedule] pct_start must be in (0, 1), got {pct_start}")
    start, end = max_lr / div_factor, max_lr / (div_factor * final_div_factor)
    rise = max(1, round(pct_start * total_steps))

    def schedule(step: int) -> float:
        if step < rise:
            return _cos_between(start, max_lr, step / rise)
        return _cos_between(max_lr, end, min(1.0, (step - rise) / max(1, total_steps - rise)))

    return schedule


def triangular(base_lr: float, max_lr: float, step_size: int) -> Schedule:
    """Cyclical learning rate (Smith): up from base_lr to max_lr over step_size steps and back,
    repeating."""
    _positive(step_size=step_size)

    def schedule(step: int) -> float:
        position = step % (2 * step_size)
        return base_lr + (max_lr - base_lr) * (1 - abs(position / step_size - 1))

    return schedule


def _cos_between(a: float, b: float, t: float) -> float:
    return b + (a - b) * 0.5 * (1 + math.cos(math.pi * t))


def _positive(**values: int) -> None:
    for name, v in values.items():
        if v < 1:
            raise ValueError(f"[schedule] {name} must be >= 1, got {v}")
