"""MatrixMultiplication (each image's channel groups as matrices) and SoftMax over channel
groups: forward against numpy, gradients against central differences, bad shapes, and an
attention block built from them, trained a step."""

import numpy as np
import pytest
import reference as ref
from test_gradients import check, input_gradient, numeric_grad

import nngraph as ng

# left shape, right shape, groups, transpose_left, transpose_right: per image and group, op(left) is
# M×K and op(right) K×N.
CASES = [
    ((2, 6, 2, 2), (2, 8, 1, 5), 2, False, False),  # 3×4 by 4×5, right's pixels 1×5
    ((3, 4, 1, 3), (3, 4, 2, 3), 1, True, False),  # 4×3 read as 3×4, by 4×6
    ((2, 8, 1, 3), (2, 10, 2, 2), 2, True, True),  # 4×3 as 3×4, 5×4 as 4×5
    ((1, 9, 2, 2), (1, 15, 2, 2), 3, False, True),  # 3×4 by 5×4 as 4×5
    ((2, 12, 1, 7), (2, 21, 2, 2), 3, False, False),  # a head's values (4×7) by its weights (7×4)
    ((2, 6, 1, 1), (2, 2, 2, 2), 2, False, False),  # outer products: 3×1 by 1×4 (one operand of one pixel)
    ((2, 4, 3, 1), (2, 4, 1, 1), 2, True, False),  # 2×3 as 3×2 by 2×1: a result of one pixel
]


# Channels-last graphs hand cuda's kernel each group's matrix transposed (where an image has more
# than one channel and pixel; the others are NCHW as well), the cpu NCHW copies.
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("left,right,groups,tl,tr", CASES)
def test_matrix_multiplication_matches_numpy(device, rng, left, right, groups, tl, tr, layout):
    a = rng.standard_normal(left).astype(np.float32)
    b = rng.standard_normal(right).astype(np.float32)
    x, y = ng.ImageNode(label="a"), ng.ImageNode(label="b")
    node = ng.MatrixMultiplication(x, y, groups=groups, transpose_left=tl, transpose_right=tr)
    assert (node.groups, node.transpose_left, node.transpose_right) == (groups, tl, tr)
    got = ng.Graph(node, device=device, layout=layout).run({"a": a, "b": b})
    want = ref.matrix_multiplication(a, b, groups, tl, tr)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("left,right,groups,tl,tr", CASES)
def test_matrix_multiplication_gradients(device, rng, left, right, groups, tl, tr, layout):
    a = rng.standard_normal(left).astype(np.float32)
    b = rng.standard_normal(right).astype(np.float32)
    r = rng.standard_normal(ref.matrix_multiplication(a, b, groups, tl, tr).shape).astype(np.float32)
    x, y, dy = ng.ImageNode(label="a"), ng.ImageNode(label="b"), ng.ImageNode(label="dy")
    node = ng.MatrixMultiplication(x, y, groups=groups, transpose_left=tl, transpose_right=tr)
    da, db = ng.Graph([g.result_image for g in node.gradient_filters(dy)], device=device, layout=layout).run(
        {"a": a, "b": b, "dy": r})
    check(da, numeric_grad(lambda v: (ref.matrix_multiplication(v, b, groups, tl, tr) * r).sum(), a))
    check(db, numeric_grad(lambda v: (ref.matrix_multiplication(a, v, groups, tl, tr) * r).sum(), b))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_over_channel_groups(device, rng, log, layout):
    x = rng.standard_normal((2, 12, 3, 2)).astype(np.float32)
    node = (ng.LogSoftMax if log else ng.SoftMax)(ng.ImageNode(label="x"), groups=4)
    assert node.groups == 4
    got = ng.Graph(node, device=device, layout=layout).run(x)
    np.testing.assert_allclose(got, ref.softmax(x, log, groups=4), rtol=1e-5, atol=1e-6)
    if not log:
        np.testing.assert_allclose(got.reshape(2, 4, 3, 3, 2).sum(axis=2), 1.0, rtol=1e-5)
    r = rng.standard_normal(x.shape).astype(np.float32)
    [dx] = input_gradient(lambda s: (ng.LogSoftMax if log else ng.SoftMax)(s, groups=4), x, r, device)
    check(dx, numeric_grad(lambda v: (ref.softmax(v, log, groups=4) * r).sum(), x))


