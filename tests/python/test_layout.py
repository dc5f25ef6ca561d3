"""Channels-last graphs (layout="NHWC"): every node kind gives what the NCHW graph gives, on
every backend, whether it reads NHWC images itself or the graph hands it NCHW copies."""

import numpy as np
import pytest
import reference as ref
from conftest import DEVICES, GPUS
from test_conformance import CASES, TRAINABLE, run, training_step

import nngraph as ng
from nngraph.models import residual_network


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", sorted(CASES))
def test_forward_and_gradients_match_the_nchw_graph(kind, device):
    want = run(kind, device, layout="NCHW")
    got = run(kind, device, layout="NHWC")
    assert len(got) == len(want)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", sorted(TRAINABLE))
def test_a_training_step_matches_the_nchw_graph(kind, device):
    _, want = training_step(kind, device, layout="NCHW")
    _, got = training_step(kind, device, layout="NHWC")
    for label in want:
        for part, value in want[label].items():
            if value is not None:
                np.testing.assert_allclose(got[label][part], value, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
@pytest.mark.parametrize("device", GPUS)
@pytest.mark.parametrize("kind", sorted(CASES))
def test_half_channels_last_matches_half_nchw(kind, device, fmt):
    want = run(kind, device, format=fmt, layout="NCHW")
    got = run(kind, device, format=fmt, layout="NHWC")
    tol = {"float16": 1e-2, "bfloat16": 6e-2}[fmt]
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * max(1.0, float(np.abs(w).max())))


def test_the_layout_is_asked_per_graph():
    net = residual_network()
    assert ng.Graph(net.probabilities).layout == "NCHW"  # auto, on cpu
    g = ng.Graph(net.probabilities, layout="nhwc")
    assert g.layout == "NHWC"
    assert g.inference().layout == "NHWC"
    loss = ng.Loss(net.logits, ng.LossDescriptor("softmax_cross_entropy", "mean"))
    t = loss.training_graph(optimizer=ng.SGD(learning_rate=0.1), layout="NHWC")
    assert (t.layout, t.evaluation().layout) == ("NHWC", "NHWC")
    with pytest.raises(ValueError, match=r"\[graph\] layout must be 'NCHW', 'NHWC' or 'auto', got 'CHWN'"):
        ng.Graph(net.probabilities, layout="CHWN")


@pytest.mark.parametrize("device", GPUS)
def test_tensor_core_graphs_on_cuda_choose_channels_last(device):
    net = residual_network()
    assert ng.Graph(net.probabilities, device=device, format="float16").layout == "NHWC"
    assert ng.Graph(net.probabilities, device=device, format="bfloat16").layout == "NHWC"
    g = ng.Graph(net.probabilities, device=device)
    assert g.layout == "NCHW"
    g.allow_tf32 = True
    assert g.layout == "NHWC"
    assert ng.Graph(net.probabilities, device=device, layout="NCHW").layout == "NCHW"


