"""Recurrent layers against the float64 numpy reference: forward values, and every gradient
(inputs, initial state, each weight matrix, biases, peepholes) against finite differences."""

import numpy as np
import pytest
import reference as ref
from test_gradients import Capture, check, numeric_grad

import nngraph as ng

# cell, options for the descriptor factory, options for the reference
CELLS = [
    ("single_gate", {}, {}),
    ("single_gate", {"neuron": "relu"}, {"act": "relu"}),
    ("lstm", {}, {}),
    ("lstm", {"peephole": True}, {}),
    ("lstm", {"cell_to_output_neuron": "softplus", "gate_neuron": "hard_sigmoid"},
     {"out": "softplus", "gate": "hard_sigmoid"}),
    ("gru", {}, {}),
    ("gru", {"reset_after": False}, {"reset_after": False}),
    ("mgu", {}, {}),
]
FACTORY = {"single_gate": ng.SingleGate, "lstm": ng.LSTM, "gru": ng.GRU, "mgu": ng.MGU}


def make_params(rng, cell, i, h, peephole=False, unit=False, scale=0.5):
    g = ref.GATES[cell]
    p = {"W": None if unit else rng.standard_normal((g * h, i)) * scale,
         "U": rng.standard_normal((g * h, h)) * scale,
         "bi": rng.standard_normal(g * h) * scale,
         "bh": rng.standard_normal(g * h) * scale,
         "P": rng.standard_normal((3, h)) * scale if peephole else None}
    return {k: None if v is None else v.astype(np.float32) for k, v in p.items()}


