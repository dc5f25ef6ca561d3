"""Graph API: marshalling, data sources, asynchronous encode, memory plan."""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import nngraph as ng


def tiny_conv(label="conv", seed=0, c=2, o=3):
    return ng.ArrayDataSource(ng.ConvolutionDescriptor(3, c, o), "glorot", "zeros", label, seed)


def test_layouts_strides_and_dtypes(device, rng):
    x = rng.standard_normal((4, 3, 5, 6)).astype(np.float32)
    g = ng.Graph(ng.Neuron(ng.ImageNode(), "linear", a=2.0), device=device)
    np.testing.assert_array_equal(g.run(x), 2 * x)
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    out = g.run(nhwc, layout="NHWC")
    assert out.shape == (4, 5, 6, 3)
    np.testing.assert_array_equal(out, 2 * nhwc)
    wide = rng.standard_normal((4, 3, 5, 12)).astype(np.float32)
    np.testing.assert_array_equal(g.run(wide[:, :, :, ::2]), 2 * wide[:, :, :, ::2])  # strided
    half = x.astype(np.float16)
    out16 = g.run(half)
    assert out16.dtype == np.float16
    np.testing.assert_array_equal(out16, (2 * half.astype(np.float32)).astype(np.float16))
    flat = rng.standard_normal((4, 7)).astype(np.float32)
    assert g.run(flat).shape == (4, 7, 1, 1)


def test_large_batches_pack_on_every_core(device, rng):
    x = rng.standard_normal((37, 3, 61, 50)).astype(np.float32)  # over 1 MiB: packed in parallel
    for a, layout in ((x, "NCHW"), (np.ascontiguousarray(x.transpose(0, 2, 3, 1)), "NHWC"),
                      (x[::-1, :, :, ::-1], "NCHW")):
        want = a if layout == "NCHW" else a.transpose(0, 3, 1, 2)
        np.testing.assert_array_equal(ng.Image(a, layout=layout, device=device).numpy(), want)


def test_image_and_matrix_round_trip(device, rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    img = ng.Image(x, device=device)
    assert img.shape == (2, 3, 4, 5) and img.dtype == "float32"
    np.testing.assert_array_equal(img.numpy(), x)
    np.testing.assert_array_equal(img.numpy(layout="NHWC"), x.transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(img.astype("float16").numpy(), x.astype(np.float16))
    g = ng.Graph(ng.Neuron(ng.ImageNode(), "absolute"), device=device)
    np.testing.assert_array_equal(g.run(img), np.abs(x))
    m = rng.standard_normal((7, 3)).astype(np.float32)
    mat = ng.Matrix(m, device=device)
    assert (mat.rows, mat.columns, mat.row_stride) == (7, 3, 3)
    np.testing.assert_array_equal(mat.numpy(), m)


class LoggingSource(ng.DataSource):
    """Records the graph's calls; weights are only reachable between load and purge."""

    def __init__(self, label, log, weights, layout=ng.WeightsLayout.OIHW):
        super().__init__()
        self._label, self.log, self.values, self.layout = label, log, weights, layout
        self.loaded = False

    def descriptor(self):
        o, i, kh, kw = self.values.shape
        return ng.ConvolutionDescriptor(kernel=(kh, kw), input_channels=i, output_channels=o)

    def label(self):
        return self._label

    def load(self):
        self.log.append(("load", self._label))
        self.loaded = True
        return True

    def purge(self):
        self.log.append(("purge", self._label))
        self.loaded = False

    def weights(self):
        assert self.loaded, "weights read outside load/purge"
        self.log.append(("weights", self._label))
        w = self.values
        return w.transpose(0, 2, 3, 1).copy() if self.layout == ng.WeightsLayout.OHWI else w

    def biases(self):
        self.log.append(("biases", self._label))
        return np.full(self.values.shape[0], 0.5, np.float32)

    def weights_layout(self):
        return self.layout


def test_python_data_source_loaded_just_in_time_one_node_at_a_time(device, rng):
    log = []
    w1 = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((4, 3, 1, 1)).astype(np.float32)
    x = ng.ImageNode(shape=(2, 6, 6))
    c2 = ng.Convolution(ng.Convolution(x, LoggingSource("a", log, w1), padding="same"),
                        LoggingSource("b", log, w2))
    g = ng.Graph(c2, device=device)
    once = [("load", "a"), ("weights", "a"), ("biases", "a"), ("purge", "a"),
            ("load", "b"), ("weights", "b"), ("biases", "b"), ("purge", "b")]
    assert log == once
    xs = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
    y1 = g.run(xs)
    g.run(xs)
    assert log == once  # weights are not re-read per run
    g.reload_from_data_sources()
    assert log == once + once
    np.testing.assert_allclose(g.run(xs), y1)
    assert g.node_labels == ["a", "b"]


def test_inference_and_evaluation_graphs_are_made_once_until_a_reload(device, rng):
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    source = ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 2, 3), weights=w, optimizer=ng.SGD(0.1))
    conv = ng.Convolution(ng.ImageNode(), source, padding="same")
    g = ng.Loss(conv, "mean_squared_error").training_graph(device=device)
    inference, evaluation = g.inference(), g.evaluation()
    assert g.inference() is inference and g.evaluation() is evaluation
    xs = rng.standard_normal((2, 2, 5, 5)).astype(np.float32)
    ys = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    before = inference.run(xs)
    g.run(xs, labels=ys)  # trains the weights the kept graphs read in place
    after = g.inference().run(xs)
    assert np.abs(after - before).max() > 1e-4
    np.testing.assert_allclose(g.evaluation().run(xs, labels=ys), after, rtol=1e-6)
    g.reload_from_data_sources()  # the (trained) values read again into new buffers
    assert g.inference() is not inference and g.evaluation() is not evaluation
    np.testing.assert_allclose(g.inference().run(xs), after, rtol=1e-6)
    g.allow_tf32 = True  # each call hands on the tf32 setting, and with it the layout it plans
    assert g.inference().allow_tf32 and g.evaluation().allow_tf32
    assert g.evaluation().layout == g.layout
    g.allow_tf32 = False
    assert not g.inference().allow_tf32 and not g.evaluation().allow_tf32


