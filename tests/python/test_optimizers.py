"""Every optimizer for several steps against a numpy implementation of its update rule."""

import numpy as np
import pytest

import nngraph as ng


def numpy_step(kind, p, w, g, state, t):
    g = g * p.get("gradient_rescale", 1.0)
    if "clip_min" in p or "clip_max" in p:
        g = np.clip(g, p.get("clip_min", -np.inf), p.get("clip_max", np.inf))
    if p.get("regularization") == "l2":
        g = g + p["regularization_scale"] * w
    if p.get("regularization") == "l1":
        g = g + p["regularization_scale"] * np.sign(w)
    lr = p["learning_rate"]
    w = w * (1 - lr * p.get("weight_decay", 0.0))  # decoupled, after the gradient saw w
    if kind == "sgd":
        mu = p.get("momentum", 0.0)
        if mu == 0:
            return w - lr * g
        state["v"] = mu * state.get("v", 0) + g
        return w - lr * (g + mu * state["v"] if p.get("nesterov") else state["v"])
    if kind == "adam":
        b1, b2, eps = p.get("beta1", 0.9), p.get("beta2", 0.999), p.get("epsilon", 1e-8)
        state["m"] = b1 * state.get("m", 0) + (1 - b1) * g
        state["v"] = b2 * state.get("v", 0) + (1 - b2) * g * g
        v = state["v"]
        if p.get("amsgrad"):
            v = state["vmax"] = np.maximum(state.get("vmax", 0), state["v"])
        return w - lr * (state["m"] / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    rho, eps = p.get("decay", 0.9), p.get("epsilon", 1e-8)
    state["s"] = rho * state.get("s", 0) + (1 - rho) * g * g
    return w - lr * g / (np.sqrt(state["s"]) + eps)


CASES = [
    ("sgd", {"learning_rate": 0.05}),
    ("sgd", {"learning_rate": 0.02, "momentum": 0.9}),
    ("sgd", {"learning_rate": 0.02, "momentum": 0.8, "nesterov": True, "regularization": "l2",
             "regularization_scale": 0.01}),
    ("sgd", {"learning_rate": 0.05, "gradient_rescale": 0.5, "clip_min": -0.3, "clip_max": 0.2,
             "regularization": "l1", "regularization_scale": 0.02}),
    ("adam", {"learning_rate": 0.01}),
    ("adam", {"learning_rate": 0.01, "beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6, "amsgrad": True}),
    ("rmsprop", {"learning_rate": 0.01, "decay": 0.95}),
    ("sgd", {"learning_rate": 0.02, "momentum": 0.9, "nesterov": True, "weight_decay": 0.5}),
    ("adam", {"learning_rate": 0.01, "weight_decay": 0.2, "lookahead_steps": 2, "lookahead_alpha": 0.6}),
    ("sgd", {"learning_rate": 0.05, "lookahead_steps": 3, "lookahead_alpha": 0.3}),
    ("adam", {"learning_rate": 0.01, "amsgrad": True, "lookahead_steps": 2}),
    ("rmsprop", {"learning_rate": 0.01, "lookahead_steps": 1, "lookahead_alpha": 0.8}),
    ("sgd", {"learning_rate": 0.05, "momentum": 0.9, "nesterov": True, "ema_decay": 0.8}),
    ("adam", {"learning_rate": 0.01, "amsgrad": True, "lookahead_steps": 2, "ema_decay": 0.6}),
]


def lookahead(p, t, w, slow):
    """Every k-th step the slow weights move alpha toward the fast ones, which restart there."""
    k = p.get("lookahead_steps", 0)
    if not k or t % k:
        return w, slow
    slow = slow + p.get("lookahead_alpha", 0.5) * (w - slow)
    return slow, slow
MAKERS = {"sgd": ng.SGD, "adam": ng.Adam, "rmsprop": ng.RMSProp}


def linear_setup(rng, optimizer, device):
    """One fully connected layer under a summed squared error: gradients are easy in numpy."""
    x = rng.standard_normal((6, 5, 1, 1)).astype(np.float32)
    target = rng.standard_normal((6, 3)).astype(np.float32)
    w0 = rng.standard_normal((3, 5, 1, 1)).astype(np.float32) * 0.5
    b0 = rng.standard_normal(3).astype(np.float32) * 0.1
    ds = ng.ArrayDataSource(ng.ConvolutionDescriptor(1, 5, 3), w0, b0, "fc", optimizer=optimizer)
    loss = ng.Loss(ng.FullyConnected(ng.ImageNode(), ds), ng.LossDescriptor("mean_squared_error", "sum"))
    return x, target, w0, b0, ds, loss.training_graph(device=device)


def numpy_grads(x, target, w, b):
    xf = x.reshape(len(x), -1).astype(np.float64)
    dz = 2 * (xf @ w.reshape(3, -1).T + b - target)
    return (dz.T @ xf).reshape(w.shape), dz.sum(0)


@pytest.mark.parametrize("kind,params", CASES)
def test_builtin_optimizer_matches_numpy(device, rng, kind, params):
    opt = MAKERS[kind](**params)
    x, target, w, b, ds, g = linear_setup(rng, opt, device)
    w, b = w.astype(np.float64), b.astype(np.float64)
    sw, sb = {}, {}
    slow_w, slow_b = avg_w, avg_b = w, b
    for t in range(1, 6):
        if t == 4:  # the learning rate (and lookahead's alpha, the average's decay) may change between steps
            opt.learning_rate = params["learning_rate"] * 0.5
            params = {**params, "learning_rate": params["learning_rate"] * 0.5}
            if "lookahead_steps" in params:
                opt.lookahead_alpha = params["lookahead_alpha"] = 0.25
            if "ema_decay" in params:
                opt.ema_decay = params["ema_decay"] = 0.5
        g.run(x, labels=target.reshape(6, 3, 1, 1))
        gw, gb = numpy_grads(x, target, w, b)
        w, b = numpy_step(kind, params, w, gw, sw, t), numpy_step(kind, params, b, gb, sb, t)
        w, slow_w = lookahead(params, t, w, slow_w)
        b, slow_b = lookahead(params, t, b, slow_b)
        decay = params.get("ema_decay", 0.0)  # the average starts from the weights
        avg_w, avg_b = decay * avg_w + (1 - decay) * w, decay * avg_b + (1 - decay) * b
    np.testing.assert_allclose(ds.weights(), w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ds.biases(), b, rtol=1e-4, atol=1e-5)
    state = ds.optimizer_state()
    assert state["step"] == 5
    k = opt.slot_count()
    assert k == {"sgd": params.get("momentum", 0) > 0, "adam": 2 + params.get("amsgrad", False), "rmsprop": 1}[kind] + \
        ("lookahead_steps" in params) + ("ema_decay" in params)
    if "lookahead_steps" in params:  # its state: the slow weights less the fast ones
        at = k - 1 - ("ema_decay" in params)
        np.testing.assert_allclose(state["slots"][at], (slow_w - w).ravel(), rtol=1e-3, atol=1e-5)
        np.testing.assert_allclose(state["slots"][k + at], slow_b - b, rtol=1e-3, atol=1e-5)
    if "ema_decay" not in params:
        return
    # The average's state is the average less the weights; swapping exchanges the two, and
    # swapping again restores the weights (to the last bit where the two lie within a factor 2).
    np.testing.assert_allclose(state["slots"][k - 1], (avg_w - w).ravel(), rtol=1e-3, atol=1e-5)
    trained_w, trained_b = ds.weights().copy(), ds.biases().copy()
    ds.swap_average()
    np.testing.assert_allclose(ds.weights(), avg_w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ds.biases(), avg_b, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ds.optimizer_state()["slots"][k - 1], (w - avg_w).ravel(), rtol=1e-3, atol=1e-5)
    ds.swap_average()
    np.testing.assert_allclose(ds.weights(), trained_w, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ds.biases(), trained_b, rtol=1e-6, atol=1e-7)


class SignSGD(ng.Optimizer):
    """A custom optimizer: w ← w − lr·sign(g); slot 0 counts updates."""

    def __init__(self):
        super().__init__(learning_rate=0.05)

    def slot_count(self):
        return 1

    def update(self, values, gradient, slots, step):
        slots[0] += 1
        values -= self.learning_rate * np.sign(gradient)


def test_custom_python_optimizer(device, rng):
    x, target, w, b, ds, g = linear_setup(rng, SignSGD(), device)
    w, b = w.astype(np.float64), b.astype(np.float64)
    for _ in range(3):
        g.run(x, labels=target.reshape(6, 3, 1, 1))
        gw, gb = numpy_grads(x, target, w, b)
        w, b = w - 0.05 * np.sign(gw), b - 0.05 * np.sign(gb)
    np.testing.assert_allclose(ds.weights(), w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ds.biases(), b, rtol=1e-5, atol=1e-6)
    state = ds.optimizer_state()
    assert state["step"] == 3 and np.all(state["slots"][0] == 3)


def test_optimizer_arguments_are_checked():
    with pytest.raises(ValueError, match="momentum"):
        ng.SGD(momentum=1.5)
    with pytest.raises(ValueError, match="nesterov needs momentum"):
        ng.SGD(nesterov=True)
    with pytest.raises(ValueError, match="beta1"):
        ng.Adam(beta1=1.0)
    with pytest.raises(ValueError, match="regularization must be"):
        ng.SGD(regularization="l3")
    with pytest.raises(ValueError, match="exceeds"):
        ng.SGD(clip_min=1.0, clip_max=-1.0)
    with pytest.raises(ValueError, match="weight_decay"):
        ng.SGD(weight_decay=-0.1)
    with pytest.raises(ValueError, match="lookahead_steps"):
        ng.Adam(lookahead_steps=-1)
    opt = ng.Adam(lookahead_steps=5)
    assert opt.lookahead_steps == 5 and opt.lookahead_alpha == 0.5 and opt.slot_count() == 3
    with pytest.raises(ValueError, match="learning_rate"):
        opt.learning_rate = -1.0
    with pytest.raises(ValueError, match="lookahead_alpha"):
        opt.lookahead_alpha = 1.5
    assert opt.lookahead_alpha == 0.5
    with pytest.raises(ValueError, match="ema_decay"):
        ng.SGD(ema_decay=1.0)
    assert opt.ema_decay == 0.0
    with pytest.raises(ValueError, match="ema_decay cannot turn the average on"):
        opt.ema_decay = 0.9
    opt = ng.SGD(momentum=0.9, ema_decay=0.99)
    assert opt.slot_count() == 2
    with pytest.raises(ValueError, match="ema_decay cannot turn the average on or off"):
        opt.ema_decay = 0.0
    with pytest.raises(ValueError, match="ema_decay"):
        opt.ema_decay = -0.5
    assert opt.ema_decay == pytest.approx(0.99)