class GateSources:
    """One Capture data source per gate matrix, as the MPS descriptors take them."""

    def __init__(self, p, h):
        blocks = lambda m: [m[k * h:(k + 1) * h] for k in range(m.shape[0] // h)]  # noqa: E731
        self.input = [] if p["W"] is None else [
            Capture(w[:, :, None, None].copy(), b.copy()) for w, b in zip(blocks(p["W"]), blocks(p["bi"]))]
        self.recurrent = [Capture(w[:, :, None, None].copy(), b.copy())
                          for w, b in zip(blocks(p["U"]), blocks(p["bh"]))]
        self.memory = [] if p["P"] is None else [Capture(m.reshape(h, 1, 1, 1).copy(), None, groups=h) for m in p["P"]]

    def kwargs(self):
        out = {"recurrent_weights": self.recurrent}
        if self.input:
            out["input_weights"] = self.input
        if self.memory:
            out["memory_weights"] = self.memory
        return out

    def gradients(self):
        """(dW, dU, dbi, dbh, dP) stacked like the reference's parameters."""
        cat = lambda caps, k: np.concatenate([c.grads[k].reshape(c.w.shape[0], -1) for c in caps])  # noqa: E731
        d_w = cat(self.input, 0) if self.input else None
        d_bi = np.concatenate([c.grads[1] for c in self.input]) if self.input else None
        d_p = np.stack([c.grads[0].ravel() for c in self.memory]) if self.memory else None
        return d_w, cat(self.recurrent, 0), d_bi, np.concatenate([c.grads[1] for c in self.recurrent]), d_p


def seq(x):
    """(N, C, 1, T) image → time-major (T, N, C)."""
    return x.reshape(x.shape[0], x.shape[1], -1).transpose(2, 0, 1)


def image(y):
    """time-major (T, N, C) → (N, C, 1, T)."""
    return y.transpose(1, 2, 0)[:, :, None, :]


def layer_ref(cell, ref_opts, p, reverse=False, unit=False):
    def run(x, **override):
        q = {**p, **override}
        return ref.rnn_layer(x, cell, None if unit else q["W"], q["U"], q["bi"], q["bh"], q["P"], reverse=reverse,
                             **ref_opts)
    return run


@pytest.mark.parametrize("cell,opts,ref_opts", CELLS)
@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("steps", [1, 5])
def test_cell_forward_and_gradients(device, rng, cell, opts, ref_opts, direction, steps):
    n, i, h = 2, 3, 4
    p = make_params(rng, cell, i, h, peephole=opts.get("peephole", False))
    srcs = GateSources(p, h)
    desc = FACTORY[cell](i, h, direction=direction, **srcs.kwargs(), **opts)
    x = rng.standard_normal((n, i, 1, steps)).astype(np.float32)
    run = layer_ref(cell, ref_opts, p, reverse=direction == "backward")
    want = image(run(seq(x))[0])
    r = rng.standard_normal(want.shape).astype(np.float32)

    src, dy = ng.ImageNode(label="x"), ng.ImageNode(label="dy")
    node = ng.RNN(src, desc)
    g = ng.Graph([node.result_image, node.gradient_filter(dy).result_image], device=device)
    y, dx = g.run({"x": x, "dy": r})
    check(y, want, rtol=1e-4, atol=1e-5)

    check(dx, numeric_grad(lambda v: (image(run(seq(v))[0]) * r).sum(), x))
    d_w, d_u, d_bi, d_bh, d_p = srcs.gradients()
    for name, got in [("W", d_w), ("U", d_u), ("bi", d_bi), ("bh", d_bh), ("P", d_p)]:
        if p[name] is None:
            continue
        check(got, numeric_grad(lambda v, k=name: (image(run(seq(x), **{k: v})[0]) * r).sum(), p[name]))


def test_layer_source_matches_per_gate_sources(device, rng):
    n, i, h, steps = 3, 4, 5, 6
    p = make_params(rng, "lstm", i, h, peephole=True)
    layer = np.zeros((4 * h, i + h + 1), np.float32)
    layer[:, :i], layer[:, i:i + h] = p["W"], p["U"]
    for k, gate in enumerate([0, 1, 3]):  # peepholes of i, f, o in the last column
        layer[gate * h:(gate + 1) * h, -1] = p["P"][k]
    p["bh"][:] = 0  # a layer source carries input biases only
    ds = ng.ArrayDataSource(ng.LSTM(i, h, peephole=True).layer_descriptor,
                            weights=layer[:, :, None, None], biases=p["bi"])
    desc = ng.LSTM(i, h, weights=ds, peephole=True)
    x = rng.standard_normal((n, i, 2, steps // 2)).astype(np.float32)  # positions row by row
    y = ng.Graph([ng.RNN(ng.ImageNode(), desc).result_image], device=device).run([x])
    want = ref.rnn_layer(seq(x), "lstm", p["W"], p["U"], p["bi"], None, p["P"])[0]
    check(y, image(want).reshape(y.shape), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cell,opts,ref_opts", [c for c in CELLS if c[0] != "single_gate"])
def test_layer_source_gradients(device, rng, cell, opts, ref_opts):
    """One source per layer stacks the gates' matrices, so one product serves them all."""
    n, i, h, steps = 2, 3, 4, 5
    peephole = opts.get("peephole", False)
    p = make_params(rng, cell, i, h, peephole=peephole)
    g = ref.GATES[cell]
    layer = np.zeros((g * h, i + h + peephole), np.float32)
    layer[:, :i], layer[:, i:i + h] = p["W"], p["U"]
    if peephole:
        for k, gate in enumerate([0, 1, 3]):
            layer[gate * h:(gate + 1) * h, -1] = p["P"][k]

    def run(x, m):
        peep = np.stack([m[q * h:(q + 1) * h, -1] for q in (0, 1, 3)]) if peephole else None
        return image(ref.rnn_layer(x, cell, m[:, :i], m[:, i:i + h], p["bi"], None, peep, **ref_opts)[0])

    cap = Capture(layer[:, :, None, None], p["bi"].copy())
    desc = FACTORY[cell](i, h, weights=cap, **opts)
    x = rng.standard_normal((n, i, 1, steps)).astype(np.float32)
    want = run(seq(x), layer)
    r = rng.standard_normal(want.shape).astype(np.float32)
    src, dy = ng.ImageNode(label="x"), ng.ImageNode(label="dy")
    node = ng.RNN(src, desc)
    y, dx = ng.Graph([node.result_image, node.gradient_filter(dy).result_image], device=device).run({"x": x, "dy": r})
    check(y, want, rtol=1e-4, atol=1e-5)
    check(dx, numeric_grad(lambda v: (run(seq(v), layer) * r).sum(), x))
    d_layer, d_bias = cap.grads
    check(d_layer.reshape(layer.shape), numeric_grad(lambda v: (run(seq(x), v) * r).sum(), layer))
    bias_grad = numeric_grad(lambda v: (image(ref.rnn_layer(seq(x), cell, p["W"], p["U"], v, None, p["P"],
                                                            **ref_opts)[0]) * r).sum(), p["bi"])
    check(d_bias, bias_grad)


def test_wide_layer(device, rng):
    """A hidden size past what register-resident kernels hold (cuda picks another algorithm)."""
    n, i, h, steps = 2, 5, 300, 3
    p = make_params(rng, "lstm", i, h, scale=0.1)
    desc = ng.LSTM(i, h, **GateSources(p, h).kwargs())
    run = layer_ref("lstm", {}, p)
    x = rng.standard_normal((n, i, 1, steps)).astype(np.float32)
    want = image(run(seq(x))[0])
    r = rng.standard_normal(want.shape).astype(np.float32)
    src, dy = ng.ImageNode(label="x"), ng.ImageNode(label="dy")
    node = ng.RNN(src, desc)
    y, dx = ng.Graph([node.result_image, node.gradient_filter(dy).result_image], device=device).run({"x": x, "dy": r})
    check(y, want, rtol=1e-4, atol=1e-5)
    check(dx, numeric_grad(lambda v: (image(run(seq(v))[0]) * r).sum(), x))


def test_unit_input_transform(device, rng):
    n, h, steps = 2, 3, 4
    p = make_params(rng, "gru", h, h, unit=True)
    p["bi"][:] = 0  # input biases come with input weights, which the unit transform has none of
    srcs = GateSources(p, h)
    desc = ng.GRU(h, h, unit_input=True, **srcs.kwargs())
    x = rng.standard_normal((n, h, 1, steps)).astype(np.float32)
    run = layer_ref("gru", {}, p, unit=True)
    r = rng.standard_normal((n, h, 1, steps)).astype(np.float32)
    src, dy = ng.ImageNode(label="x"), ng.ImageNode(label="dy")
    node = ng.RNN(src, desc)
    y, dx = ng.Graph([node.result_image, node.gradient_filter(dy).result_image], device=device).run({"x": x, "dy": r})
    check(y, image(run(seq(x))[0]), rtol=1e-4, atol=1e-5)
    check(dx, numeric_grad(lambda v: (image(run(seq(v))[0]) * r).sum(), x))
    assert srcs.recurrent[0].grads is not None


@pytest.mark.parametrize("combine", ["sum", "concatenate"])
@pytest.mark.parametrize("output", ["sequence", "last"])
def test_bidirectional_stack(device, rng, combine, output):
    n, i, h, steps = 2, 3, 4, 5
    pf, pb = make_params(rng, "gru", i, h), make_params(rng, "lstm", i, h)
    o1 = h if combine == "sum" else 2 * h
    p2 = make_params(rng, "mgu", o1, 3)
    sf, sb, s2 = GateSources(pf, h), GateSources(pb, h), GateSources(p2, 3)
    layers = [(ng.GRU(i, h, **sf.kwargs()), ng.LSTM(i, h, direction="backward", **sb.kwargs())),
              ng.MGU(o1, 3, **s2.kwargs())]

    def fwd(xs, **over):
        q = {k: {**v, **over.get(k, {})} for k, v in {"f": pf, "b": pb, "2": p2}.items()}
        yf = layer_ref("gru", {}, q["f"])(xs)[0]
        yb = layer_ref("lstm", {}, q["b"], reverse=True)(xs)[0]
        mid = yf + yb if combine == "sum" else np.concatenate([yf, yb], axis=2)
        ys, hn, _ = layer_ref("mgu", {}, q["2"])(mid)
        return image(ys) if output == "sequence" else hn[:, :, None, None]

    x = rng.standard_normal((n, i, 1, steps)).astype(np.float32)
    want = fwd(seq(x))
    r = rng.standard_normal(want.shape).astype(np.float32)
    src, dy = ng.ImageNode(label="x"), ng.ImageNode(label="dy")
    node = ng.RNN(src, layers, combine=combine, output=output)
    y, dx = ng.Graph([node.result_image, node.gradient_filter(dy).result_image], device=device).run({"x": x, "dy": r})
    check(y, want, rtol=1e-4, atol=1e-5)
    check(dx, numeric_grad(lambda v: (fwd(seq(v)) * r).sum(), x))
    check(sb.gradients()[1], numeric_grad(lambda v: (fwd(seq(x), b={"U": v}) * r).sum(), pb["U"]))
    check(s2.gradients()[0], numeric_grad(lambda v: (fwd(seq(x), **{"2": {"W": v}}) * r).sum(), p2["W"]))


def test_last_output_of_a_backward_layer_is_its_state_at_the_first_position(device, rng):
    p = make_params(rng, "single_gate", 2, 3)
    desc = ng.SingleGate(2, 3, direction="backward", **GateSources(p, 3).kwargs())
    x = rng.standard_normal((2, 2, 1, 4)).astype(np.float32)
    y = ng.Graph([ng.RNN(ng.ImageNode(), desc, output="last").result_image], device=device).run([x])
    ys, hn, _ = layer_ref("single_gate", {}, p, reverse=True)(seq(x))
    check(y[:, :, 0, 0], ys[0], rtol=1e-4, atol=1e-5)
    check(y[:, :, 0, 0], hn, rtol=1e-4, atol=1e-5)


def test_rnn_trains_in_a_graph_with_a_loss(device, rng):
    """CNN → LSTM → fully connected on a toy task: is the sum of the sequence positive?"""
    n, steps = 64, 12
    x = rng.standard_normal((n, 1, 1, steps)).astype(np.float32)
    labels = (x.sum(axis=(1, 2, 3)) > 0).astype(np.int64)
    src = ng.ImageNode(label="x")
    conv = ng.Convolution(src, ng.ArrayDataSource(ng.ConvolutionDescriptor((1, 1), 1, 4, neuron="tanh"), seed=1))
    lstm = ng.RNN(conv, ng.LSTM(4, 8, seed=2), output="last")
    fc = ng.FullyConnected(lstm, ng.ArrayDataSource(ng.ConvolutionDescriptor((1, 1), 8, 2), weights="glorot", seed=3))
    loss = ng.Loss(fc, "softmax_cross_entropy")
    g = loss.training_graph(device=device, optimizer=ng.Adam(learning_rate=0.02))
    losses = [g.encode(x, labels=labels).loss() for _ in range(60)]
    assert losses[-1] < 0.3 * losses[0]
    probs = ng.Graph([ng.SoftMax(fc).result_image], device=device).run([x])[:, :, 0, 0]
    assert (probs.argmax(1) == labels).mean() > 0.9


def test_bad_rnn_input_raises(device):
    with pytest.raises(ng.InvalidInputError, match=r"\[lstm\] source has 5 feature channels, the first layer reads 3"):
        ng.Graph([ng.RNN(ng.ImageNode(shape=(5, 1, 4)), ng.LSTM(3, 4)).result_image], device=device)
    with pytest.raises(ng.InvalidInputError, match="unit input transform needs as many input as output"):
        ng.GRU(3, 4, unit_input=True)
    with pytest.raises(ng.InvalidInputError, match="needs 4 recurrent weight sources, got 1"):
        ng.LSTM(2, 2, recurrent_weights=[Capture(np.ones((2, 2, 1, 1), np.float32), None)],
                input_weights=[Capture(np.ones((2, 2, 1, 1), np.float32), None)] * 4)
    with pytest.raises(ng.InvalidInputError, match="reads 4 channels but the layer below gives 8"):
        ng.RNN(ng.ImageNode(), [(ng.LSTM(3, 4), ng.LSTM(3, 4, direction="backward")), ng.LSTM(4, 2)])
    with pytest.raises(ng.InvalidInputError, match="forward layer then a backward layer"):
        ng.RNN(ng.ImageNode(), [(ng.LSTM(3, 4), ng.LSTM(3, 4))])
    with pytest.raises(ng.InvalidInputError,
                       match=r"layer data source '' describes convolution 12×7×1×1, expected a 16×7 matrix"):
        ng.LSTM(3, 4, weights=ng.ArrayDataSource(ng.ConvolutionDescriptor((1, 1), 7, 12)))


def as_arrays(matrices):
    return np.stack([m.numpy() for m in matrices])


@pytest.mark.parametrize("cell", ["lstm", "gru", "mgu", "single_gate"])
def test_matrix_training_layer_gradients_include_initial_state(device, rng, cell):
    n, i, h, steps = 3, 2, 4, 4
    p = make_params(rng, cell, i, h, peephole=cell == "lstm")
    srcs = GateSources(p, h)
    opts = {"peephole": True} if cell == "lstm" else {}
    layer = ng.RNNMatrixTrainingLayer(FACTORY[cell](i, h, **srcs.kwargs(), **opts), device=device)
    weights = layer.create_weight_matrices()
    x = rng.standard_normal((steps, n, i)).astype(np.float32)
    h0 = rng.standard_normal((n, h)).astype(np.float32)
    c0 = rng.standard_normal((n, h)).astype(np.float32)
    lstm = cell == "lstm"

    def fwd(xs, hh=h0, cc=c0, **over):
        return ref.rnn_layer(xs, cell, **{"W": p["W"], "U": p["U"], "bi": p["bi"], "bh": p["bh"], "P": p["P"], **over},
                             h0=hh, c0=cc if lstm else None)

    outs, state, hn, cn = layer.encode_forward_sequence(x, weights, initial_states=[h0],
                                                        initial_cell_states=[c0] if lstm else None)
    ys, h_last, c_last = fwd(x)
    check(as_arrays(outs), ys, rtol=1e-4, atol=1e-5)
    check(hn[0].numpy(), h_last, rtol=1e-4, atol=1e-5)
    if lstm:
        check(cn[0].numpy(), c_last, rtol=1e-4, atol=1e-5)
    else:
        assert cn == [None]
    assert state.steps == steps and state.batch == n

    r = rng.standard_normal((steps, n, h)).astype(np.float32)
    rh = rng.standard_normal((n, h)).astype(np.float32)  # gradient arriving at the final state
    total = lambda out: (out[0] * r).sum() + (out[1] * rh).sum()  # noqa: E731
    grads = layer.create_weight_gradient_matrices()
    dx, dh0, dc0 = layer.encode_gradient_sequence(list(r), state, weights, weight_gradients=grads,
                                                  final_state_gradients=[rh])
    check(as_arrays(dx), numeric_grad(lambda v: total(fwd(v)), x))
    check(dh0[0].numpy(), numeric_grad(lambda v: total(fwd(x, hh=v)), h0))
    if lstm:
        check(dc0[0].numpy(), numeric_grad(lambda v: total(fwd(x, cc=v)), c0))
    # weight matrices: per source, weights then biases; the first recurrent matrix stands for all
    first_recurrent = 0 if p["W"] is None else 2 * ref.GATES[cell]
    want_u0 = numeric_grad(lambda v: total(fwd(x, U=np.concatenate([v, p["U"][h:]]))), p["U"][:h])
    check(grads[first_recurrent].numpy(), want_u0)
    before = grads[first_recurrent].numpy().copy()
    layer.encode_gradient_sequence(list(r), state, weights, weight_gradients=grads, accumulate=True,
                                   final_state_gradients=[rh])
    check(grads[first_recurrent].numpy(), 2 * before, rtol=1e-5, atol=1e-6)


def test_matrix_inference_layer_stacks_and_matches_the_graph_node(device, rng):
    layers = [(ng.LSTM(3, 4, seed=1), ng.LSTM(3, 4, direction="backward", seed=2)), ng.GRU(8, 5, seed=3)]
    x = rng.standard_normal((6, 2, 3)).astype(np.float32)
    outs, hn, cn = ng.RNNMatrixLayer(layers, device=device).encode_sequence(x)
    y = ng.Graph([ng.RNN(ng.ImageNode(), layers).result_image], device=device).run([image(x)])
    check(as_arrays(outs), seq(y), rtol=1e-5, atol=1e-6)
    assert [m.rows for m in hn] == [2, 2, 2] and cn[2] is None


def test_bad_matrix_sequences_raise(device, rng):
    layer = ng.RNNMatrixTrainingLayer(ng.LSTM(3, 4), device=device)
    w = layer.create_weight_matrices()
    with pytest.raises(ng.InvalidInputError, match="source 1 has 5 rows, step 0 has 2"):
        layer.encode_forward_sequence([np.ones((2, 3), np.float32), np.ones((5, 3), np.float32)], w)
    with pytest.raises(ng.InvalidInputError, match="source 0 has 2 feature channels, expected 3"):
        layer.encode_forward_sequence([np.ones((2, 2), np.float32)], w)
    with pytest.raises(ng.InvalidInputError, match="source sequence is empty"):
        layer.encode_forward_sequence([], w)
    with pytest.raises(ng.InvalidInputError, match="expected 2 weight matrices, got 1"):
        layer.encode_forward_sequence([np.ones((2, 3), np.float32)], w[:1])
    _, state, _, _ = layer.encode_forward_sequence(np.ones((3, 2, 3), np.float32), w)
    with pytest.raises(ng.InvalidInputError, match="expected 3 output gradients"):
        layer.encode_gradient_sequence([np.ones((2, 4), np.float32)], state, w)


@pytest.mark.parametrize("layout", ["chw", "hwc"])
def test_converters_round_trip_odd_sizes(device, rng, layout):
    x = rng.standard_normal((3, 5, 3, 7)).astype(np.float32)
    m = ng.image_copy_to_matrix(ng.Image(x, device=device), data_layout=layout)
    want = x.reshape(3, -1) if layout == "chw" else x.transpose(0, 2, 3, 1).reshape(3, -1)
    np.testing.assert_array_equal(m.numpy(), want)
    back = ng.matrix_copy_to_image(m, (5, 3, 7), data_layout=layout)
    np.testing.assert_array_equal(back.numpy(), x)
    with pytest.raises(ng.InvalidInputError, match=r"needs a 3×105 matrix, got 3×104"):
        ng.matrix_copy_to_image(ng.Matrix(np.ones((3, 104), np.float32), device=device), (5, 3, 7))


@pytest.mark.parametrize("layout", ["chw", "hwc"])
def test_converter_nodes_and_their_gradients(device, rng, layout):
    x = rng.standard_normal((2, 3, 5, 3)).astype(np.float32)
    src, dy = ng.ImageNode(label="x"), ng.ImageNode(label="dy")
    rows = ng.ImageCopyToMatrixNode(src, data_layout=layout)
    img = ng.MatrixCopyToImageNode(rows, (3, 5, 3), data_layout=layout)
    r = rng.standard_normal((2, 45, 1, 1)).astype(np.float32)
    g = ng.Graph([rows.result_image, img.result_image, rows.gradient_filter(dy).result_image], device=device)
    m, back, dx = g.run({"x": x, "dy": r})
    want = x.reshape(2, -1) if layout == "chw" else x.transpose(0, 2, 3, 1).reshape(2, -1)
    np.testing.assert_array_equal(m[:, :, 0, 0], want)
    np.testing.assert_array_equal(back, x)
    # the gradient of a permutation is the inverse permutation
    inv = r.reshape(2, 3, 5, 3) if layout == "chw" else r.reshape(2, 5, 3, 3).transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(dx, inv)
    rd = rng.standard_normal(x.shape).astype(np.float32)
    dm = ng.Graph([img.gradient_filter(dy).result_image], device=device).run({"x": x, "dy": rd})
    rows_of = rd.reshape(2, -1) if layout == "chw" else rd.transpose(0, 2, 3, 1).reshape(2, -1)
    np.testing.assert_array_equal(dm[:, :, 0, 0], rows_of)


def test_activity_classifier_on_basic_motions(device, capsys):
    from nngraph.examples import activity

    result = activity.main(["--device", device, "--epochs", "12"])
    assert result["accuracy"] >= 0.9
    out = capsys.readouterr().out
    assert "epoch 12: loss" in out and "test accuracy" in out


def test_rnn_weights_checkpoint_round_trip(device, rng, tmp_path):
    from nngraph.models import activity_network

    net = activity_network(length=40, steps=4, seed=3, optimizer=ng.Adam())
    graph = ng.Loss(net.logits, "softmax_cross_entropy").training_graph(device=device)
    x = rng.standard_normal((4, 6, 1, 40)).astype(np.float32)
    graph.encode(x, labels=np.array([0, 1, 2, 3])).wait()
    ng.save(tmp_path / "a.safetensors", graph)
    saved = net.sources["lstm"].weights().copy()
    graph.encode(x, labels=np.array([0, 1, 2, 3])).wait()
    assert not np.array_equal(net.sources["lstm"].weights(), saved)
    ng.load(tmp_path / "a.safetensors", graph)
    np.testing.assert_array_equal(net.sources["lstm"].weights(), saved)
