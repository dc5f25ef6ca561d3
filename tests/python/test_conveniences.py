"""What a new user reaches for on day one: predict, parameters, summary, float64 and listed
inputs, numbered labels, schedules, validation history, progress lines, curves; and the clear
errors those paths give."""

import numpy as np
import pytest
from test_training import digits, small_net  # noqa: F401  (a fixture)

import nngraph as ng


def softmax_cross_entropy(logits, y):
    z = logits - logits.max(axis=1, keepdims=True)
    return float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(y)), y]))


def test_predict_batches_and_drops_the_trailing_1x1(device, digits):  # noqa: F811
    (x, _), _ = digits
    loss, _ = small_net(ng.Adam())
    g = loss.training_graph(device=device)
    p = g.predict(x[:300], batch_size=64)
    assert p.shape == (300, 10)
    np.testing.assert_allclose(p, g.inference().run(x[:300]).reshape(300, 10), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.predict(x[:300].astype(np.float64), batch_size=300), p, rtol=1e-5, atol=1e-6)
    conv = ng.Graph(ng.Neuron(ng.ImageNode(), "relu"), device=device)
    assert conv.predict(x[:5]).shape == (5, 1, 8, 8)
    assert conv.predict(x[:5].transpose(0, 2, 3, 1), layout="NHWC").shape == (5, 8, 8, 1)


def test_parameters_summary_and_repr(digits):  # noqa: F811
    loss, srcs = small_net(ng.Adam())
    g = loss.training_graph()
    params = g.parameters()
    assert list(params) == ["c1", "f1", "f2"]
    np.testing.assert_array_equal(params["f1"]["weights"], srcs["f1"].weights())
    assert params["c1"]["weights"].shape == (16, 1, 3, 3) and params["c1"]["biases"].shape == (16,)
    text = g.summary()
    total = sum(p["weights"].size + p["biases"].size for p in params.values())
    assert f"{total:,} parameters" in text
    assert "(16, 8, 8)" in text and "(10, 1, 1)" in text and "max_pooling" in text
    assert "intermediate images per image" in text
    assert repr(g) == f"Graph(cpu, training, {len(g._summary_rows())} nodes, {total:,} parameters)"


def test_default_labels_are_numbered_within_a_graph(tmp_path):
    x = ng.ImageNode(shape=(3, 1, 12))
    h = ng.RNN(x, [ng.LSTM(3, 5), ng.LSTM(5, 5)])
    h = ng.RNN(h, ng.LSTM(5, 4), output="last")
    a, b = ng.ArrayDataSource(ng.ConvolutionDescriptor(1, 4, 4)), ng.ArrayDataSource(ng.ConvolutionDescriptor(1, 4, 3))
    out = ng.FullyConnected(ng.FullyConnected(h, a), b)
    g = ng.Loss(out, ng.LossDescriptor("softmax_cross_entropy")).training_graph(optimizer=ng.Adam())
    labels = [ds.label() for ds in g.data_sources]
    assert labels == ["lstm_1", "lstm_2", "lstm_3", "fully_connected_1", "fully_connected_2"]
    ng.save(tmp_path / "rnn.safetensors", g)
    ng.load(tmp_path / "rnn.safetensors", g)
    twin = ng.ArrayDataSource(ng.ConvolutionDescriptor(1, 4, 4), label="same")
    other = ng.ArrayDataSource(ng.ConvolutionDescriptor(1, 4, 3), label="same")
    g2 = ng.Graph(ng.FullyConnected(ng.FullyConnected(ng.ImageNode(shape=(4, 1, 1)), twin), other))
    with pytest.raises(ng.InvalidInputError, match=r"distinct, non-empty labels.*label="):
        ng.save(tmp_path / "x.safetensors", g2)


