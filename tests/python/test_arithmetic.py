"""Addition, subtraction, multiplication and division of two images with broadcasting:
forward against numpy, the gradients of both operands against central finite differences."""

import numpy as np
import pytest
import reference as ref
from test_folding import conv_bn
from test_gradients import Capture, check, numeric_grad

import nngraph as ng

OPS = {
    "addition": (ng.Addition, np.add),
    "subtraction": (ng.Subtraction, np.subtract),
    "multiplication": (ng.Multiplication, np.multiply),
    "division": (ng.Division, np.divide),
}
# (a, b) shapes: equal, a per-channel (1,C,1,1) operand, per-image scalars (N,1,1,1), one
# scalar (1,1,1,1), either side broadcasting, and both at once along different axes.
SHAPES = [
    ((2, 3, 4, 5), (2, 3, 4, 5)),
    ((2, 3, 4, 5), (1, 3, 1, 1)),
    ((2, 3, 4, 5), (2, 1, 1, 1)),
    ((2, 3, 4, 5), (1, 1, 1, 1)),
    ((2, 1, 1, 1), (2, 3, 4, 5)),
    ((2, 3, 1, 5), (2, 3, 4, 1)),
]


def operands(rng, sa, sb, op):
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    if op == "division":  # away from zero, so the quotient and its differences stay tame
        b = (np.sign(b) * (np.abs(b) + 0.5)).astype(np.float32)
    return a, b


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("sa, sb", SHAPES)
def test_forward_matches_numpy(device, rng, op, sa, sb):
    node_type, fn = OPS[op]
    a, b = operands(rng, sa, sb, op)
    node = node_type(ng.ImageNode(label="a"), ng.ImageNode(label="b"))
    assert node.kind == op
    y = ng.Graph(node, device=device).run({"a": a, "b": b})
    np.testing.assert_allclose(y, fn(a.astype(np.float64), b.astype(np.float64)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", ["addition", "multiplication"])
@pytest.mark.parametrize("sa, sb", [SHAPES[0], SHAPES[5]])
@pytest.mark.parametrize("neuron", ["relu", "sigmoid"])
def test_a_neuron_after_it_runs_in_its_pass(device, rng, op, sa, sb, neuron):
    """node → neuron is one step (a residual block's add + relu), forward and, in a training
    graph, with the neuron's gradient working from that step's output."""
    node_type, fn = OPS[op]
    a, b = operands(rng, sa, sb, op)
    want = ref.neuron(fn(a.astype(np.float64), b.astype(np.float64)), neuron)
    node = node_type(ng.ImageNode(label="a"), ng.ImageNode(label="b"), label="op")
    act = ng.Neuron(node, neuron)
    g = ng.Graph(act, device=device)
    np.testing.assert_allclose(g.run({"a": a, "b": b}), want, rtol=1e-5, atol=1e-6)
    assert g.memory_plan(2)["steps"] == [f"op+{neuron}"]
    r = rng.standard_normal(want.shape).astype(np.float32)
    [dz] = act.gradient_filters(ng.ImageNode(label="dy"))
    grads = node.gradient_filters(dz.result_image)
    g = ng.Graph([act.result_image] + [x.result_image for x in grads], device=device)
    y, da, db = g.run({"a": a, "b": b, "dy": r})
    assert g.memory_plan(2)["steps"][0] == f"op+{neuron}"
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    f = lambda u, v: np.sum(ref.neuron(fn(u, v), neuron) * r)  # noqa: E731
    check(da, numeric_grad(lambda v: f(v, b.astype(np.float64)), a))
    check(db, numeric_grad(lambda v: f(a.astype(np.float64), v), b))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("sa, sb", [s for s in SHAPES if s[0][0] == s[1][0]])
def test_gradients_of_both_operands(device, rng, op, sa, sb):
    node_type, fn = OPS[op]
    a, b = operands(rng, sa, sb, op)
    out_shape = np.broadcast_shapes(sa, sb)
    r = rng.standard_normal(out_shape).astype(np.float32)
    dy = ng.ImageNode(label="dy")
    node = node_type(ng.ImageNode(label="a"), ng.ImageNode(label="b"))
    ga, gb = node.gradient_filters(dy)
    g = ng.Graph([ga.result_image, gb.result_image], device=device)
    da, db = g.run({"a": a, "b": b, "dy": r})
    check(da, numeric_grad(lambda v: np.sum(fn(v, b.astype(np.float64)) * r), a))
    check(db, numeric_grad(lambda v: np.sum(fn(a.astype(np.float64), v) * r), b))


def test_an_addend_of_the_result_shape_passes_its_gradient_through(device, rng):
    a, b = rng.standard_normal((2, 3, 4, 5)).astype(np.float32), rng.standard_normal((2, 3, 1, 1)).astype(np.float32)
    dy = ng.ImageNode(label="dy")
    node = ng.Subtraction(ng.ImageNode(label="a"), ng.ImageNode(label="b"))
    ga, gb = node.gradient_filters(dy)
    g = ng.Graph([ga.result_image, gb.result_image], device=device)
    r = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    da, db = g.run({"a": a, "b": b, "dy": r})
    np.testing.assert_array_equal(da, r)
    np.testing.assert_allclose(db, -r.sum(axis=(2, 3), keepdims=True), rtol=1e-5, atol=1e-5)
    assert len(g.memory_plan(2)["steps"]) == 1  # only b's gradient runs a kernel


@pytest.mark.parametrize("neuron", ["relu", "sigmoid"])
@pytest.mark.parametrize("sd", [(2, 8, 4, 5), (1, 8, 1, 1)])
def test_a_sum_of_gradients_takes_the_neurons_gradient_in_its_pass(device, rng, neuron, sd):
    """The gradients a residual block's output receives are summed and multiplied by f' of
    that output in one pass (f' from the output: relu, sigmoid); no neuron-gradient step."""
    shape = (2, 8, 4, 5)
    a, b, d1 = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    d2 = rng.standard_normal(sd).astype(np.float32)
    z = ng.Neuron(ng.Addition(ng.ImageNode(label="a"), ng.ImageNode(label="b"), label="add"), neuron)
    total = ng.Addition(ng.ImageNode(label="d1"), ng.ImageNode(label="d2"), label="sum")
    dz = z.gradient_filter(total.result_image)
    g = ng.Graph([z.result_image, dz.result_image], device=device)
    y, got = g.run({"a": a, "b": b, "d1": d1, "d2": d2})
    assert g.memory_plan(2)["steps"] == [f"add+{neuron}", f"sum+{neuron}"]
    v = (a + b).astype(np.float64)
    check(y, ref.neuron(v, neuron), rtol=1e-5, atol=1e-6)
    check(got, numeric_grad(lambda u: np.sum(ref.neuron(u, neuron) * (d1 + d2)), v), rtol=3e-3, atol=3e-4)


def test_a_single_image_broadcasts_along_the_batch_only_into_arithmetic(device, rng):
    x = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    scale = rng.standard_normal((1, 3, 1, 1)).astype(np.float32)
    src, s = ng.ImageNode(label="x"), ng.ImageNode(label="scale")
    y = ng.Graph(ng.Multiplication(src, s), device=device).run({"x": x, "scale": scale})
    np.testing.assert_allclose(y, x * scale, rtol=1e-6)
    g = ng.Graph(ng.Concatenation([src, s]), device=device)
    with pytest.raises(ValueError, match=r"\[concatenation\] source 1 'scale' holds 1 image but the batch has 4"):
        g.run({"x": x, "scale": scale})
    with pytest.raises(ValueError, match="differ in batch size: 4 and 2"):
        ng.Graph(ng.Addition(src, s), device=device).run({"x": x, "scale": np.ones((2, 3, 1, 1), np.float32)})


def test_shapes_that_do_not_broadcast_name_the_node(device):
    g = ng.Graph(ng.Division(ng.ImageNode(label="a"), ng.ImageNode(label="b"), label="ratio"), device=device)
    with pytest.raises(ValueError, match=r"\[ratio\] sources differ in shape: 3×4×5 and 2×4×5"):
        g.run({"a": np.ones((1, 3, 4, 5), np.float32), "b": np.ones((1, 2, 4, 5), np.float32)})


def test_arithmetic_trains_in_a_network(device, rng):
    """A per-channel offset subtracted and a gate multiplied inside a trained network."""
    x = rng.standard_normal((8, 2, 3, 3)).astype(np.float32)
    src = ng.ImageNode(label="x")
    conv = ng.Convolution(src, ng.ArrayDataSource(ng.ConvolutionDescriptor(kernel=(1, 1), input_channels=2,
                                                                          output_channels=2), seed=1))
    gate = ng.Neuron(src, "sigmoid")
    mixed = ng.Multiplication(ng.Subtraction(conv.result_image, src), gate.result_image)
    fc = ng.FullyConnected(mixed.result_image, ng.ArrayDataSource(ng.ConvolutionDescriptor(
        kernel=(3, 3), input_channels=2, output_channels=3), seed=2))
    loss = ng.Loss(fc.result_image, "softmax_cross_entropy")
    g = loss.training_graph(optimizer=ng.SGD(learning_rate=0.1), device=device)
    y = rng.integers(0, 3, 8)
    first = ng.evaluate(g, x, y)["loss"]
    ng.fit(g, (x, y), epochs=30, batch_size=8, progress=False)
    assert ng.evaluate(g, x, y)["loss"] < 0.5 * first


def test_a_passed_through_gradient_keeps_no_addend_alive(rng):
    """The addend's gradient is aliased to dy and reads nothing, so the addend's memory is free
    once the addition ran: three 8×16×16 tensors fit in two slots of the arena."""
    x, dy = ng.ImageNode(label="x", shape=(8, 16, 16)), ng.ImageNode(label="dy", shape=(8, 16, 16))
    a = ng.Neuron(x, "relu")
    s = ng.Addition(a.result_image, x)
    t = ng.Multiplication(s.result_image, s.result_image)  # two reads: no neuron folds into s
    ga, _ = s.gradient_filters(dy)
    g = ng.Graph([t.result_image, ga.result_image])
    plan = g.memory_plan(1)
    assert plan["steps"] == ["relu", "addition", "multiplication"]
    assert plan["planned_bytes"] == 2 * 8 * 16 * 16 * 4
    xv, r = (rng.standard_normal((1, 8, 16, 16)).astype(np.float32) for _ in range(2))
    y, da = g.run({"x": xv, "dy": r})
    np.testing.assert_allclose(y, (np.maximum(xv, 0) + xv) ** 2, rtol=1e-5)
    np.testing.assert_array_equal(da, r)


# A convolution + residual addition (+ neuron) in the convolution's pass where the backend has
# the kernel: the cpu's epilogue (from the registers whole and in pieces, or from the tile for
# other neurons; frames, Winograd's form and windows that tile rows). Elsewhere the addition
# keeps its step.
def conv_steps(device, conv, add, neuron):
    tail = f"+{neuron}" if neuron else ""
    return [f"{conv}+{add}{tail}"] if device == "cpu" else [conv, add + tail]


RESIDUAL_CASES = [
    # c, o, n, h, w, kernel, stride, padding
    (3, 5, 2, 7, 6, (3, 3), 1, "same"),      # frames, pieces of vectors
    (9, 11, 3, 8, 8, (1, 1), 1, "valid"),    # 1×1 in place, whole vectors
    (4, 6, 2, 9, 8, (3, 3), 2, "same"),      # strided frames
    (16, 16, 4, 32, 32, (3, 3), 1, "same"),  # Winograd's form (enough tiles)
    (3, 4, 2, 2, 20, (1, 5), (1, 5), "valid"),  # windows that tile rows
]


@pytest.mark.parametrize("c,o,n,h,w,k,stride,padding", RESIDUAL_CASES)
@pytest.mark.parametrize("neuron", [None, "relu", "sigmoid"])
def test_a_residual_addition_joins_the_convolution(device, rng, c, o, n, h, w, k, stride, padding, neuron):
    """conv(x) + r (+ neuron) in one step, the addition's left without a kernel (cpu): the
    forward against numpy, and the gradients of x, r and the weights against finite differences."""
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((o, c, *k)) / np.sqrt(c * k[0] * k[1])).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    st = stride if isinstance(stride, tuple) else (stride, stride)

    def fwd(xx, rr, ww=wt, bb=b):
        z = ref.conv2d(xx, ww, bb, st, (1, 1), 1, padding) + rr
        return ref.neuron(z, neuron) if neuron else z

    res = rng.standard_normal(fwd(x, 0).shape).astype(np.float32)
    ds = Capture(wt, b, stride)
    src, r, dy = ng.ImageNode(label="x"), ng.ImageNode(label="r"), ng.ImageNode(label="dy")
    conv = ng.Convolution(src, ds, padding=padding, label="conv")
    add = ng.Addition(conv, r, label="add")
    out = ng.Neuron(add, neuron) if neuron else add
    inference = ng.Graph(out.result_image, device=device)
    got = inference.run({"x": x, "r": res})
    assert inference.memory_plan(n)["steps"] == conv_steps(device, "conv", "add", neuron)
    check(got, fwd(x, res), rtol=1e-4, atol=1e-4)

    dz = out.gradient_filter(dy).result_image if neuron else dy
    dconv, dr = (f.result_image for f in add.gradient_filters(dz))
    g = ng.Graph([out.result_image, conv.gradient_filter(dconv).result_image, dr], device=device)
    u = rng.standard_normal(got.shape).astype(np.float32)
    y, dx, dres = g.run({"x": x, "r": res, "dy": u})
    joined = conv_steps(device, "conv", "add", neuron)
    assert g.memory_plan(n)["steps"][:len(joined)] == joined
    check(y, fwd(x, res), rtol=1e-4, atol=1e-4)
    if x.size > 2000:  # finite differences of every input: the small cases cover them
        return
    check(dx, numeric_grad(lambda v: (fwd(v, res) * u).sum(), x))
    check(dres, numeric_grad(lambda v: (fwd(x, v) * u).sum(), res))
    check(ds.grads[0], numeric_grad(lambda v: (fwd(x, res, ww=v) * u).sum(), wt))
    check(ds.grads[1], numeric_grad(lambda v: (fwd(x, res, bb=v) * u).sum(), b))


def test_a_folded_normalization_and_a_residual_addition_join_the_convolution(device, rng):
    """Inference: conv → bn (folded) → + r → relu is one step (cpu), equal to the unfolded graph's."""
    x = rng.standard_normal((3, 4, 9, 7)).astype(np.float32)
    res = rng.standard_normal((3, 6, 9, 7)).astype(np.float32)
    conv, bn, _, _ = conv_bn(rng, 4, 6, neuron=None)
    r = ng.ImageNode(label="r")
    out = ng.Neuron(ng.Addition(bn, r, label="add"), "relu")
    g = ng.Graph(out.result_image, device=device)
    apart = ng.Graph([out.result_image, conv.result_image], device=device)
    got = g.run({"x": x, "r": res})
    assert g.memory_plan(3)["steps"] == conv_steps(device, conv.label + "+bn", "add", "relu")
    want, _ = apart.run({"x": x, "r": res})
    assert apart.memory_plan(3)["steps"] == [conv.label, "bn+add+relu"]
    check(got, want, rtol=1e-5, atol=1e-5)


def test_a_residual_addition_joins_a_channels_last_convolution(device, rng):
    """A channels-last graph (the cpu convolves NCHW copies, so nothing joins there), folded and
    in training: the values as in NCHW."""
    x = rng.standard_normal((3, 4, 9, 7)).astype(np.float32)
    res = rng.standard_normal((3, 6, 9, 7)).astype(np.float32)
    conv, bn, _, _ = conv_bn(rng, 4, 6, neuron=None)
    r = ng.ImageNode(label="r")
    out = ng.Neuron(ng.Addition(bn, r, label="add"), "relu")
    want = ng.Graph(out.result_image, device=device, layout="NCHW").run({"x": x, "r": res})
    g = ng.Graph(out.result_image, device=device, layout="NHWC")
    check(g.run({"x": x, "r": res}), want, rtol=1e-4, atol=1e-4)

    wt = (rng.standard_normal((6, 4, 3, 3)) / 6).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    src, dy = ng.ImageNode(label="x"), ng.ImageNode(label="dy")
    u = rng.standard_normal(res.shape).astype(np.float32)
    results = []
    for layout in ("NCHW", "NHWC"):
        ds = Capture(wt, b)
        conv = ng.Convolution(src, ds, padding="same", label="conv")
        sum_ = ng.Neuron(ng.Addition(conv, r, label="add"), "relu")
        dz = sum_.gradient_filter(dy).result_image
        g = ng.Graph([sum_.result_image, conv.gradient_filter(dz).result_image], device=device, layout=layout)
        results.append((*g.run({"x": x, "r": res, "dy": u}), *ds.grads))
        if layout == "NCHW":
            joined = conv_steps(device, "conv", "add", "relu")
            assert g.memory_plan(3)["steps"][:len(joined)] == joined
    for got, want in zip(results[1], results[0]):
        check(got, want, rtol=1e-4, atol=1e-4)