@pytest.mark.parametrize("device", GPUS)
def test_switching_tf32_switches_a_training_graphs_layout_between_steps(device, rng):
    """An auto graph plans its steps NCHW while exact and NHWC with tf32: steps either side of
    the switch train on as a graph held NCHW throughout does (up to tf32 rounding)."""
    x = rng.random((16, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, 16)
    params, layouts = {}, []
    for layout in ("auto", "NCHW"):
        net = residual_network(optimizer=ng.SGD(learning_rate=0.05))
        g = ng.Loss(net.logits, ng.LossDescriptor("softmax_cross_entropy", "mean")).training_graph(
            device=device, layout=layout)
        for tf32 in (False, True, True, False):
            g.allow_tf32 = tf32
            layouts.append(g.layout)
            g.encode(x, labels=y).wait()
        params[layout] = g.parameters()
    assert layouts == ["NCHW", "NHWC", "NHWC", "NCHW"] + ["NCHW"] * 4
    for label, tensors in params["NCHW"].items():
        for part, value in tensors.items():
            if value is not None:
                np.testing.assert_allclose(params["auto"][label][part], value, rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_the_residual_network_trains_alike_in_either_layout(device, rng):
    """One step leaves the same weights up to rounding: the layouts sum in other orders, so a
    relu whose input rounds to either side of 0 may pass a gradient in one and not the other
    (about 1e-5 here); a wrong layout would move them by orders more."""
    x = rng.random((16, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, 16)
    losses, params = {}, {}
    for layout in ("NCHW", "NHWC"):
        net = residual_network(optimizer=ng.SGD(learning_rate=0.05))
        loss = ng.Loss(net.logits, ng.LossDescriptor("softmax_cross_entropy", "mean"))
        g = loss.training_graph(device=device, layout=layout)
        losses[layout] = []
        for step in range(3):
            h = g.encode(x, labels=y)
            h.wait()
            losses[layout].append(float(h.losses().mean()))
            if step == 0:
                params[layout] = g.parameters()
    for label, tensors in params["NCHW"].items():
        for part, value in tensors.items():
            if value is not None:
                np.testing.assert_allclose(params["NHWC"][label][part], value, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(losses["NHWC"], losses["NCHW"], rtol=1e-3)
    assert losses["NCHW"][-1] < losses["NCHW"][0]


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
@pytest.mark.parametrize("device", GPUS)
def test_half_channels_last_trains_like_half_nchw(device, rng, fmt):
    """Several steps of a half graph: its convolutions read the channels-last filter copies the
    optimizer writes with each update, so each image's loss after a few steps follows the NCHW
    graph's (rounding apart); filters written in the wrong order would not."""
    x = rng.random((32, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, 32)
    losses = {}
    for layout in ("NCHW", "NHWC"):
        net = residual_network(optimizer=ng.Adam(learning_rate=1e-3))
        loss = ng.Loss(net.logits, ng.LossDescriptor("softmax_cross_entropy", "mean"))
        g = loss.training_graph(device=device, format=fmt, layout=layout)
        first = g.encode(x, labels=y).losses().mean()
        for _ in range(3):
            h = g.encode(x, labels=y)
        losses[layout] = h.losses().ravel()
        assert losses[layout].mean() < 0.9 * first  # the updates reached the copies
    # Up to 3% apart here: the trajectories part slowly as roundings differ.
    np.testing.assert_allclose(losses["NHWC"], losses["NCHW"], rtol=0.05, atol=0.03)


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
@pytest.mark.parametrize("device", GPUS)
def test_channels_last_windows_that_tile_their_rows(device, fmt, rng):
    """Convolutions whose 1×k windows tile their rows (stride k: the activity network's first
    layer) run channels-last as products over the images in place: the result, the input
    gradient (into the first layer) and both weight gradients follow the NCHW graph's."""
    x = rng.standard_normal((8, 3, 1, 40)).astype(np.float32)
    target = rng.standard_normal((8, 8, 1, 2)).astype(np.float32)
    steps = {}
    for layout in ("NCHW", "NHWC"):  # each from the same initial weights
        first = ng.ArrayDataSource(ng.ConvolutionDescriptor((1, 10), 3, 16, stride=(1, 10)), seed=3, label="first")
        second = ng.ArrayDataSource(ng.ConvolutionDescriptor((1, 2), 16, 8, stride=(1, 2)), seed=4, label="second")
        out = ng.Convolution(ng.Neuron(ng.Convolution(ng.ImageNode(label="x"), first), "relu"), second)
        g = ng.Loss(out, ng.LossDescriptor("mean_squared_error")).training_graph(
            optimizer=ng.SGD(learning_rate=0.1), device=device, format=fmt, layout=layout)
        before = {label: dict(p) for label, p in g.parameters().items()}
        result = g.encode(x, labels=ng.LossLabels(target)).result()
        after = g.parameters()
        steps[layout] = result, {k: after[k]["weights"] - before[k]["weights"] for k in ("first", "second")}
    tol = {"float16": 1e-2, "bfloat16": 6e-2}[fmt]
    (want, moved), (got, moved_nhwc) = steps["NCHW"], steps["NHWC"]
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * float(np.abs(want).max()))
    for k in moved:
        assert np.abs(moved[k]).max() > 0
        np.testing.assert_allclose(moved_nhwc[k], moved[k], rtol=tol, atol=tol * float(np.abs(moved[k]).max()))


@pytest.mark.parametrize("device", GPUS)
def test_half_filter_copies_serve_every_reader(device, rng):
    """A filter copy is channels-last only for convolutions that read NHWC images: one shared
    with a fully connected layer stays in order, and a convolution that later runs on images
    of one pixel (NCHW) reads its channels-last copy in order again."""
    ds = ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 4, 8), seed=1)
    src = ng.ImageNode(label="x")
    conv, fc = ng.Convolution(src, ds, padding="valid"), ng.FullyConnected(src, ds)
    x = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    want = ng.Graph([conv, fc], device=device).run(x)
    got = ng.Graph([conv, fc], device=device, format="float16", layout="NHWC").run(x)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-2, atol=1e-2)
    same = ng.Convolution(ng.ImageNode(label="x"), ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 4, 8), seed=2),
                          padding="same")
    half = ng.Graph(same, device=device, format="float16", layout="NHWC")
    for shape in ((6, 4, 5, 5), (6, 4, 1, 1)):
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(half.run(x), ng.Graph(same, device=device).run(x), rtol=1e-2, atol=1e-2)


