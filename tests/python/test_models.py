"""The headline networks of nngraph.models: torchvision's parameter counts and labels, inference
against numpy forwards written apart from them, training, and bad arguments."""

import numpy as np
import pytest
import reference_models as ref
from conftest import GPUS

import nngraph as ng
from nngraph import models


def randomize(net, rng):
    """Random normalization statistics and shifts, and random biases: nothing the forward
    could get right by accident."""
    for ds in net.sources.values():
        t = ds.tensors()
        new = {}
        if "gamma" in t:
            c = t["gamma"].shape
            new = {"gamma": rng.uniform(0.5, 1.5, c), "beta": rng.normal(0, 0.2, c), "mean": rng.normal(0, 0.2, c),
                   "variance": rng.uniform(0.5, 1.5, c)}
        elif t.get("biases") is not None:
            new = {"biases": rng.normal(0, 0.1, t["biases"].shape)}
        if new:
            ds.set_tensors({k: v.astype(np.float32) for k, v in new.items()})


def trained_count(net) -> int:
    return sum(ds.tensor(spec.name).size for ds in net.sources.values() for spec in ds.descriptor().tensors
               if spec.trained and ds.tensor(spec.name) is not None)


@pytest.mark.parametrize("build, count, layers", [
    (models.resnet18, 11_689_512, 41), (models.resnet50, 25_557_032, 107),
    (lambda: models.inception_v3(aux=True), 27_161_264, 194), (models.inception_v3, 23_834_568, 189)])
def test_parameter_counts_are_torchvisions(build, count, layers):
    net = build()
    assert trained_count(net) == count
    assert len(net.sources) == layers


def test_labels_are_torchvisions():
    assert list(models.resnet18().sources)[:6] == ["conv1", "bn1", "layer1.0.conv1", "layer1.0.bn1",
                                                    "layer1.0.conv2", "layer1.0.bn2"]
    assert "layer2.0.downsample.0" in models.resnet50().sources
    inception = models.inception_v3(aux=True).sources
    assert {"Mixed_5b.branch_pool.conv", "Mixed_7c.branch3x3dbl_3b.bn", "AuxLogits.conv1.conv", "AuxLogits.fc",
            "fc"} <= set(inception)


def check_forward(net, forward, x, device, tol=2e-4):
    got = ng.Graph(net.logits, device=device).run(x).reshape(len(x), -1)
    want = forward(ref.Params(net.sources), x).reshape(len(x), -1)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("stem, size", [("cifar", 16), ("imagenet", 40)])
def test_resnet18_against_numpy(device, rng, stem, size):
    net = models.resnet18(classes=7, size=size, stem=stem, seed=3)
    randomize(net, rng)
    x = rng.normal(size=(2, 3, size, size)).astype(np.float32)
    check_forward(net, lambda p, x: ref.resnet(p, x, False, (2, 2, 2, 2), stem), x, device)


def test_resnet50_against_numpy(device, rng):
    net = models.resnet50(classes=5, channels=1, size=32, seed=4)
    randomize(net, rng)
    x = rng.normal(size=(1, 1, 32, 32)).astype(np.float32)
    check_forward(net, lambda p, x: ref.resnet(p, x, True, (3, 4, 6, 3), "imagenet"), x, device, 1e-3)


def test_inception_v3_against_numpy(device, rng):
    net = models.inception_v3(classes=6, size=75, seed=5)
    randomize(net, rng)
    x = rng.normal(size=(1, 3, 75, 75)).astype(np.float32)
    check_forward(net, ref.inception_v3, x, device, 1e-3)


def test_inception_v3_auxiliary_classifier(device, rng):
    net = models.inception_v3(classes=4, aux=True)
    graph = ng.Graph([net.logits, net.aux_logits], device=device)
    logits, aux = graph.run(rng.normal(size=(1, 3, 299, 299)).astype(np.float32))
    assert logits.shape == aux.shape == (1, 4, 1, 1)
    assert np.isfinite(aux).all() and np.abs(aux - logits).max() > 0


