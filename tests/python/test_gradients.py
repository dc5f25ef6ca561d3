"""Every gradient node against central finite differences of the float64 numpy reference."""

import numpy as np
import pytest
import reference as ref
from sources import FixedSource

import nngraph as ng


def numeric_grad(f, x, eps=1e-5):
    """d(f)/d(x) by central differences, f: float64 array -> float."""
    x = x.astype(np.float64).copy()
    g = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        old = x[i]
        x[i] = old + eps
        up = f(x)
        x[i] = old - eps
        down = f(x)
        x[i] = old
        g[i] = (up - down) / (2 * eps)
    return g


def input_gradient(node_factory, x, r, device):
    """dx from the gradient node of node_factory(source), for upstream gradient r."""
    src, dy = ng.ImageNode(label="x"), ng.ImageNode(label="dy")
    node = node_factory(src)
    grads = node.gradient_filters(dy)
    g = ng.Graph([gr.result_image for gr in grads], device=device)
    out = g.run({"x": x, "dy": r})
    return out if isinstance(out, list) else [out]


def check(got, want, rtol=2e-3, atol=2e-4):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


class Capture(FixedSource):
    """Fixed weights; records the weight gradients the graph hands to update()."""

    def __init__(self, w, b, stride=1, dilation=1, groups=1, neuron=None, label="capture"):
        super().__init__(w, b, label, ng.ConvolutionDescriptor(
            kernel=w.shape[2:], input_channels=w.shape[1] * groups, output_channels=w.shape[0], stride=stride,
            dilation=dilation, groups=groups, neuron=neuron))
        self.grads = None

    def update(self, gradient, weights):
        self.grads = gradient
        return None


CONV_CASES = [
    # c, o, h, w, kernel, stride, dilation, groups, padding
    (2, 3, 6, 5, (3, 3), 1, 1, 1, "same"),
    (4, 4, 7, 7, (3, 2), 2, 1, 2, "valid"),
    (1, 2, 7, 6, (2, 2), 1, 2, 1, "full"),
    (3, 2, 5, 5, (1, 1), 1, 1, 1, (1, 0, 0, 1)),
    (4, 6, 2, 23, (1, 5), (1, 5), 1, 2, "valid"),  # windows tile each row (1-D, 5:1); 3 columns unread
    (3, 5, 2, 23, (1, 5), (1, 5), 1, 1, "valid"),  # the same as one product (cuda)
]