def test_ohwi_weights_layout_matches_oihw(device, rng):
    w = rng.standard_normal((3, 2, 3, 2)).astype(np.float32)
    xs = rng.standard_normal((2, 2, 5, 5)).astype(np.float32)
    outs = []
    for layout in (ng.WeightsLayout.OIHW, ng.WeightsLayout.OHWI):
        g = ng.Graph(ng.Convolution(ng.ImageNode(), LoggingSource("c", [], w, layout)), device=device)
        outs.append(g.run(xs))
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6)


def test_graph_keeps_python_data_source_alive(device, rng):
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)

    def build():
        return ng.Graph(ng.Convolution(ng.ImageNode(), LoggingSource("s", [], w)), device=device)

    g = build()
    import gc
    gc.collect()
    g.reload_from_data_sources()  # the subclass's methods are still reachable
    assert g.run(rng.standard_normal((1, 2, 4, 4)).astype(np.float32)).shape == (1, 3, 2, 2)


def test_reload_is_all_or_nothing(device, rng):
    log = []
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    a = LoggingSource("a", log, w)
    b = LoggingSource("b", log, rng.standard_normal((3, 3, 3, 3)).astype(np.float32))
    g = ng.Graph(ng.Convolution(ng.Convolution(ng.ImageNode(), a, padding="same"), b), device=device)
    xs = rng.standard_normal((2, 2, 5, 5)).astype(np.float32)
    before = g.run(xs)
    a.values = 10 * w                      # a's new weights are fine ...
    b.values = np.zeros((3, 3, 3), np.float32)  # ... b's are the wrong size
    with pytest.raises(ValueError, match=r"\[b\].*weights"):
        g.reload_from_data_sources()
    assert log[-1] == ("purge", "b")
    np.testing.assert_array_equal(g.run(xs), before)  # neither a nor b changed