def test_inception_v3_blocks_take_their_input_gradients_stacked(device):
    """Each block's 1×1 convolutions reading its input give that input's gradient as one
    stacked product: alone where all four branches start with one (5b–5d, 6b–6e, 7b, 7c), added
    to the max pooling's gradient in 7a; 6a's input, read by one 1×1 convolution, keeps its sum."""
    net = models.inception_v3(classes=5, size=75, optimizer=ng.SGD(learning_rate=0.01))
    graph = ng.Loss(net.logits, "softmax_cross_entropy").training_graph(device=device)
    loss = graph.run(np.random.default_rng(0).standard_normal((2, 3, 75, 75)).astype(np.float32),
                     labels=np.array([1, 3]))
    assert np.isfinite(loss).all()
    steps = [s for s in graph.memory_plan(2)["steps"] if s.endswith(("stacked_gradient", "gradient_sum"))
             and s.startswith(("Mixed", "maxpool2"))]
    assert steps == ["Mixed_7b_stacked_gradient", "Mixed_7a_stacked_gradient", "Mixed_6e_stacked_gradient",
                     "Mixed_6e_gradient_sum", "Mixed_6d_stacked_gradient", "Mixed_6c_stacked_gradient",
                     "Mixed_6b_stacked_gradient", "Mixed_6a_stacked_gradient", "Mixed_5d_gradient_sum",
                     "Mixed_5c_stacked_gradient", "Mixed_5b_stacked_gradient", "maxpool2_stacked_gradient"]


@pytest.mark.parametrize("channels, size", [(3, 32), (1, 28)])
def test_speedrun_net_against_numpy(device, rng, channels, size):
    x = rng.normal(size=(2, channels, size, size)).astype(np.float32)
    whitening = models.whitening_weights(rng.normal(size=(16, channels, size, size)))
    net = models.speedrun_net(channels=channels, size=size, widths=(8, 16, 16), whitening=whitening, seed=6)
    randomize(net, rng)
    np.testing.assert_array_equal(net.sources["whiten"].weights(), whitening)
    check_forward(net, lambda p, x: ref.speedrun_net(p, x, (8, 16, 16)), x, device)


@pytest.mark.parametrize("shape, kernel, count", [((7, 3, 9, 11), (2, 2), None), ((5, 1, 6, 8), (3, 1), 3),
                                                   ((300, 4, 32, 32), (2, 3), 257), ((2, 16, 5, 5), (2, 2), None)])
def test_patch_moments_match_numpy(device, rng, shape, kernel, count):
    x = rng.normal(1.0, 2.0, size=shape).astype(np.float32)
    kh, kw = kernel
    used = x[:count]
    patches = np.lib.stride_tricks.sliding_window_view(used.astype(np.float64), kernel, axis=(2, 3))
    flat = patches.transpose(0, 2, 3, 1, 4, 5).reshape(-1, shape[1] * kh * kw)
    want = flat.T @ flat
    got = ng.patch_moments(ng.Image(x, device=device), kernel, count)
    assert got.shape == (shape[1] * kh * kw,) * 2 and got.dtype == np.float64
    # Float32 products: off-diagonal sums that cancel keep the diagonal's absolute error.
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    np.testing.assert_allclose(ng.patch_moments(x, kernel, count), want, rtol=1e-5,  # numpy: on the cpu
                               atol=1e-6 * np.abs(want).max())
    half = ng.Image(x, device=device).astype("bfloat16")  # read as float32 values
    wide = half.numpy().astype(np.float64)[:count]
    flat = np.lib.stride_tricks.sliding_window_view(wide, kernel, axis=(2, 3)).transpose(0, 2, 3, 1, 4, 5)
    flat = flat.reshape(-1, shape[1] * kh * kw)
    want = flat.T @ flat
    np.testing.assert_allclose(ng.patch_moments(half, kernel, count), want, rtol=1e-5, atol=1e-6 * np.abs(want).max())


def test_patch_moments_refuse_what_they_cannot_take():
    x = ng.Image(np.ones((2, 3, 4, 4), np.float32))
    with pytest.raises(ValueError, match=r"\[patch_moments\] a 5×2 patch does not fit 4×4 images"):
        ng.patch_moments(x, (5, 2))
    with pytest.raises(ValueError, match=r"\[patch_moments\] count must be 1 to 2 \(the images held\), got 3"):
        ng.patch_moments(x, (2, 2), 3)
    with pytest.raises(ValueError, match=r"\[patch_moments\] patches of 3×5×5 values are more than 64"):
        ng.patch_moments(ng.Image(np.ones((1, 3, 5, 5), np.float32)), (5, 5))