# Overlapping windows; 2×2 and 3×3 side by side (3×3 leaving an edge uncovered); a large window.
class HostSGD(ng.Optimizer):
    """Plain SGD on the host: the gradient it is handed is in the descriptor's order (OIHW)."""

    def slot_count(self):
        return 0

    def update(self, values, gradient, slots, step):
        values -= self.learning_rate * gradient


@pytest.mark.parametrize("fmt", ["float32", "bfloat16"])
@pytest.mark.parametrize("device", GPUS)
def test_channels_last_weight_gradients_reach_every_optimizer(device, fmt, rng):
    """A channels-last filter's gradient is computed in its copy's order (KRSC), which the
    built-in optimizers read; an optimizer on the host gets it in the descriptor's order. Three
    input channels, so the two orders differ: each step moves the weights as the NCHW graph's."""
    x = rng.standard_normal((8, 3, 6, 6)).astype(np.float32)
    y = rng.integers(0, 5, 8)
    moved = {}
    for layout in ("NCHW", "NHWC"):
        for name, opt in (("built-in", ng.SGD(learning_rate=0.05, momentum=0.9)),
                          ("host", HostSGD(learning_rate=0.05))):
            conv = ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 3, 8), seed=11, label="conv")
            head = ng.ArrayDataSource(ng.ConvolutionDescriptor(6, 8, 5), seed=12, label="head")
            h = ng.Neuron(ng.Convolution(ng.ImageNode(shape=(3, 6, 6), label="x"), conv, padding="same"), "tanh")
            loss = ng.Loss(ng.FullyConnected(h, head), ng.LossDescriptor("softmax_cross_entropy", "mean"))
            g = loss.training_graph(device=device, optimizer=opt, format=fmt, layout=layout)
            before = g.parameters()["conv"]["weights"]
            for _ in range(3):
                g.encode(x, labels=y).wait()
            moved[layout, name] = g.parameters()["conv"]["weights"] - before
    tol = 5e-2 if fmt == "bfloat16" else 1e-4
    for name in ("built-in", "host"):
        want = moved["NCHW", name]
        assert np.abs(want).max() > 1e-3
        np.testing.assert_allclose(moved["NHWC", name], want, rtol=tol, atol=tol * float(np.abs(want).max()))


POOLS = [("max", 3, 2, "same"), ("average", 3, 2, "same"), ("average", 2, 2, "valid"), ("max", 2, 2, "valid"),
         ("max", 3, 3, "valid"), ("average", 3, 3, "valid"), ("max", 7, 1, "valid")]


@pytest.mark.parametrize("fmt", ["float32", "float16"])
@pytest.mark.parametrize("mode,kernel,stride,padding", POOLS)
@pytest.mark.parametrize("device", GPUS)
def test_channels_last_pooling_in_packs_of_channels(device, mode, kernel, stride, padding, fmt, rng):
    """NHWC images of 16 channels: pooling reads 16-byte packs of channels at each tap."""
    x = rng.standard_normal((3, 16, 7, 7)).astype(np.float32)
    pool = ng.Pooling(ng.ImageNode(label="x"), mode, kernel=kernel, stride=stride, padding=padding)
    got = ng.Graph(pool, device=device, format=fmt, layout="NHWC").run(x)
    x = x.astype(np.float16).astype(np.float64) if fmt == "float16" else x
    tol = 1e-3 if fmt == "float16" else 1e-6
    np.testing.assert_allclose(got, ref.pooling(x, mode, (kernel, kernel), (stride, stride), padding), rtol=tol,
                               atol=tol)