def test_encode_is_asynchronous_and_bounded(device, rng):
    g = ng.Graph(ng.SoftMax(ng.ImageNode()), device=device, max_in_flight=2)
    assert g.max_in_flight == 2
    xs = [rng.standard_normal((8, 10, 1, 1)).astype(np.float32) for _ in range(6)]
    seen, lock = [], threading.Lock()

    def done(handle):
        with lock:
            seen.append(handle.result().copy())

    handles = [g.encode(x, callback=done) for x in xs]
    for h in handles:
        h.wait()
        assert h.done
    assert len(seen) == 6
    for x, h, s in zip(xs, handles, seen):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        np.testing.assert_allclose(h.result(), e / e.sum(axis=1, keepdims=True), rtol=1e-5)
        np.testing.assert_array_equal(h.result(), s)


def test_a_slot_frees_once_the_callback_has_run(device, rng):
    g = ng.Graph(ng.SoftMax(ng.ImageNode()), device=device, max_in_flight=1)
    x = rng.standard_normal((4, 5, 1, 1)).astype(np.float32)
    release, order = threading.Event(), []

    def slow(handle):
        release.wait(10)
        order.append("callback")

    def run_second(graph=g):
        graph.encode(x).wait()
        order.append("second")

    first = g.encode(x, callback=slow)
    second = threading.Thread(target=run_second)
    second.start()
    time.sleep(0.2)
    assert order == [] and not first.done  # the second encode waits for the first's slot
    release.set()
    second.join(10)
    first.wait()
    assert order == ["callback", "second"]
    for _ in range(8):
        g.encode(x, callback=lambda h: order.append(h.result().shape))  # handles dropped unwaited
    del g, run_second  # waits for all of them
    assert order[2:] == [(4, 5, 1, 1)] * 8


def test_run_runs_on_the_calling_thread_after_earlier_callbacks(device, rng):
    from sources import FixedSource
    threads, order = [], []

    class Recording(FixedSource):
        def update(self, gradient, weights):
            threads.append(threading.get_ident())

    w = rng.standard_normal((2, 3, 1, 1)).astype(np.float32)
    loss = ng.Loss(ng.Convolution(ng.ImageNode(), Recording(w, None, "recording")),
                   ng.LossDescriptor("mean_squared_error", "sum"))
    g = loss.training_graph(device=device)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    t = rng.standard_normal((2, 2, 4, 4)).astype(np.float32)
    g.run(x, labels=t)
    assert threads == [threading.get_ident()]  # nothing queued: no hand-off to the graph's threads
    if device == "cpu":  # encode returns at once; its worker runs the step
        g.encode(x, labels=t).wait()
        assert threads[1] != threading.get_ident()

    h = ng.Graph(ng.SoftMax(ng.ImageNode()), device=device)
    y = rng.standard_normal((4, 5, 1, 1)).astype(np.float32)
    h.encode(y, callback=lambda _: (time.sleep(0.2), order.append("callback")))
    np.testing.assert_array_equal(h.run(y), h.run(y))
    order.append("run")
    assert order == ["callback", "run"]  # a run completes after the callbacks of encodes before it


def test_callback_errors_surface_in_wait(device, rng):
    g = ng.Graph(ng.SoftMax(ng.ImageNode()), device=device)

    def boom(handle):
        raise KeyError("from callback")

    h = g.encode(rng.standard_normal((2, 3, 1, 1)).astype(np.float32), callback=boom)
    with pytest.raises(KeyError, match="from callback"):
        h.wait()
    assert g.run(np.ones((1, 3, 1, 1), np.float32)).shape == (1, 3, 1, 1)  # still usable


def test_multiple_results_and_memory_plan(device, rng):
    x = ng.ImageNode(shape=(3, 16, 16))
    c = ng.Convolution(x, tiny_conv(c=3, o=8), padding="same")
    r = ng.Neuron(c, "relu")
    p = ng.Pooling(r)
    s = ng.Neuron(p, "sigmoid")
    g = ng.Graph([s, p], device=device)
    plan = g.memory_plan(32)
    assert plan["steps"] == ["conv+relu", "max_pooling", "sigmoid"]
    assert plan["planned_bytes"] < plan["naive_bytes"]
    xs = rng.standard_normal((32, 3, 16, 16)).astype(np.float32)
    ys, yp = g.run(xs)
    np.testing.assert_allclose(ys, 1 / (1 + np.exp(-yp)), rtol=1e-5)