def test_float64_and_lists_are_accepted_where_users_pass_them(device, digits):  # noqa: F811
    (x, y), _ = digits
    g = ng.Graph(ng.Neuron(ng.ImageNode(), "relu"), device=device)
    np.testing.assert_array_equal(g.run(x[:4].astype(np.float64)), g.run(x[:4]))
    np.testing.assert_array_equal(g.run(x[:4].tolist()), g.run(x[:4]))
    np.testing.assert_array_equal(g.run(list(x[:4])), g.run(x[:4]))  # a list of images is a batch
    loss, _ = small_net(ng.Adam())
    history = ng.fit(loss.training_graph(device=device), (x[:256].astype(np.float64), list(y[:256])),
                     epochs=1, progress=False)
    assert np.isfinite(history["loss"][0])


def test_big_endian_arrays_are_read_by_value(device, rng):
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    g = ng.Graph(ng.Neuron(ng.ImageNode(), "linear", a=2.0), device=device)
    np.testing.assert_array_equal(g.run(x.astype(">f4")), 2 * x)
    np.testing.assert_array_equal(g.run(x.astype(">f2")), 2 * x.astype(np.float16))
    w = rng.standard_normal((2, 3, 1, 1)).astype(np.float32)
    ds = ng.ArrayDataSource(ng.ConvolutionDescriptor(1, 3, 2), w.astype(">f4"), None)
    np.testing.assert_array_equal(ds.weights(), w)


def test_messages_for_wrong_fit_and_evaluate_arguments(digits):  # noqa: F811
    (x, y), _ = digits
    loss, _ = small_net(ng.Adam())
    g = loss.training_graph()
    with pytest.raises(ng.InvalidInputError, match=r"\[fit\] no labels given"):
        ng.fit(g, (x, None))
    with pytest.raises(ng.InvalidInputError, match=r"\[evaluate\] 1400 images but 10 labels"):
        ng.evaluate(g, x, y[:10])
    with pytest.raises(ValueError, match=r"class indices must be integers, got float64 \(convert with .astype"):
        g.run(x[:64], labels=y[:64].astype(np.float64))


# ---- schedules and fit's options


def test_schedules_values():
    s = ng.schedules
    assert s.constant(0.1)(99) == 0.1
    assert [s.step_decay(1.0, 2, 0.5)(k) for k in range(5)] == [1, 1, 0.5, 0.5, 0.25]
    assert s.exponential(1.0, 0.5, 2)(3) == pytest.approx(0.5 ** 1.5)
    cos = s.cosine(1.0, total_steps=10, warmup_steps=2, final_lr=0.1)
    assert [cos(0), cos(1), cos(2), cos(10)] == pytest.approx([0.5, 1.0, 1.0, 0.1])
    assert cos(6) == pytest.approx(0.1 + 0.45 * (1 + np.cos(np.pi * 0.5)))
    one = s.one_cycle(1.0, total_steps=10, pct_start=0.3)
    assert one(0) == pytest.approx(1 / 25) and one(3) == pytest.approx(1.0) and one(10) == pytest.approx(1 / 25e4)
    tri = s.triangular(0.1, 1.0, 4)
    assert [tri(k) for k in (0, 2, 4, 6, 8)] == pytest.approx([0.1, 0.55, 1.0, 0.55, 0.1])
    with pytest.raises(ValueError, match="total_steps must be >= 1"):
        s.cosine(1.0, 0)


def test_each_step_uses_the_rate_set_when_it_was_encoded(device, digits):  # noqa: F811
    """Steps in flight keep their own learning rate: a rate of 0 after step 0 leaves exactly one
    step's change, whatever the queue did meanwhile."""
    (x, y), _ = digits
    ref, ref_srcs = small_net(ng.SGD(learning_rate=0.1), keep=1.0)
    ref.training_graph(device=device).run(x[:32], labels=y[:32])
    loss, srcs = small_net(ng.SGD(learning_rate=0.5), keep=1.0)
    seen = []
    g = loss.training_graph(device=device)
    ng.fit(g, (x[:128], y[:128]), epochs=1, batch_size=32, shuffle=False, progress=False,
           lr_schedule=lambda step: 0.1 if step == 0 else 0.0,
           batch_callbacks=[lambda step, logs: seen.append((step, logs["learning_rate"]))])
    assert seen == [(0, 0.1), (1, 0.0), (2, 0.0), (3, 0.0)]
    for k in srcs:
        np.testing.assert_allclose(srcs[k].weights(), ref_srcs[k].weights(), rtol=1e-5, atol=1e-6)


