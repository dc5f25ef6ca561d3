"""Plain numpy references for every forward op, computed in float64."""

import math

import numpy as np


def resolve(n, k, stride, dilation, padding, axis):
    """(out, pad_before, pad_after) for one axis; axis 0 = height, 1 = width."""
    span = (k - 1) * dilation + 1
    if padding == "valid":
        before = after = 0
    elif padding == "same":
        out = -(-n // stride)
        total = max((out - 1) * stride + span - n, 0)
        before, after = total // 2, total - total // 2
    elif padding == "full":
        before = after = span - 1
    else:  # explicit (top, bottom, left, right)
        before, after = padding[2 * axis], padding[2 * axis + 1]
    return (n + before + after - span) // stride + 1, before, after


def conv2d(x, w, b, stride=(1, 1), dilation=(1, 1), groups=1, padding="valid"):
    x = x.astype(np.float64)
    n, _c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ho, pt, pb = resolve(h, kh, stride[0], dilation[0], padding, 0)
    wo, pl, pr = resolve(wd, kw, stride[1], dilation[1], padding, 1)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    out = np.zeros((n, o, ho, wo))
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                y0, x0 = i * dilation[0], j * dilation[1]
                patch = xs[:, :, y0:y0 + stride[0] * (ho - 1) + 1:stride[0],
                           x0:x0 + stride[1] * (wo - 1) + 1:stride[1]]
                out[:, g * og:(g + 1) * og] += np.einsum(
                    "nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def fully_connected(x, w, b):
    n = x.shape[0]
    out = x.reshape(n, -1).astype(np.float64) @ w.reshape(w.shape[0], -1).T.astype(np.float64)
    if b is not None:
        out += b
    return out.reshape(n, -1, 1, 1)


def pooling(x, mode, kernel, stride, padding="valid", count_include_pad=False, dilation=(1, 1)):
    n, c, h, w = x.shape
    ho, pt, pb = resolve(h, kernel[0], stride[0], dilation[0], padding, 0)
    wo, pl, pr = resolve(w, kernel[1], stride[1], dilation[1], padding, 1)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)),
                constant_values=np.nan)
    out = np.zeros((n, c, ho, wo))
    for oy in range(ho):
        for ox in range(wo):
            y0, x0 = oy * stride[0], ox * stride[1]
            win = xp[:, :, y0:y0 + (kernel[0] - 1) * dilation[0] + 1:dilation[0],
                     x0:x0 + (kernel[1] - 1) * dilation[1] + 1:dilation[1]]
            if mode == "max":
                out[:, :, oy, ox] = np.nanmax(win, axis=(2, 3))
            elif count_include_pad:
                out[:, :, oy, ox] = np.nansum(win, axis=(2, 3)) / (kernel[0] * kernel[1])
            else:
                out[:, :, oy, ox] = np.nanmean(win, axis=(2, 3))
    return out


def neuron(x, kind, a=None, b=None, c=None):
    x = x.astype(np.float64)
    erf = np.vectorize(math.erf)
    defaults = {"leaky_relu": (0.01, 0, 0), "hard_sigmoid": (0.2, 0.5, 0), "tanh": (1, 1, 0),
                "linear": (1, 0, 0), "elu": (1, 0, 0), "softplus": (1, 1, 0), "silu": (1, 0, 0),
                "relun": (0, 6, 0), "power": (0, 1, 2), "exponential": (1, 0, -1),
                "logarithm": (1, 0, -1)}
    da, db, dc = defaults.get(kind, (0, 0, 0))
    a = da if a is None else a
    b = db if b is None else b
    c = dc if c is None else c
    ln_c = 1.0 if c == -1 else np.log(c) if c > 0 else None
    return {
        "none": lambda: x,
        "relu": lambda: np.maximum(x, 0),
        "leaky_relu": lambda: np.where(x >= 0, x, a * x),
        "sigmoid": lambda: 1 / (1 + np.exp(-x)),
        "hard_sigmoid": lambda: np.clip(a * x + b, 0, 1),
        "tanh": lambda: a * np.tanh(b * x),
        "linear": lambda: a * x + b,
        "elu": lambda: np.where(x >= 0, x, a * np.expm1(x)),
        "softplus": lambda: a * np.logaddexp(0, b * x),
        "absolute": lambda: np.abs(x),
        "gelu": lambda: 0.5 * x * (1 + erf(x / np.sqrt(2))),
        "gelu_tanh": lambda: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
        "silu": lambda: x / (1 + np.exp(-a * x)),
        "hard_swish": lambda: x * np.clip(x + 3, 0, 6) / 6,
        "relun": lambda: np.minimum(np.where(x >= 0, x, a * x), b),
        "power": lambda: (a + b * x) ** c,
        "exponential": lambda: np.exp((a * x + b) * ln_c),
        "logarithm": lambda: np.log(a * x + b) / ln_c,
    }[kind]()