def pooling_gradient(x, dy, mode, kernel, stride, padding, count_include_pad):
    """d(loss)/dx of pooling for d(loss)/d(result) dy, in float64: max routes each dy to its
    window's first maximum, average spreads it over the window's count."""
    n, c, h, w = x.shape
    dx = np.zeros(x.shape)
    for oy in range(dy.shape[2]):
        for ox in range(dy.shape[3]):
            y0, x0 = oy * stride - padding, ox * stride - padding
            ys, xs = slice(max(y0, 0), min(y0 + kernel, h)), slice(max(x0, 0), min(x0 + kernel, w))
            g = dy[:, :, oy, ox]
            if mode == "max":
                win = x[:, :, ys, xs].reshape(n, c, -1)
                first = win.argmax(axis=2)
                cols = xs.stop - xs.start
                for i in range(n):
                    for j in range(c):
                        dx[i, j, ys.start + first[i, j] // cols, xs.start + first[i, j] % cols] += g[i, j]
            else:
                count = kernel * kernel if count_include_pad else (ys.stop - ys.start) * (xs.stop - xs.start)
                dx[:, :, ys, xs] += (g / count)[:, :, None, None]
    return dx


@pytest.mark.parametrize("fmt", ["float32", "float16"])
@pytest.mark.parametrize("mode,stride,count_include_pad,padding,size", [
    ("max", 2, False, 1, 9), ("max", 2, False, 0, 9), ("max", 2, False, 0, 8), ("max", 1, False, 1, 9),
    ("average", 1, True, 1, 9), ("average", 2, False, 1, 9)])
@pytest.mark.parametrize("device", GPUS)
def test_channels_last_overlapping_pooling_gradient_in_packs(device, mode, stride, count_include_pad, padding, size,
                                                             fmt, rng):
    """NHWC 3×3 windows that overlap (ResNet's stride-2 max pooling, Inception's unpadded one
    whose last pixel an even side leaves uncovered, Inception's stride-1 average pooling): a
    thread per pixel, or per 2×2 cell at stride 2, and pack of channels gathers from the
    windows that reach it, with relu's derivative folded in."""
    x = rng.standard_normal((3, 16, size, size))
    x = (x + 0.05 * np.sign(x)).astype(np.float32)
    exact = x.astype(np.float16).astype(np.float64) if fmt == "float16" else x.astype(np.float64)
    src = ng.ImageNode(shape=x.shape[1:], label="x")
    act = ng.Neuron(src, "relu", label="act")
    pool = ng.Pooling(act, mode, 3, stride, padding=(padding,) * 4, count_include_pad=count_include_pad,
                      label="pool")
    side = (size + 2 * padding - 3) // stride + 1
    dy = ng.ImageNode(shape=(16, side, side), label="dy")
    [dp] = pool.gradient_filters(dy)
    [dx] = act.gradient_filters(dp.result_image)
    g = ng.Graph([dx.result_image], device=device, format=fmt, layout="NHWC")
    # Max pooling's gradient reads the winners its forward step keeps.
    assert g.memory_plan(3)["steps"] == ["act"] + ["pool"] * (mode == "max") + ["pool_gradient+relu"]
    r = rng.standard_normal((3, 16, side, side)).astype(np.float32)
    relu = np.maximum(exact, 0)
    want = pooling_gradient(relu, r.astype(np.float64), mode, 3, stride, padding, count_include_pad) * (exact > 0)
    tol = 1e-2 if fmt == "float16" else 1e-5
    for _ in range(2):  # an uncovered edge stays zero in a reused buffer
        np.testing.assert_allclose(g.run({"x": x, "dy": r}), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("fmt", ["float32", "float16"])
@pytest.mark.parametrize("device", GPUS)
def test_channels_last_reduction_pooling_gradient_reads_its_concatenation_in_place(device, fmt, rng):
    """Inception's grid reduction: a 3×3 stride-2 max pooling of relu's output written into
    its channels of a concatenation beside another branch; its gradient reads its winners'
    dy and y in place, pixels the concatenation's width apart."""
    x = rng.standard_normal((2, 16, 11, 11))
    x = (x + 0.05 * np.sign(x)).astype(np.float32)
    exact = x.astype(np.float16).astype(np.float64) if fmt == "float16" else x.astype(np.float64)
    act = ng.Neuron(ng.ImageNode(shape=x.shape[1:], label="x"), "relu", label="act")
    pool = ng.Pooling(act, "max", 3, 2, label="pool")
    other = ng.Pooling(act, "average", 3, 2, label="other")
    cat = ng.Concatenation([other, pool], label="cat")
    dy = ng.ImageNode(shape=(32, 5, 5), label="dy")
    [_, dpool] = cat.gradient_filters(dy)
    [dp] = pool.gradient_filters(dpool.result_image)
    [dx] = act.gradient_filters(dp.result_image)
    g = ng.Graph([cat.result_image, dx.result_image], device=device, format=fmt, layout="NHWC")
    steps = g.memory_plan(3)["steps"]
    assert "cat" not in steps and not any(s.startswith("cat_gradient") for s in steps)
    r = rng.standard_normal((2, 32, 5, 5)).astype(np.float32)
    relu = np.maximum(exact, 0)
    want = pooling_gradient(relu, r[:, 16:].astype(np.float64), "max", 3, 2, 0, False) * (exact > 0)
    tol = 1e-2 if fmt == "float16" else 1e-5
    got_cat, got_dx = g.run({"x": x, "dy": r})
    np.testing.assert_allclose(got_cat[:, 16:], ref.pooling(relu, "max", (3, 3), (2, 2), "valid"), rtol=tol, atol=tol)
    np.testing.assert_allclose(got_dx, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("fmt", ["float32", "float16"])
@pytest.mark.parametrize("kernel,side", [(2, 8), (2, 9), (3, 7)])
@pytest.mark.parametrize("device", GPUS)
def test_channels_last_disjoint_max_pooling_gradient_in_packs(device, kernel, side, fmt, rng):
    """NHWC max pooling whose windows lie side by side (the speed-run network's 2×2, and 3×3
    windows leaving an edge uncovered): a thread per output pack writes its whole window from
    the winners, zeros but the winner's, with relu's derivative folded in."""
    x = rng.standard_normal((3, 16, side, side))
    x = (x + 0.05 * np.sign(x)).astype(np.float32)
    exact = x.astype(np.float16).astype(np.float64) if fmt == "float16" else x.astype(np.float64)
    src = ng.ImageNode(shape=x.shape[1:], label="x")
    act = ng.Neuron(src, "relu", label="act")
    pool = ng.Pooling(act, "max", kernel, kernel, label="pool")
    out = side // kernel
    [dp] = pool.gradient_filters(ng.ImageNode(shape=(16, out, out), label="dy"))
    [dx] = act.gradient_filters(dp.result_image)
    g = ng.Graph([dx.result_image], device=device, format=fmt, layout="NHWC")
    assert g.memory_plan(3)["steps"] == ["act", "pool", "pool_gradient+relu"]
    r = rng.standard_normal((3, 16, out, out)).astype(np.float32)
    want = pooling_gradient(np.maximum(exact, 0), r.astype(np.float64), "max", kernel, kernel, 0, False) * (exact > 0)
    tol = 1e-2 if fmt == "float16" else 1e-6
    for _ in range(2):  # the uncovered edge stays zero in a reused buffer
        np.testing.assert_allclose(g.run({"x": x, "dy": r}), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("fmt", ["float32", "float16"])
@pytest.mark.parametrize("device", DEVICES)
def test_channels_last_concatenation_and_its_slices(device, fmt, rng):
    """NHWC concatenation copies each source's pixel rows to its offset in the whole (whole
    16-byte packs, odd lengths, a one-channel source whose two layouts are the same memory);
    its gradient slices them back."""
    channels = (1, 8, 3, 16)
    xs = [rng.standard_normal((2, c, 5, 3)).astype(np.float32) for c in channels]
    srcs = [ng.ImageNode(shape=x.shape[1:], label=f"x{i}") for i, x in enumerate(xs)]
    cat = ng.Concatenation(srcs, label="cat")
    dy = ng.ImageNode(shape=(sum(channels), 5, 3), label="dy")
    grads = cat.gradient_filters(dy)
    g = ng.Graph([cat.result_image] + [d.result_image for d in grads], device=device, format=fmt, layout="NHWC")
    r = rng.standard_normal((2, sum(channels), 5, 3)).astype(np.float32)
    got = g.run({**{f"x{i}": x for i, x in enumerate(xs)}, "dy": r})
    rounded = (lambda a: a.astype(np.float16).astype(np.float32)) if g.storage == "float16" else (lambda a: a)
    np.testing.assert_array_equal(got[0], rounded(np.concatenate(xs, axis=1)))
    for part, want in zip(got[1:], np.split(r, np.cumsum(channels)[:-1], axis=1)):
        np.testing.assert_array_equal(part, rounded(want))


@pytest.mark.parametrize("fmt", ["float32", "float16"])
@pytest.mark.parametrize("channels", [16, 20, 300])
@pytest.mark.parametrize("device", GPUS)
def test_channels_last_global_pooling_and_its_gradient(device, channels, fmt, rng):
    """NHWC global pooling splits each window's taps among a block (channels in whole packs, one
    at a time, and more than a block has threads); relu → global average pooling's gradient
    writes each pixel's share with relu's derivative folded in."""
    x = rng.standard_normal((3, channels, 7, 6))
    x = (x + 0.05 * np.sign(x)).astype(np.float32)  # away from relu's kink
    exact = x.astype(np.float16).astype(np.float64) if fmt == "float16" else x.astype(np.float64)
    tol = 2e-3 if fmt == "float16" else 1e-5
    for make, reduce in ((ng.GlobalMaxPooling, np.max), (ng.GlobalAveragePooling, np.mean)):
        got = ng.Graph(make(ng.ImageNode(label="x")), device=device, format=fmt, layout="NHWC").run(x)
        np.testing.assert_allclose(got, reduce(exact, axis=(2, 3), keepdims=True), rtol=tol, atol=tol)
    src, dy = ng.ImageNode(shape=x.shape[1:], label="x"), ng.ImageNode(shape=(channels, 1, 1), label="dy")
    act = ng.Neuron(src, "relu", label="act")
    [dp] = ng.GlobalAveragePooling(act, label="pool").gradient_filters(dy)
    [dx] = act.gradient_filters(dp.result_image)
    g = ng.Graph([dx.result_image], device=device, format=fmt, layout="NHWC")
    assert g.memory_plan(3)["steps"] == ["act", "pool_gradient+relu"]
    r = rng.standard_normal((3, channels, 1, 1)).astype(np.float32)
    want = np.broadcast_to(r.astype(np.float64) / 42, x.shape) * (exact > 0)
    np.testing.assert_allclose(g.run({"x": x, "dy": r}), want, rtol=tol, atol=tol * 0.05)


def concatenating_net(layout, device, fmt="float32", k=1):
    """Branches conv → bn → relu (two of them inside an inner concatenation) and a max pooling
    of a convolution + relu (whose gradient the pooling's takes in), concatenated, then a fully
    connected layer and a loss; widths × k."""
    from nngraph.models._build import Builder
    b = Builder(0, ng.SGD(learning_rate=0.1))
    x = ng.ImageNode(label="x")
    pooled = ng.Pooling(ng.Neuron(b.conv(x, "p", 4, 3 * k, 1), "relu"), "max", 3, stride=1, padding="same",
                        label="pool")
    inner = ng.Concatenation([b.conv_bn(x, "c", 4, 2 * k, 1), b.conv_bn(x, "d", 4, 4 * k, 3, padding=1)],
                             label="inner")
    cat = ng.Concatenation([b.conv_bn(x, "a", 4, 4 * k, 1), inner, b.conv_bn(x, "b", 4, 6 * k, 3, padding=1), pooled],
                           label="cat")
    fc = b.fully_connected(cat, "fc", 19 * k * 5 * 5, 3)
    return ng.Loss(fc, "softmax_cross_entropy").training_graph(device=device, layout=layout, format=fmt), b.sources


def stacked_net(layout, device, fmt="float32", k=1):
    """A 3 × 3 unit's output (over 16 channels) read by three 1 × 1 units, conv → bn → relu,
    whose gradients are stacked; concatenated, then a fully connected layer and a loss; widths × k.
    Steps small enough that the loss stays away from 0 for three of them (wide, it learns fast)."""
    from nngraph.models._build import Builder
    b = Builder(0, ng.SGD(learning_rate=0.01))
    stem = b.conv_bn(ng.ImageNode(label="x"), "stem", 4, 18 * k, 3, padding=1, relu=False)
    shared = ng.Neuron(stem, "relu", label="shared")
    cat = ng.Concatenation([b.conv_bn(shared, p, 18 * k, w * k, 1) for p, w in (("a", 4), ("b", 2), ("c", 6))],
                           label="cat")
    fc = b.fully_connected(cat, "fc", 12 * k * 5 * 5, 3)
    return ng.Loss(fc, "softmax_cross_entropy").training_graph(device=device, layout=layout, format=fmt), b.sources


def concatenating_steps(layout, device, fmt="float32", k=1, steps=3, net=concatenating_net):
    """Losses of `steps` training steps of `net`, its trained tensors and its steps."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 5, 5)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[[0, 2, 1]]
    g, sources = net(layout, device, fmt, k)
    losses = [g.encode(x, labels=y).loss(0) for _ in range(steps)]
    tensors = {(label, n): v for label, s in sources.items() for n, v in s.tensors().items() if v is not None}
    return losses, tensors, g.memory_plan(3)["steps"]


@pytest.mark.parametrize("device", DEVICES)
def test_concatenated_parts_are_made_and_their_gradients_read_in_place(device):
    """Channels-last: the normalizations and the max pooling write straight into their
    channels of the concatenation (the inner one vanishes) and their gradients read theirs
    from the concatenation's gradient; training matches the NCHW graph. The cpu pools NCHW
    copies, so there the outer concatenation copies the pooling's part and slices its gradient."""
    want, want_tensors, steps = concatenating_steps("NCHW", device)
    slices = [s for s in steps if s.startswith(("cat_gradient", "inner_gradient"))]
    assert "inner" in steps and "cat" in steps and len(slices) == 6
    got, got_tensors, steps = concatenating_steps("NHWC", device)
    slices = [s for s in steps if s.startswith(("cat_gradient", "inner_gradient"))]
    copied = device == "cpu"
    assert "inner" not in steps and ("cat" in steps) == copied and slices == ["cat_gradient_4"] * copied
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    for k, w in want_tensors.items():
        np.testing.assert_allclose(got_tensors[k], w, rtol=1e-4, atol=1e-6, err_msg=str(k))


@pytest.mark.parametrize("device", DEVICES)
def test_stacked_gradients_take_their_dy_in_place(device):
    """Channels-last: the batch norms' gradients of 1×1 units reading one image write straight
    into their channels of the units' stacked dY, whose concatenation vanishes; training matches
    the NCHW graph, where it copies."""
    want, want_tensors, steps = concatenating_steps("NCHW", device, net=stacked_net)
    assert {"shared_stacked_dy", "shared_stacked_gradient"} <= set(steps)
    got, got_tensors, steps = concatenating_steps("NHWC", device, net=stacked_net)
    assert "shared_stacked_dy" not in steps and "shared_stacked_gradient" in steps
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    for k, w in want_tensors.items():
        np.testing.assert_allclose(got_tensors[k], w, rtol=1e-4, atol=1e-6, err_msg=str(k))


@pytest.mark.parametrize("device", GPUS)
def test_half_stacked_gradients_in_place_train_as_float32_does(device):
    """bfloat16 channels-last, widths that give 16-byte packs: the stacked dY in place, and
    training follows the float32 NCHW graph within bfloat16's rounding: a tenth of each tensor's
    largest value, a quarter for the shifts (beta), whose gradient sums over the batch's pixels
    mostly cancel, so that rounding is a larger share of it (a misplaced row or channel would be
    off by as much as the tensor's values)."""
    want, want_tensors, _ = concatenating_steps("NCHW", device, k=8, net=stacked_net)
    got, got_tensors, steps = concatenating_steps("NHWC", device, "bfloat16", k=8, net=stacked_net)
    assert "shared_stacked_dy" not in steps
    np.testing.assert_allclose(got, want, rtol=5e-2, atol=5e-3)
    for k, w in want_tensors.items():
        share = 0.25 if k[1] == "beta" else 0.1
        np.testing.assert_allclose(got_tensors[k], w, rtol=5e-2, atol=share * float(np.abs(w).max()), err_msg=str(k))


@pytest.mark.parametrize("device", GPUS)
def test_half_concatenations_in_place_train_as_float32_does(device):
    """bfloat16 channels-last, widths that give 16-byte packs: in place as in float32, and
    training follows the float32 NCHW graph (within bfloat16's rounding: a tenth of each
    tensor's largest value; a misplaced row or channel would be off by as much as it)."""
    want, want_tensors, _ = concatenating_steps("NCHW", device, k=8)
    got, got_tensors, steps = concatenating_steps("NHWC", device, "bfloat16", k=8)
    assert "inner" not in steps
    np.testing.assert_allclose(got, want, rtol=5e-2, atol=5e-3)
    for k, w in want_tensors.items():
        np.testing.assert_allclose(got_tensors[k], w, rtol=5e-2, atol=0.1 * float(np.abs(w).max()), err_msg=str(k))
