"""Per-step device times of one digit-network training step (NNGRAPH_PROFILE output).

    NNGRAPH_PROFILE=1 python scripts/profile_step.py [--device cuda] [--batch 1024]
"""

import argparse

import numpy as np

import nngraph as ng
from nngraph.models import digit_network

p = argparse.ArgumentParser()
p.add_argument("--device", default="cpu")
p.add_argument("--batch", type=int, default=64)
a = p.parse_args()
net = digit_network(optimizer=ng.Adam(learning_rate=1e-4))
g = ng.Loss(net.logits, "softmax_cross_entropy").training_graph(device=a.device)
rng = np.random.default_rng(0)
x, y = rng.random((a.batch, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, a.batch)
for _ in range(3):  # the last step's lines are the warm ones
    g.run(x, labels=y)