def test_whitening_weights_whiten_the_patches(device, rng):
    # Correlated channels: the whitened patches' covariance is diag(λ / (λ + ε)), near the identity.
    mix = rng.normal(size=(3, 3))
    images = np.einsum("dc,nchw->ndhw", mix, rng.normal(size=(64, 3, 12, 12)))
    w = models.whitening_weights(images, epsilon=1e-6)
    on_device = models.whitening_weights(ng.Image(images.astype(np.float32), device=device), epsilon=1e-6)
    # Eigenvectors are defined up to sign: compare each filter to ± the host's.
    signs = np.sign(np.sum(on_device * w, axis=(1, 2, 3)))
    np.testing.assert_allclose(on_device * signs[:, None, None, None], w, rtol=1e-3, atol=1e-3)
    assert w.shape == (24, 3, 2, 2)
    np.testing.assert_array_equal(w[12:], -w[:12])
    patches = np.lib.stride_tricks.sliding_window_view(images, (2, 2), axis=(2, 3))
    flat = patches.transpose(0, 2, 3, 1, 4, 5).reshape(-1, 12)
    white = flat @ w[:12].reshape(12, -1).T
    np.testing.assert_allclose(white.T @ white / len(white), np.eye(12), atol=1e-3)


def test_speedrun_net_freezes_the_whitening_and_batch_norm_scales(device, rng):
    net = models.speedrun_net(channels=1, size=28, widths=(8, 8, 8), optimizer=ng.SGD(learning_rate=0.1))
    before = {label: ds.tensors() for label, ds in net.sources.items()}
    loss = ng.Loss(net.logits, ng.LossDescriptor("softmax_cross_entropy", "mean", label_smoothing=0.2))
    graph = loss.training_graph(device=device)
    graph.run(rng.random((8, 1, 28, 28), dtype=np.float32), labels=rng.integers(0, 10, 8))
    after = graph.parameters()
    np.testing.assert_array_equal(after["whiten"]["weights"], before["whiten"]["weights"])
    assert np.abs(after["whiten"]["biases"] - before["whiten"]["biases"]).max() > 0
    np.testing.assert_array_equal(after["block2.norm1"]["gamma"], before["block2.norm1"]["gamma"])
    assert np.abs(after["block2.norm1"]["beta"] - before["block2.norm1"]["beta"]).max() > 0