@pytest.mark.parametrize("c,o,h,w,k,stride,dil,groups,padding", CONV_CASES)
def test_convolution_gradients(device, rng, c, o, h, w, k, stride, dil, groups, padding):
    x = rng.standard_normal((2, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((o, c // groups, *k)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    ds = Capture(wt, b, stride, dil, groups)
    st = stride if isinstance(stride, tuple) else (stride, stride)
    fwd = lambda xx, ww=wt, bb=b: ref.conv2d(xx, ww, bb, st, (dil, dil), groups, padding)  # noqa: E731
    r = rng.standard_normal(fwd(x).shape).astype(np.float32)
    [dx] = input_gradient(lambda s: ng.Convolution(s, ds, padding=padding), x, r, device)
    check(dx, numeric_grad(lambda v: (fwd(v) * r).sum(), x))
    dw, db = ds.grads
    check(dw, numeric_grad(lambda v: (fwd(x, v) * r).sum(), wt))
    check(db, numeric_grad(lambda v: (fwd(x, wt, v) * r).sum(), b))


def test_convolution_gradient_through_fused_descriptor_neuron(device, rng):
    x = rng.standard_normal((2, 2, 5, 5)).astype(np.float32)
    wt = rng.standard_normal((3, 2, 3, 3)).astype(np.float32) * 0.3
    b = rng.standard_normal(3).astype(np.float32) * 0.3
    ds = Capture(wt, b, neuron=ng.NeuronDescriptor("tanh", a=1.2, b=0.7))
    fwd = lambda xx, ww=wt: ref.neuron(ref.conv2d(xx, ww, b, padding="same"), "tanh", 1.2, 0.7)  # noqa: E731
    r = rng.standard_normal(fwd(x).shape).astype(np.float32)
    [dx] = input_gradient(lambda s: ng.Convolution(s, ds, padding="same"), x, r, device)
    check(dx, numeric_grad(lambda v: (fwd(v) * r).sum(), x))
    check(ds.grads[0], numeric_grad(lambda v: (fwd(x, v) * r).sum(), wt))


@pytest.mark.parametrize("batch", [1, 3])  # one image: products of a matrix and a vector
@pytest.mark.parametrize("flat", [False, True])
def test_fully_connected_gradients(device, rng, flat, batch):
    x = rng.standard_normal((batch, 2, 3, 4)).astype(np.float32)
    wt = rng.standard_normal((5, 24, 1, 1) if flat else (5, 2, 3, 4)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    ds = Capture(wt, b, neuron="sigmoid")
    fwd = lambda xx, ww=wt, bb=b: ref.neuron(ref.fully_connected(xx, ww, bb), "sigmoid")  # noqa: E731
    r = rng.standard_normal((batch, 5, 1, 1)).astype(np.float32)
    [dx] = input_gradient(lambda s: ng.FullyConnected(s, ds), x, r, device)
    check(dx, numeric_grad(lambda v: (fwd(v) * r).sum(), x))
    check(ds.grads[0], numeric_grad(lambda v: (fwd(x, v) * r).sum(), wt))
    check(ds.grads[1], numeric_grad(lambda v: (fwd(x, wt, v) * r).sum(), b))


@pytest.mark.parametrize("mode", ["max", "average"])
@pytest.mark.parametrize("kernel,stride,padding,include", [
    ((2, 2), None, "valid", False), ((3, 3), (2, 2), "same", False),
    ((3, 2), (1, 1), (1, 1, 1, 0), True), ((2, 3), (2, 1), "full", False)])
def test_pooling_gradients(device, rng, mode, kernel, stride, padding, include):
    shape = (2, 2, 6, 7)
    # distinct, well separated values keep the max stable under the finite-difference step
    x = (rng.permutation(np.prod(shape)).reshape(shape) * 0.01).astype(np.float32)
    fwd = lambda v: ref.pooling(v, mode, kernel, stride or kernel, padding, include)  # noqa: E731
    r = rng.standard_normal(fwd(x).shape).astype(np.float32)
    [dx] = input_gradient(lambda s: ng.Pooling(s, mode, kernel=kernel, stride=stride, padding=padding,
                                               count_include_pad=include), x, r, device)
    check(dx, numeric_grad(lambda v: (fwd(v) * r).sum(), x))


NEURONS = [("relu", None, None, None), ("leaky_relu", 0.2, None, None), ("sigmoid", None, None, None),
           ("hard_sigmoid", None, None, None), ("tanh", 1.5, 0.8, None), ("linear", 2.0, 0.5, None),
           ("elu", 0.7, None, None), ("softplus", 1.5, 2.0, None), ("absolute", None, None, None),
           ("gelu", None, None, None), ("gelu_tanh", None, None, None), ("silu", None, None, None),
           ("silu", 1.7, None, None), ("hard_swish", None, None, None), ("relun", 0.1, 1.5, None),
           ("power", 2.0, 1.0, 3.0), ("power", 3.0, 1.0, 0.5), ("exponential", 0.7, 0.2, 2.0),
           ("exponential", None, None, None), ("logarithm", 1.0, 4.0, 10.0), ("logarithm", 2.0, 5.0, None),
           # a < 0: y's sign no longer tells x's
           ("leaky_relu", -0.5, None, None), ("elu", -0.5, None, None), ("relun", -0.3, 2.0, None)]


@pytest.mark.parametrize("kind,a,b,c", NEURONS)
def test_neuron_gradients(device, rng, kind, a, b, c):
    x = rng.standard_normal((2, 3, 4, 5))
    x = np.where(np.abs(x) < 0.05, 0.3, x)  # away from kinks at 0
    if kind == "hard_sigmoid":  # and from the clamps at ±2.5
        x = np.where(np.abs(np.abs(x) - 2.5) < 0.05, 1.0, x)
    if kind == "relun":  # and from the clamp at b
        x = np.where(np.abs(x - b) < 0.05, 1.0, x)
    x = x.astype(np.float32)
    r = rng.standard_normal(x.shape).astype(np.float32)
    [dx] = input_gradient(lambda s: ng.Neuron(s, kind, a=a, b=b, c=c), x, r, device)
    check(dx, numeric_grad(lambda v: (ref.neuron(v, kind, a, b, c) * r).sum(), x))


@pytest.mark.parametrize("kind,folds", [("relu", True), ("sigmoid", True), ("absolute", False)])
@pytest.mark.parametrize("mode,kernel", [("max", (2, 2)), ("max", (3, 3)), ("average", (3, 3))])
def test_neuron_gradient_folds_into_pooling_gradient(device, rng, kind, folds, mode, kernel):
    """neuron → pooling: the neuron's gradient runs inside the pooling gradient when it works
    from the neuron's output (absolute's works from its input, so it stays a step). Max
    windows keep their winners in the forward step, which the gradient then reads (with the
    pooled value for the neuron's derivative) instead of the neuron's output."""
    x = rng.standard_normal((2, 3, 7, 6))  # 3×3 windows at stride 2 overlap; 2×2 leave an edge
    x = (x + 0.05 * np.sign(x)).astype(np.float32)  # away from 0, values distinct: no max ties
    fwd = lambda v: ref.pooling(ref.neuron(v, kind), mode, kernel, (2, 2))  # noqa: E731
    r = rng.standard_normal(fwd(x).shape).astype(np.float32)
    src, dy = ng.ImageNode(shape=x.shape[1:], label="x"), ng.ImageNode(shape=r.shape[1:], label="dy")
    neuron = ng.Neuron(src, kind, label="act")
    pool = ng.Pooling(neuron, mode, kernel=kernel, stride=2, label="pool")
    [dp] = pool.gradient_filters(dy)
    [dx] = neuron.gradient_filters(dp.result_image)
    g = ng.Graph([dx.result_image], device=device)
    want = ["pool_gradient+" + kind] if folds else ["pool_gradient", "act_gradient"]
    assert g.memory_plan(2)["steps"] == ["act"] + ["pool"] * (mode == "max") + want
    check(g.run({"x": x, "dy": r}), numeric_grad(lambda v: (fwd(v) * r).sum(), x))


@pytest.mark.parametrize("log", [False, True])
def test_softmax_gradients(device, rng, log):
    x = rng.standard_normal((2, 5, 2, 3)).astype(np.float32)
    r = rng.standard_normal(x.shape).astype(np.float32)
    [dx] = input_gradient(lambda s: ng.LogSoftMax(s) if log else ng.SoftMax(s), x, r, device)
    check(dx, numeric_grad(lambda v: (ref.softmax(v, log) * r).sum(), x))


def test_addition_and_concatenation_gradients(device, rng):
    r = rng.standard_normal((2, 5, 3, 3)).astype(np.float32)
    a, b, dy = ng.ImageNode(label="a"), ng.ImageNode(label="b"), ng.ImageNode(label="dy")
    cat = ng.Concatenation([a, b])
    ga, gb = cat.gradient_filters(dy)
    out = ng.Graph([ga.result_image, gb.result_image], device=device).run(
        {"a": np.ones((2, 2, 3, 3), np.float32), "b": np.ones((2, 3, 3, 3), np.float32), "dy": r})
    np.testing.assert_array_equal(out[0], r[:, :2])
    np.testing.assert_array_equal(out[1], r[:, 2:])
    add = ng.Addition(a, b)
    with pytest.raises(ValueError, match="gradient_filters"):
        add.gradient_filter(dy)
    ga, gb = add.gradient_filters(dy)
    g = ng.Graph([ga.result_image, gb.result_image], device=device)
    # Each addend's gradient is dy itself (no kernel runs); it reads the addend's shape alone.
    assert [s.label for s in g.source_image_handles] == ["dy", "a", "b"]
    ones = np.ones((2, 5, 3, 3), np.float32)
    out = g.run({"dy": r, "a": ones, "b": ones})
    np.testing.assert_array_equal(out[0], r)
    np.testing.assert_array_equal(out[1], r)
    assert g.memory_plan(2)["steps"] == []


def test_dropout_mask_is_shared_by_forward_and_gradient(device, rng):
    x = (rng.random((4, 8, 10, 10)) + 0.5).astype(np.float32)
    r = rng.standard_normal(x.shape).astype(np.float32)
    src, dy = ng.ImageNode(label="x"), ng.ImageNode(label="dy")
    drop = ng.Dropout(src, keep_probability=0.7, seed=11)
    g = ng.Graph([drop.result_image, drop.gradient_filter(dy).result_image], device=device)
    y, dx = g.run({"x": x, "dy": r})
    kept = y != 0
    assert abs(kept.mean() - 0.7) < 0.02
    np.testing.assert_allclose(y[kept], x[kept] / 0.7, rtol=1e-6)
    np.testing.assert_allclose(dx, np.where(kept, r / 0.7, 0), rtol=1e-6)
    y2, _ = g.run({"x": x, "dy": r})
    assert (y2 != 0).mean() > 0.65 and not np.array_equal(y2 != 0, kept)  # a new mask per step


def test_gradient_of_a_network_through_training_graph(device, rng):
    """conv → relu → max-pool → fc, softmax cross-entropy: weight gradients of the whole graph."""
    x = rng.standard_normal((3, 1, 6, 6)).astype(np.float32)
    labels = np.array([0, 2, 1])
    w1 = (rng.standard_normal((2, 1, 3, 3)) * 0.5).astype(np.float32)
    b1 = (rng.standard_normal(2) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((3, 2, 3, 3)) * 0.5).astype(np.float32)
    b2 = (rng.standard_normal(3) * 0.1).astype(np.float32)
    c1, c2 = Capture(w1, b1), Capture(w2, b2)
    h = ng.Pooling(ng.Neuron(ng.Convolution(ng.ImageNode(), c1, padding="same"), "relu"))
    loss = ng.Loss(ng.FullyConnected(h, c2), ng.LossDescriptor("softmax_cross_entropy", "mean"))
    g = loss.training_graph(device=device)
    g.run(x, labels=labels)
    onehot = np.eye(3)[labels]

    def total(ww1=w1, ww2=w2):
        a = ref.pooling(np.maximum(ref.conv2d(x, ww1, b1, padding="same"), 0), "max", (2, 2), (2, 2))
        z = ref.fully_connected(a, ww2, b2).reshape(3, 3)
        return float(-(onehot * (z - np.log(np.exp(z).sum(1, keepdims=True)))).sum(1).mean())

    check(c2.grads[0], numeric_grad(lambda v: total(ww2=v), w2))
    check(c1.grads[0], numeric_grad(lambda v: total(ww1=v), w1))


def test_gradient_nodes_have_no_gradients():
    dy = ng.ImageNode()
    grad = ng.Neuron(ng.ImageNode(), "relu").gradient_filter(dy)
    with pytest.raises(NotImplementedError, match="second order"):
        grad.gradient_filter(ng.ImageNode())


def test_negative_slope_gradients_come_from_the_input(device):
    """leaky_relu and elu with a < 0 turn negative inputs positive: dx must follow x's sign."""
    x = np.array([-2, -1, 1, 2], np.float32).reshape(1, 4, 1, 1)
    dy = np.ones_like(x)
    [dx] = input_gradient(lambda s: ng.Neuron(s, "leaky_relu", a=-0.5), x, dy, device)
    np.testing.assert_allclose(dx.ravel(), [-0.5, -0.5, 1, 1])
    [dx] = input_gradient(lambda s: ng.Neuron(s, "elu", a=-0.5), x, dy, device)
    np.testing.assert_allclose(dx.ravel(), [-0.5 * np.exp(-2), -0.5 * np.exp(-1), 1, 1], rtol=1e-5)


@pytest.mark.parametrize("readers, after", [(3, None), (9, None), (4, "sigmoid"), (3, "sigmoid")])
def test_a_result_read_by_several_nodes_sums_their_gradients_in_one_pass(device, rng, readers, after):
    """A convolution's result (or a neuron's after it) read by three or more nodes receives the
    sum of their gradients in one step (nine: more than one cuda launch of eight), which takes a
    neuron's gradient in the same pass. The convolution's weight gradient is that of finite
    differences."""
    w = (rng.standard_normal((4, 3, 1, 1)) * 0.5).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    target = rng.standard_normal((2, 4 * readers, 4, 5)).astype(np.float32)
    kinds = ["tanh", "softplus", "relu"]
    cap = Capture(w, b, label="conv")
    shared = ng.Convolution(ng.ImageNode(label="x"), cap, label="conv")
    if after:
        shared = ng.Neuron(shared, after, label="shared")
    branches = [ng.Neuron(shared, kinds[i % 3], label=f"branch{i}") for i in range(readers)]
    loss = ng.Loss(ng.Concatenation(branches), ng.LossDescriptor("mean_squared_error", "sum"))
    g = loss.training_graph(device=device)
    g.run(x, labels=target)
    steps = g.memory_plan(2)["steps"]
    sums = [s for s in steps if "gradient_sum" in s]
    assert sums == [f"shared_gradient_sum+{after}" if after else "conv_gradient_sum"], steps
    assert not any(s.endswith(f"{after}_gradient") for s in steps), steps  # no pass of the neuron's own

    def total(wv):
        y = np.einsum("oc,nchw->nohw", wv[:, :, 0, 0], x.astype(np.float64)) + b[None, :, None, None]
        if after:
            y = ref.neuron(y, after)
        z = np.concatenate([ref.neuron(y, kinds[i % 3]) for i in range(readers)], axis=1)
        return ((z - target) ** 2).sum()

    check(cap.grads[0], numeric_grad(total, w), rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("readers, channels", [(3, 5), (11, 8)])
def test_half_gradient_sums_in_one_pass_match_float32(device, rng, readers, channels):
    """bfloat16 channels-last: the one-pass sum gives the weight gradient of the float32 graph
    within bfloat16's rounding; on cuda value by value (150 values a gradient) and in 16-byte packs
    (240), eleven sources in two launches."""
    w = (rng.standard_normal((channels, 8, 1, 1)) * 0.3).astype(np.float32)
    b = rng.standard_normal(channels).astype(np.float32)
    x = rng.standard_normal((2, 8, 3, 5)).astype(np.float32)
    target = rng.standard_normal((2, channels * readers, 3, 5)).astype(np.float32)
    grads = []
    for fmt in ("float32", "bfloat16"):
        cap = Capture(w, b, label="conv")
        shared = ng.Convolution(ng.ImageNode(label="x"), cap, label="conv")
        branches = [ng.Neuron(shared, ("tanh", "softplus")[i % 2]) for i in range(readers)]
        loss = ng.Loss(ng.Concatenation(branches), ng.LossDescriptor("mean_squared_error", "sum"))
        g = loss.training_graph(device=device, format=fmt, layout="NHWC")
        g.run(x, labels=target)
        assert [s for s in g.memory_plan(2)["steps"] if "gradient_sum" in s] == ["conv_gradient_sum"]
        grads.append(np.asarray(cap.grads[0], np.float32))
    np.testing.assert_allclose(grads[1], grads[0], rtol=3e-2, atol=3e-2 * float(np.abs(grads[0]).max()))


def sibling_network(rng, widths, frozen=()):
    """x → 3×3 convolution → tanh (18 channels: more than a convolution whose neuron's input is
    computed again takes), read by 1×1 convolutions of these widths (each then tanh; those
    in `frozen` without an update) and by a 3×3 max pooling, all concatenated; with its weights,
    input and target, and the float64 loss of given weights."""
    w0 = (rng.standard_normal((18, 3, 3, 3)) * 0.4).astype(np.float32)
    b0 = rng.standard_normal(18).astype(np.float32)
    ws = [(rng.standard_normal((k, 18, 1, 1)) * 0.4).astype(np.float32) for k in widths]
    bs = [rng.standard_normal(k).astype(np.float32) for k in widths]
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    target = rng.standard_normal((2, sum(widths) + 18, 5, 4)).astype(np.float32)
    stem = FixedSource(w0, b0, "stem") if "stem" in frozen else Capture(w0, b0, label="stem")
    shared = ng.Neuron(ng.Convolution(ng.ImageNode(label="x"), stem, padding="same", label="stem"), "tanh",
                       label="shared")
    sources = [FixedSource(w, b, f"b{i}") if i in frozen else Capture(w, b, label=f"b{i}")
               for i, (w, b) in enumerate(zip(ws, bs))]
    branches = [ng.Neuron(ng.Convolution(shared, c, label=f"b{i}"), "tanh") for i, c in enumerate(sources)]
    branches.append(ng.Pooling(shared, "max", 3, 1, padding="same", label="pool"))
    loss = ng.Loss(ng.Concatenation(branches), ng.LossDescriptor("mean_squared_error", "sum"))

    def total(w0v=w0, changed=None, wv=None, bv=None):
        y = np.tanh(ref.conv2d(x.astype(np.float64), w0v, b0, padding="same"))
        outs = [np.tanh(np.einsum("oc,nchw->nohw", (w if i != changed or wv is None else wv)[:, :, 0, 0], y)
                        + (b if i != changed or bv is None else bv)[None, :, None, None])
                for i, (w, b) in enumerate(zip(ws, bs))]
        outs.append(ref.pooling(y, "max", (3, 3), (1, 1), padding="same"))
        return ((np.concatenate(outs, 1) - target) ** 2).sum()

    return loss, stem, sources, ws, w0, x, target, total


@pytest.mark.parametrize("frozen", [(), (1,), ("stem",)])
def test_sibling_pointwise_convolutions_take_stacked_gradients(device, rng, frozen):
    """1×1 convolutions reading one image give its gradient as one product over their stacked
    weights and dY (no sum of their own input gradients: one addition, of the pooling's), and
    their weight gradients as one product over X; the stem's and every 1×1 convolution's weight
    gradients are those of finite differences, a frozen sibling's weights taking part all the
    same, and with the stem frozen (X's gradient unneeded) the stacked step still runs for them."""
    loss, stem, sources, ws, w0, x, target, total = sibling_network(rng, (4, 3, 5), frozen)
    g = loss.training_graph(device=device)
    g.run(x, labels=target)
    steps = g.memory_plan(2)["steps"]
    want = ["shared_stacked_dy", "shared_stacked_gradient"]
    assert [s for s in steps if "stacked" in s or "gradient_sum" in s] == want + (
        [] if "stem" in frozen else ["shared_gradient_sum+tanh"]), steps
    if "stem" not in frozen:
        check(stem.grads[0], numeric_grad(lambda v: total(w0v=v), w0), rtol=5e-3, atol=5e-3)
    for i, c in enumerate(sources):
        if i not in frozen:
            check(c.grads[0], numeric_grad(lambda v, i=i: total(changed=i, wv=v), ws[i]), rtol=5e-3, atol=5e-3)
            check(c.grads[1], numeric_grad(lambda v, i=i: total(changed=i, bv=v), c.b), rtol=5e-3, atol=5e-3)


def test_stacked_gradients_in_half_storage_match_float32(device, rng):
    """bfloat16 channels-last: the stacked products over the siblings' half copies give the
    stem's and the siblings' weight gradients of the float32 graph within bfloat16's rounding."""
    grads = []
    for fmt in ("float32", "bfloat16"):
        loss, stem, sources, *_, x, target, _ = sibling_network(np.random.default_rng(5), (8, 16, 8))
        g = loss.training_graph(device=device, format=fmt, layout="NHWC")
        g.run(x, labels=target)
        assert "shared_stacked_gradient" in g.memory_plan(2)["steps"]
        grads.append([np.asarray(c.grads[0], np.float32) for c in [stem, *sources]])
    for half, full in zip(*grads):
        np.testing.assert_allclose(half, full, rtol=3e-2, atol=3e-2 * float(np.abs(full).max()))


def test_negative_slope_neuron_after_convolution_trains_correctly(device, rng):
    """A training graph keeps such a neuron as its own forward step (its gradient needs the
    input), which the convolution's gradient reads to apply the neuron's gradient in its own
    pass, and gets the weight gradient of finite differences; a fused descriptor neuron of that
    kind cannot train and says so."""
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    x = rng.standard_normal((2, 2, 5, 5)).astype(np.float32)
    target = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    cap = Capture(w, b)
    out = ng.Neuron(ng.Convolution(ng.ImageNode(label="x"), cap), "leaky_relu", a=-0.5)
    loss = ng.Loss(out, ng.LossDescriptor("mean_squared_error", "sum"))
    g = loss.training_graph(device=device)
    g.run(x, labels=target)
    steps = g.memory_plan(2)["steps"]
    assert "leaky_relu" in steps and not any(s.endswith("relu_gradient") for s in steps)
    assert [s for s in steps if "+leaky_relu" in s] == [f"{cap.label()}_gradient+leaky_relu"]

    def total(wv):
        y = ref.conv2d(x.astype(np.float64), wv, b)
        y = np.where(y >= 0, y, -0.5 * y)
        return ((y - target) ** 2).sum()

    check(cap.grads[0], numeric_grad(total, w), rtol=5e-3, atol=5e-3)
    fused = ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 2, 3, neuron=ng.NeuronDescriptor("leaky_relu", a=-0.5)))
    bad = ng.Loss(ng.Convolution(ng.ImageNode(), fused), ng.LossDescriptor("mean_squared_error"))
    with pytest.raises(ng.UnsupportedError, match="leaky_relu neuron .*has no gradient from its output"):
        bad.training_graph(optimizer=ng.SGD())


@pytest.mark.parametrize("layer", ["few_taps", "convolution", "fully_connected"])
@pytest.mark.parametrize("frozen", [False, True])
def test_gelu_gradient_taken_by_the_layer_before(device, rng, layer, frozen):
    """A GELU after a convolution or fully connected layer (its derivative needs its input): the
    layer's gradient reads the layer's result and applies GELU' as it reads dY, one pass where
    there were two, and no GELU gradient step is left. A convolution of few taps (2×2 over 3
    channels: 12) instead takes the GELU into its own forward pass and its gradient computes
    the GELU's input again from x. With the first layer's weights frozen (the speed run's
    whitening) only its bias sums run. Gradients equal finite differences."""
    x = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    if layer != "fully_connected":
        k = 2 if layer == "few_taps" else 3
        w1 = rng.standard_normal((4, 3, k, k)).astype(np.float32) / k
        w2 = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
        target = rng.standard_normal((2, 2, 6 - k, 6 - k)).astype(np.float32)
        make = lambda src, s: ng.Convolution(src, s, padding="same" if s.label() == "second" else "valid")  # noqa: E731
        forward = lambda v, a, b, c: ref.conv2d(ref.neuron(ref.conv2d(v, a, b), "gelu"), c, None, padding="same")  # noqa: E731,E501
    else:
        w1 = rng.standard_normal((4, 3, 5, 5)).astype(np.float32) / 5
        w2 = rng.standard_normal((2, 4, 1, 1)).astype(np.float32)
        target = rng.standard_normal((2, 2, 1, 1)).astype(np.float32)
        make = lambda src, s: ng.FullyConnected(src, s)  # noqa: E731
        forward = lambda v, a, b, c: ref.fully_connected(ref.neuron(ref.fully_connected(v, a, b), "gelu"), c, None)  # noqa: E731,E501
    b1 = rng.standard_normal(4).astype(np.float32)
    first = ng.ArrayDataSource(ng.ConvolutionDescriptor(tuple(w1.shape[2:]), 3, 4), w1, b1, "first",
                               frozen=["weights"] if frozen else [])
    second = Capture(w2, None, label="second")
    out = make(ng.Neuron(make(ng.ImageNode(label="x"), first), "gelu", label="act"), second)
    g = ng.Loss(out, ng.LossDescriptor("mean_squared_error", "sum")).training_graph(
        device=device, optimizer=ng.SGD(learning_rate=1.0))
    g.run(x, labels=target)
    steps = g.memory_plan(2)["steps"]
    assert "first_gradient+gelu" in steps and not any("act_gradient" in s for s in steps)
    if layer == "few_taps":
        assert "first+gelu" in steps and "act" not in steps
    else:
        assert "act" in steps

    def total(a, b, c):
        return ((forward(x.astype(np.float64), a, b, c) - target) ** 2).sum()

    check(second.grads[0], numeric_grad(lambda c: total(w1, b1, c), w2), rtol=5e-3, atol=5e-3)
    check(b1 - first.tensor("biases"), numeric_grad(lambda b: total(w1, b, w2), b1), rtol=5e-3, atol=5e-3)
    dw = numeric_grad(lambda a: total(a, b1, w2), w1)
    if frozen:
        np.testing.assert_array_equal(first.tensor("weights"), w1)
    else:
        check(w1 - first.tensor("weights"), dw, rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("fmt", ["float32", "bfloat16"])
def test_gelu_folded_into_a_few_tap_convolution_passes_its_input_gradient_on(device, rng, fmt):
    """A 2×2 convolution over 3 channels with GELU folded into it, inside a network: its gradient
    computes the GELU's input again and still gives the layer before its input gradient, in
    either layout and in half storage. Gradients equal finite differences."""
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w0 = rng.standard_normal((3, 3, 1, 1)).astype(np.float32)
    w1 = rng.standard_normal((4, 3, 2, 2)).astype(np.float32) / 2
    b1 = rng.standard_normal(4).astype(np.float32)
    target = rng.standard_normal((2, 4, 5, 5)).astype(np.float32)
    zeroth = Capture(w0, None, label="zeroth")
    first = Capture(w1, b1, label="first")
    out = ng.Neuron(ng.Convolution(ng.Convolution(ng.ImageNode(label="x"), zeroth), first), "gelu", label="act")
    g = ng.Loss(out, ng.LossDescriptor("mean_squared_error", "sum")).training_graph(
        device=device, optimizer=ng.SGD(learning_rate=1.0), format=fmt)
    g.run(x, labels=target)
    assert "first+gelu" in g.memory_plan(2)["steps"]

    def total(a, b, c):
        h = ref.neuron(ref.conv2d(ref.conv2d(x.astype(np.float64), a, None), b, c), "gelu")
        return ((h - target) ** 2).sum()

    for got, want in ((zeroth.grads[0], numeric_grad(lambda a: total(a, w1, b1), w0)),
                      (first.grads[0], numeric_grad(lambda b: total(w0, b, b1), w1)),
                      (first.grads[1], numeric_grad(lambda c: total(w0, w1, c), b1))):
        # bfloat16 keeps 8 bits of each stored value: a sum's error scales with its largest terms
        scale = 5e-3 if fmt == "float32" else 1e-2 * np.abs(want).max()
        check(got, want, rtol=5e-3 if fmt == "float32" else 3e-2, atol=scale)