def test_a_schedule_may_set_each_optimizer_its_own_rate(digits):  # noqa: F811
    """{optimizer: rate} sets each; a bad rate for one sets none of them."""
    (x, y), _ = digits
    loss, srcs = small_net(keep=1.0)
    first, second = ng.SGD(learning_rate=0.5), ng.SGD(learning_rate=0.5)
    srcs["c1"].optimizer = first
    srcs["f1"].optimizer = srcs["f2"].optimizer = second
    g = loss.training_graph()
    history = ng.fit(g, (x[:64], y[:64]), batch_size=32, progress=False,
                     lr_schedule=lambda step: {first: 0.01 * (step + 1), second: 0.2})
    assert (first.learning_rate, second.learning_rate) == pytest.approx((0.02, 0.2))
    assert history["learning_rate"] == [pytest.approx(0.02)]
    with pytest.raises(ValueError, match="rates must be finite and >= 0"):
        ng.fit(g, (x[:64], y[:64]), progress=False, lr_schedule=lambda step: {first: 0.3, second: -1.0})
    assert (first.learning_rate, second.learning_rate) == pytest.approx((0.02, 0.2))
    with pytest.raises(ValueError, match="trains none of the graph's data sources"):
        ng.fit(g, (x[:64], y[:64]), progress=False, lr_schedule=lambda step: {first: 0.3, ng.SGD(): 0.1})
    assert first.learning_rate == pytest.approx(0.02)


def test_history_has_validation_loss_and_accuracy(digits):  # noqa: F811
    (x, y), (xt, yt) = digits
    loss, _ = small_net(ng.Adam(learning_rate=0.003))
    g = loss.training_graph()
    history = ng.fit(g, (x, y), epochs=2, validation=(xt, yt), progress=False,
                     lr_schedule=ng.schedules.cosine(0.003, total_steps=44))
    assert len(history["val_loss"]) == len(history["val_accuracy"]) == 2
    result = ng.evaluate(g, xt, yt)
    logits = g.predict(xt)
    assert result["accuracy"] == history["val_accuracy"][-1] == np.mean(logits.argmax(axis=1) == yt)
    assert result["loss"] == pytest.approx(softmax_cross_entropy(logits.astype(np.float64), yt), rel=1e-4)
    assert result["loss"] == pytest.approx(history["val_loss"][-1])
    assert history["learning_rate"][-1] == pytest.approx(ng.schedules.cosine(0.003, 44)(43))
    assert ng.evaluate(g.inference(), xt, yt)["loss"] is None


def test_progress_is_one_line_per_epoch_off_a_terminal(capsys, digits):  # noqa: F811
    (x, y), (xt, yt) = digits
    loss, _ = small_net(ng.Adam())
    ng.fit(loss.training_graph(), (x[:200], y[:200]), epochs=3, validation=(xt, yt))
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and lines[2].startswith("epoch 3/3: loss") and "val_accuracy" in lines[2]


def test_plot_history_writes_a_picture(tmp_path):
    history = {"loss": [1.0, 0.5, 0.3], "val_loss": [1.1, 0.7, 0.6], "accuracy": [0.5, 0.8, 0.9],
               "val_accuracy": [0.4, 0.7, 0.8]}
    ng.plot_history(history, tmp_path / "curves.png")
    data = (tmp_path / "curves.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10000
    with pytest.raises(ValueError, match="no epoch"):
        ng.plot_history({"loss": []}, tmp_path / "none.png")


def test_progress_is_a_bar_redrawn_in_place_on_a_terminal(capsys, monkeypatch, digits):  # noqa: F811
    (x, y), _ = digits
    monkeypatch.setattr(type(__import__("sys").stderr), "isatty", lambda self: True, raising=False)
    loss, _ = small_net(ng.Adam())
    ng.fit(loss.training_graph(), (x[:200], y[:200]), epochs=2)
    err = capsys.readouterr().err
    assert "\r" in err and "epoch 2/2" in err and "epoch 2/2: loss" not in err  # tqdm's bar, no log lines