def test_reset_trains_one_graph_as_a_fresh_network_would(device, rng):
    """reset(seed) puts back a fresh build's values, frozen tensors and optimizer state, so the
    same graph then trains exactly as a new network built with that seed."""
    def build(seed):
        opt = ng.SGD(learning_rate=0.05, momentum=0.9, nesterov=True, lookahead_steps=2)
        net = models.speedrun_net(classes=4, channels=1, size=28, widths=(8, 8, 8), seed=seed, optimizer=opt)
        loss = ng.Loss(net.logits, ng.LossDescriptor("softmax_cross_entropy", "sum", label_smoothing=0.2))
        return net, loss.training_graph(device=device)

    x = rng.normal(size=(4, 16, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 4, (4, 16))
    fresh, fresh_graph = build(5)
    want = [fresh_graph.encode(xb, labels=yb).loss() for xb, yb in zip(x, y)]
    net, graph = build(0)
    net.sources["whiten"].frozen = ["weights", "biases"]
    for xb, yb in zip(x[::-1], y[::-1]):
        graph.encode(xb, labels=yb).wait()
    net.reset(5)
    untrained = build(5)[0].sources  # the fresh network's are trained by now
    for label, ds in net.sources.items():
        assert ds.frozen == fresh.sources[label].frozen
        assert ds.optimizer_state() == {"step": 0, "slots": []}
        for name, v in ds.tensors().items():
            if v is not None:
                np.testing.assert_array_equal(v, untrained[label].tensor(name), err_msg=label)
    got = [graph.encode(xb, labels=yb).loss() for xb, yb in zip(x, y)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    net.reset()  # the build's own seed
    np.testing.assert_array_equal(net.sources["head"].weights(), build(0)[0].sources["head"].weights())
    net.sources["extra"] = ng.ArrayDataSource(ng.ConvolutionDescriptor(1, 2, 2))
    before = net.sources["head"].weights()
    with pytest.raises(ValueError, match=r"\[reset\] no initializer recorded for source\(s\) \['extra'\]"):
        net.reset(7)
    np.testing.assert_array_equal(net.sources["head"].weights(), before)  # nothing changed


@pytest.mark.parametrize("build, lr", [
    (lambda: models.resnet18(classes=4, size=16, stem="cifar"), 0.005),
    (lambda: models.resnet50(classes=4, size=32), 0.005),
    (lambda: models.speedrun_net(classes=4, channels=1, size=28, widths=(8, 16, 16)), 0.1)])
def test_networks_learn_a_batch(device, rng, build, lr):
    net = build()
    for ds in net.sources.values():
        ds.optimizer = ng.SGD(learning_rate=lr, momentum=0.9, nesterov=True)
    size = net.image.shape[1]
    x = rng.normal(size=(8, net.image.shape[0], size, size)).astype(np.float32)
    y = rng.integers(0, 4, 8)
    graph = ng.Loss(net.logits, "softmax_cross_entropy").training_graph(device=device)
    losses = [graph.encode(x, labels=y).loss() for _ in range(12)]
    # The least of the last three: batch norm over 8 values at ResNet-50's last 1×1 stage makes
    # the path chaotic (1e-6 on the input moves the second loss by 15%), so a lone late spike
    # differs between backends and between cuDNN's algorithms.
    assert min(losses[-3:]) < 0.5 * losses[0], losses


@pytest.mark.parametrize("call, message", [
    (lambda: models.resnet18(stem="tiny"), r"\[resnet\] stem must be one of"),
    (lambda: models.resnet50(size=16), r"\[resnet\] size must be at least 32"),
    (lambda: models.inception_v3(size=64), r"\[inception_v3\] size must be at least 75"),
    (lambda: models.inception_v3(size=200, aux=True), r"at least 299 with aux"),
    (lambda: models.speedrun_net(size=40), r"\[speedrun_net\] 40×40 images reach 4×4"),
    (lambda: models.whitening_weights(np.zeros((4, 4))), r"\[whiten\] images must be \(N, C, H, W\)")])
def test_bad_arguments_name_the_network(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# Inception's training step is left out of the step comparison: at random initialization its
# step is chaotic in any precision (in float32 on the cpu, scaling the images by 1 + 1e-6 moves
# a layer's step by 4%), so half rounding moves it anywhere. Its nodes' gradients in float16
# channels-last are checked one by one in test_layout.
@pytest.mark.parametrize("build, shape, step", [
    (lambda: models.resnet18(classes=5, size=16, stem="cifar"), (4, 3, 16, 16), True),
    (lambda: models.inception_v3(classes=5, size=75), (2, 3, 75, 75), False),
    (lambda: models.speedrun_net(classes=5, channels=1, size=28, widths=(16, 32, 32)), (4, 1, 28, 28), True)])
@pytest.mark.parametrize("device", GPUS)
def test_float16_channels_last_networks_match_float32(device, rng, build, shape, step):
    """Half graphs on cuda lie channels-last: every node of these networks (concatenations and
    overlapping pooling windows among them) computes what float32 does, and a training step
    moves each layer as float32's does."""
    net = build()
    randomize(net, rng)
    x = rng.normal(size=shape).astype(np.float32)
    want = ng.Graph(net.logits, device=device).run(x)
    half = ng.Graph(net.logits, device=device, format="float16")
    assert half.layout == "NHWC"
    np.testing.assert_allclose(half.run(x), want, rtol=2e-2, atol=2e-2 * np.abs(want).max())
    if not step:
        return
    y = rng.integers(0, 5, shape[0])
    steps = {}
    for fmt in ("float32", "float16"):
        for ds in net.sources.values():
            ds.optimizer = ng.SGD(learning_rate=0.01)
        graph = ng.Loss(net.logits, "softmax_cross_entropy").training_graph(device=device, format=fmt,
                                                                            loss_scaling=ng.LossScaling(enabled=False))
        before = graph.parameters()
        graph.run(x, labels=y)
        steps[fmt] = {k: graph.parameters()[k]["weights"] - before[k]["weights"] for k in before
                      if before[k].get("weights") is not None}
        for label, t in before.items():  # the next format starts from the same parameters
            net.sources[label].set_tensors({k: v for k, v in t.items() if v is not None})
    # Each layer's step in float16 points where float32's does, as long: half rounding in a deep
    # network with batch statistics moves single values, not the update.
    worst = []
    for label, step in steps["float32"].items():
        half = steps["float16"][label].ravel()
        if not step.any():  # frozen (the whitening)
            assert not half.any(), label
            continue
        cos = float(half @ step.ravel() / (np.linalg.norm(half) * np.linalg.norm(step) + 1e-30))
        worst.append((cos, float(np.linalg.norm(half) / (np.linalg.norm(step) + 1e-30)), label))
    worst.sort()
    assert worst[0][0] > 0.99 and all(0.9 < ratio < 1.1 for _, ratio, _ in worst), worst[:4]