def test_results_are_their_own_from_run_to_run(device, rng):
    # An eager run writes a result where it is returned, not in the arena, and large freed
    # blocks are reused: a result returned twice is two arrays, and later runs (into reused
    # memory, once earlier results are dropped) leave the results still held alone.
    import reference as ref
    src = tiny_conv(c=3, o=4)
    c = ng.Convolution(ng.ImageNode(), src, padding="same")
    r = ng.Neuron(c, "relu")
    g = ng.Graph([r, r, ng.Concatenation([r, ng.Neuron(c, "sigmoid")])], device=device)
    w, b = src.weights(), src.biases()

    def expected(x):
        conv = ref.conv2d(x.astype(np.float64), w, b, padding="same")
        return np.maximum(conv, 0), np.concatenate([np.maximum(conv, 0), 1 / (1 + np.exp(-conv))], axis=1)

    xs = [rng.standard_normal((40, 3, 64, 64)).astype(np.float32) for _ in range(2)]  # 5 MiB concatenations
    held = g.run(xs[0])
    for x in [xs[1], xs[1], xs[0]]:
        outs = g.run(x)
        relu, cat = expected(x)
        for y, want in zip(outs, [relu, relu, cat]):
            np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
        assert not np.shares_memory(outs[0], outs[1])
        outs[0][:] = -1  # changes neither the other copy nor the next run's
        assert (outs[1] >= 0).all()
    relu, cat = expected(xs[0])
    for y, want in zip(held, [relu, relu, cat]):
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def test_initializers_are_seeded_and_scaled():
    d = ng.ConvolutionDescriptor(kernel=3, input_channels=64, output_channels=128)
    he = ng.ArrayDataSource(d, "he", seed=3).weights()
    np.testing.assert_array_equal(he, ng.ArrayDataSource(d, "he", seed=3).weights())
    assert abs(he.std() - np.sqrt(2 / (64 * 9))) < 0.01 * np.sqrt(2 / (64 * 9)) * 5
    gl = ng.ArrayDataSource(d, "glorot", seed=3).weights()
    limit = np.sqrt(6 / (64 * 9 + 128 * 9))
    assert gl.max() <= limit and gl.min() >= -limit and gl.max() > 0.9 * limit
    assert not ng.ArrayDataSource(d, "zeros").weights().any()
    assert ng.ArrayDataSource(d, biases=None).biases() is None
    np.testing.assert_array_equal(ng.ArrayDataSource(d).biases(), np.zeros(128, np.float32))


def test_initial_weights_do_not_depend_on_the_thread_count():
    # Drawn in blocks across the cpu's threads: one thread must draw the same values.
    code = ("import sys, numpy as np, nngraph as ng; d = ng.ConvolutionDescriptor(kernel=3, input_channels=64, "
            "output_channels=128); sys.stdout.buffer.write(np.concatenate([ng.ArrayDataSource(d, i, seed=3).weights()"
            ".ravel() for i in ('he', 'glorot')]).tobytes())")
    env = dict(os.environ, NNGRAPH_NUM_THREADS="1")
    one = np.frombuffer(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=True).stdout,
                        np.float32)
    d = ng.ConvolutionDescriptor(kernel=3, input_channels=64, output_channels=128)
    here = np.concatenate([ng.ArrayDataSource(d, i, seed=3).weights().ravel() for i in ("he", "glorot")])
    np.testing.assert_array_equal(one, here)
    assert len(np.unique(here[:73728])) > 73000  # the blocks' streams differ


def test_memory_stats_follow_allocations(device, rng):
    x = rng.standard_normal((64, 3, 32, 32)).astype(np.float32)
    ng.reset_peak_memory(device)
    before = ng.memory_stats(device)
    img = ng.Image(x, device=device)
    held = ng.memory_stats(device)
    assert held["current_bytes"] - before["current_bytes"] >= x.nbytes
    assert held["peak_bytes"] >= held["current_bytes"]
    del img
    after = ng.memory_stats(device)
    assert after["current_bytes"] <= held["current_bytes"] - x.nbytes
    assert after["peak_bytes"] >= held["current_bytes"]
    ng.reset_peak_memory(device)
    assert ng.memory_stats(device)["peak_bytes"] < held["current_bytes"]