@pytest.mark.parametrize("shape", [(3, 200, 1, 1), (2, 70, 5, 9), (2, 3, 40, 1), (1, 37, 33, 2)])
def test_softmax_of_many_channels_and_pixels(device, rng, shape):
    """Channels more than a warp's lanes and pixels more than a tile's 32 (cuda's two kernels), an
    image of −∞ but for one channel, and −∞ throughout one pixel's channels but one: finite."""
    x = rng.standard_normal(shape).astype(np.float32) * 4
    x[0, 1:, 0, 0] = -np.inf
    for layout in ("NCHW", "NHWC"):
        got = ng.Graph(ng.SoftMax(ng.ImageNode(label="x")), device=device, layout=layout).run(x)
        np.testing.assert_allclose(got, ref.softmax(x), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-5)
        r = rng.standard_normal(shape).astype(np.float32)
        [g] = ng.SoftMax(ng.ImageNode(label="x")).gradient_filters(ng.ImageNode(label="dy"))
        want = ref.softmax(x) * (r - (r * ref.softmax(x)).sum(axis=1, keepdims=True))
        np.testing.assert_allclose(ng.Graph(g, device=device, layout=layout).run({"dy": r, "x": x}), want,
                                   rtol=1e-4, atol=1e-6)


def test_bad_shapes_name_the_node():
    a, b = ng.ImageNode(shape=(6, 2, 2), label="a"), ng.ImageNode(shape=(8, 1, 5), label="b")
    with pytest.raises(ValueError, match=r"\[scores\] left's 6 channels do not fall into 4 groups"):
        ng.Graph(ng.MatrixMultiplication(a, b, groups=4, label="scores"))
    with pytest.raises(ValueError, match=r"\[scores\] left's groups are 6×4 matrices and right's 8×5 .*4 and 8 differ"):
        ng.Graph(ng.MatrixMultiplication(a, b, label="scores"))
    with pytest.raises(ValueError, match=r"\[scores\] groups must be at least 1, got 0"):
        ng.MatrixMultiplication(a, b, groups=0, label="scores")
    with pytest.raises(ValueError, match=r"\[p\] 6 channels do not fall into 4 groups"):
        ng.Graph(ng.SoftMax(a, groups=4, label="p"))


def attention(x, heads, d, seed=0, frozen=()):
    """Self-attention over the pixels of x (heads·d channels): 1×1 projections, each head's
    scores kᵀq/√d (keys as channels), a softmax over them, the values weighted by it, and an
    output projection."""
    c = heads * d

    def projection(name, i):
        ds = ng.ArrayDataSource(ng.ConvolutionDescriptor(1, c, c), seed=seed + i, label=name)
        return ng.Convolution(x, ds, label=name) if name != "o" else ds
    q, k, v = (projection(n, i) for i, n in enumerate("qkv"))
    scores = ng.MatrixMultiplication(k, q, groups=heads, transpose_left=True, label="scores")
    p = ng.SoftMax(ng.Neuron(scores, "linear", a=1 / np.sqrt(d)), groups=heads, label="p")
    out = ng.MatrixMultiplication(v, p, groups=heads, label="weighted")
    return ng.Convolution(out, projection("o", 3), label="o")


def attention_reference(x, w, heads, d):
    n, c, h, wd = x.shape
    t = x.reshape(n, c, h * wd).astype(np.float64)
    q, k, v = (np.einsum("oc,nct->not", w[i], t).reshape(n, heads, d, -1) for i in range(3))
    s = np.einsum("nhdk,nhdq->nhqk", k, q) / np.sqrt(d)  # query by key
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = np.einsum("nhqk,nhdk->nhdq", p, v).reshape(n, c, -1)
    return np.einsum("oc,nct->not", w[3], o).reshape(n, c, h, wd)


def test_an_attention_block_matches_numpy_and_trains(device, rng):
    heads, d = 2, 3
    x = rng.standard_normal((2, heads * d, 2, 3)).astype(np.float32)
    net = attention(ng.ImageNode(label="x"), heads, d)
    g = ng.Graph(net, device=device)
    w = [g.parameters()[n]["weights"].reshape(heads * d, heads * d) for n in "qkvo"]
    np.testing.assert_allclose(g.run(x), attention_reference(x, w, heads, d), rtol=1e-4, atol=1e-5)

    target = rng.standard_normal(x.shape).astype(np.float32)
    loss = ng.Loss(net, ng.LossDescriptor("mean_squared_error", reduction="sum"))
    train = loss.training_graph(device=device, optimizer=ng.SGD(learning_rate=1e-3))
    before = train.parameters()
    train.encode(x, labels=ng.LossLabels(target)).wait()
    after = train.parameters()
    # One SGD step moves the query projection by the finite-difference gradient of the summed squares.
    wq = w[0]

    def objective(v):
        return ((attention_reference(x, [v, *w[1:]], heads, d) - target) ** 2).sum()
    grad = numeric_grad(objective, wq)
    moved = (before["q"]["weights"] - after["q"]["weights"]).reshape(wq.shape) / 1e-3
    check(moved, grad, rtol=5e-3, atol=5e-4)