def softmax(x, log=False, groups=1):
    n, c, h, w = x.shape
    x = x.astype(np.float64).reshape(n, groups, c // groups, h, w)
    z = x - x.max(axis=2, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=2, keepdims=True))
    return (z - lse if log else np.exp(z - lse)).reshape(n, c, h, w)


def matrix_multiplication(left, right, groups=1, transpose_left=False, transpose_right=False):
    """Each image's channel groups as matrices (channels by pixels): left_g · right_g."""
    n = left.shape[0]
    a = left.astype(np.float64).reshape(n, groups, left.shape[1] // groups, -1)
    b = right.astype(np.float64).reshape(n, groups, right.shape[1] // groups, -1)
    a = a.transpose(0, 1, 3, 2) if transpose_left else a
    b = b.transpose(0, 1, 3, 2) if transpose_right else b
    h, w = (1, b.shape[3]) if transpose_right else right.shape[2:]
    return (a @ b).reshape(n, -1, h, w)


GATES = {"single_gate": 1, "lstm": 4, "gru": 3, "mgu": 2}


def rnn_layer(x, cell, W, U, bi=None, bh=None, P=None, reverse=False, reset_after=True, h0=None, c0=None,
              gate="sigmoid", act="tanh", out="tanh"):
    """One recurrent layer over time-major x (T, N, I), in float64. W: (G·H, I) or None for the
    unit input transform; U: (G·H, H); bi, bh: (G·H,) or None; P: peepholes (3, H) for i, f, o.
    Returns outputs (T, N, H), final h and final c (LSTM, else None)."""
    x = np.asarray(x, np.float64)
    T, N, _ = x.shape
    H = U.shape[1]
    G = GATES[cell]
    f64 = lambda v: None if v is None else np.asarray(v, np.float64)  # noqa: E731
    W, U, bi, bh, P = f64(W), f64(U), f64(bi), f64(bh), f64(P)
    sg = lambda v: neuron(v, gate)  # noqa: E731
    ac = lambda v: neuron(v, act)  # noqa: E731
    h = np.zeros((N, H)) if h0 is None else np.asarray(h0, np.float64)
    c = np.zeros((N, H)) if c0 is None else np.asarray(c0, np.float64)
    bi = np.zeros(G * H) if bi is None else bi
    bh = np.zeros(G * H) if bh is None else bh
    ys = np.zeros((T, N, H))
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        xin = np.tile(x[t], G) if W is None else x[t] @ W.T
        p = xin + bi
        blk = lambda v, k: v[..., k * H:(k + 1) * H]  # noqa: E731
        if cell == "single_gate":
            h = ac(p + h @ U.T + bh)
        elif cell == "lstm":
            r = h @ U.T + bh
            pi, pf, po = (np.zeros(H),) * 3 if P is None else P
            i = sg(blk(p + r, 0) + pi * c)
            f = sg(blk(p + r, 1) + pf * c)
            g = ac(blk(p + r, 2))
            c = f * c + i * g
            o = sg(blk(p + r, 3) + po * c)
            h = o * neuron(c, out)
        elif cell == "gru":
            r_ = sg(blk(p, 0) + h @ blk(U.T, 0) + blk(bh, 0))
            z = sg(blk(p, 1) + h @ blk(U.T, 1) + blk(bh, 1))
            if reset_after:
                n = ac(blk(p, 2) + r_ * (h @ blk(U.T, 2) + blk(bh, 2)))
            else:
                n = ac(blk(p, 2) + (r_ * h) @ blk(U.T, 2) + blk(bh, 2))
            h = (1 - z) * n + z * h
        else:  # mgu
            f = sg(blk(p, 0) + h @ blk(U.T, 0) + blk(bh, 0))
            n = ac(blk(p, 1) + (f * h) @ blk(U.T, 1) + blk(bh, 1))
            h = (1 - f) * h + f * n
        ys[t] = h
    return ys, h, (c if cell == "lstm" else None)
