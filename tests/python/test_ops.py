"""Every forward op against its numpy reference on random inputs, on every built backend."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import reference as ref

import nngraph as ng

TOL = {"rtol": 1e-4, "atol": 1e-5}


def run(node, x, device):
    return ng.Graph(node, device=device).run(x)


def conv_source(rng, o, c, kh, kw, stride=1, dilation=1, groups=1, neuron=None, bias=True):
    desc = ng.ConvolutionDescriptor(kernel=(kh, kw), input_channels=c, output_channels=o,
                                    stride=stride, dilation=dilation, groups=groups, neuron=neuron)
    w = rng.standard_normal(desc.weights_shape).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32) if bias else None
    return ng.ArrayDataSource(desc, weights=w, biases=b, label="conv"), w, b


CONV_CASES = [
    # n, c, h, w, o, kernel, stride, dilation, groups, padding
    (2, 1, 28, 28, 8, (5, 5), (1, 1), (1, 1), 1, "same"),
    (3, 4, 9, 7, 6, (3, 3), (2, 2), (1, 1), 2, "same"),
    (1, 3, 11, 10, 5, (3, 2), (1, 1), (2, 3), 1, "valid"),
    (2, 2, 5, 6, 4, (3, 3), (1, 2), (1, 1), 1, "full"),
    (2, 3, 8, 9, 6, (3, 3), (2, 1), (1, 1), 3, (1, 0, 2, 1)),
    (4, 6, 13, 13, 12, (1, 1), (1, 1), (1, 1), 1, "valid"),
    (1, 5, 15, 17, 7, (4, 3), (3, 2), (1, 1), 1, "same"),
    (3, 4, 2, 23, 6, (1, 5), (1, 5), (1, 1), 2, "valid"),  # windows tile each row (1-D, 5:1)
    (3, 4, 2, 23, 6, (1, 5), (1, 5), (1, 1), 1, "valid"),  # the same as one product (cuda)
    (2, 6, 1, 40, 9, (1, 8), (1, 8), (1, 1), 1, "valid"),  # rows tiled exactly
    (2, 3, 19, 18, 5, (7, 7), (2, 2), (1, 1), 1, (3, 3, 3, 3)),  # a stem: four phase planes a channel
    (2, 6, 9, 11, 4, (1, 1), (2, 2), (1, 1), 1, "valid"),  # one phase of four read
    (1, 4, 13, 12, 6, (3, 2), (2, 3), (2, 2), 2, "same"),  # strided and dilated
    (2, 2, 10, 10, 3, (2, 2), (3, 3), (1, 1), 1, (1, 0, 0, 2)),  # phases no tap reads
    # Batches of small images, which the cpu frames hold several of side by side (the last frame part full).
    (37, 3, 5, 6, 4, (3, 3), (1, 1), (1, 1), 1, "same"),
    (35, 4, 7, 7, 8, (3, 3), (2, 2), (1, 1), 2, "same"),
    (33, 2, 6, 5, 3, (3, 3), (1, 1), (2, 1), 1, (2, 0, 1, 2)),
    (34, 3, 4, 4, 5, (1, 1), (1, 1), (1, 1), 1, "valid"),
    # 3×3 windows over enough 2×2 output tiles, which the cpu computes in Winograd's form.
    (9, 16, 31, 30, 20, (3, 3), (1, 1), (1, 1), 1, "same"),
    (5, 24, 40, 33, 16, (3, 3), (1, 1), (1, 1), 1, (1, 0, 2, 1)),
    (2, 16, 66, 71, 17, (3, 3), (1, 1), (1, 1), 1, "valid"),
]


@pytest.mark.parametrize("n,c,h,w,o,k,stride,dil,groups,padding", CONV_CASES)
def test_convolution(device, rng, n, c, h, w, o, k, stride, dil, groups, padding):
    ds, wt, b = conv_source(rng, o, c, *k, stride=stride, dilation=dil, groups=groups)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    got = run(ng.Convolution(ng.ImageNode(), ds, padding=padding), x, device)
    want = ref.conv2d(x, wt, b, stride, dil, groups, padding)
    np.testing.assert_allclose(got, want, **TOL)


@pytest.mark.parametrize("side", [16, 13])
def test_convolutions_of_many_channels(device, rng, side):
    """More channels than 128 × 128: the cpu's Winograd form where the outputs are even (its 16
    products stream their weights over chunks of 128 tiles or more), frames where they are odd.
    Inputs scaled so that the 1224-term sums stay near 1, where float32 rounds to about 1e-6."""
    n = 16 if side % 2 == 0 else 24
    ds, wt, b = conv_source(rng, 144, 136, 3, 3)
    x = (rng.standard_normal((n, 136, side, side)) / np.sqrt(136 * 9)).astype(np.float32)
    got = run(ng.Convolution(ng.ImageNode(), ds, padding="same"), x, device)
    # cuDNN's fastest algorithm here (Winograd's 4 × 4 tiles) is off by up to 5e-5 (H200).
    tol = TOL if device == "cpu" else {"rtol": 1e-4, "atol": 1e-4}
    np.testing.assert_allclose(got, ref.conv2d(x, wt, b, padding="same"), **tol)


@pytest.mark.parametrize("c,side,o,k,groups",
                         [(96, 2, 64, 3, 1), (96, 3, 80, 3, 2), (64, 7, 96, 1, 1), (48, 5, 40, 3, 1)])
def test_small_batch_convolutions_split_by_output_rows(device, rng, c, side, o, k, groups):
    """A batch smaller than the threads whose weights outweigh its frames: each thread fills the
    frame and takes a share of the output rows; windows past a frame's last row and column read
    the zeros after it."""
    ds, wt, b = conv_source(rng, o, c, k, k, groups=groups)
    for n in (1, 3):
        x = (rng.standard_normal((n, c, side, side)) / np.sqrt(c * k * k / groups)).astype(np.float32)
        got = run(ng.Convolution(ng.ImageNode(), ds, padding="same"), x, device)
        np.testing.assert_allclose(got, ref.conv2d(x, wt, b, groups=groups, padding="same"), **TOL)


def test_batch_one_convolutions_split_among_many_threads(tmp_path):
    """With more threads than a frame has register tiles, a batch-1 convolution's (tile, block of
    output rows) pairs are shared out, some tiles' blocks split between threads (ResNet's
    strided convolutions at 16 threads), or its output rows where the weights outweigh the
    frame (at batch 3 too, three frames among the threads): the same values as numpy's, in a
    process of 16 and of 7 threads."""
    script = tmp_path / "split.py"
    script.write_text(f"""
import sys
sys.path.insert(0, {str(os.path.dirname(__file__))!r})
import numpy as np, nngraph as ng, reference as ref
rng = np.random.default_rng(5)
for n, c, side, o, k, s in [(1, 16, 28, 40, 3, 2), (1, 16, 28, 24, 1, 2), (1, 8, 20, 16, 3, 1), (1, 3, 30, 16, 7, 2),
                            (1, 96, 2, 64, 3, 1), (1, 128, 7, 96, 3, 1), (1, 64, 7, 96, 1, 1), (3, 128, 7, 96, 3, 1),
                            (3, 128, 14, 64, 3, 2)]:
    desc = ng.ConvolutionDescriptor(kernel=(k, k), input_channels=c, output_channels=o, stride=s)
    w = rng.standard_normal(desc.weights_shape).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    x = rng.standard_normal((n, c, side, side)).astype(np.float32)
    conv = ng.Convolution(ng.ImageNode(), ng.ArrayDataSource(desc, weights=w, biases=b, label="conv"), padding="same")
    got = ng.Graph(conv, device="cpu").run(x)
    np.testing.assert_allclose(got, ref.conv2d(x, w, b, (s, s), padding="same"), rtol=1e-4, atol=1e-4)
print("agree")
""")
    for threads in ("16", "7"):
        env = {**os.environ, "NNGRAPH_NUM_THREADS": threads}
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout.strip() == "agree", done.stderr


@pytest.mark.parametrize("size", [(6, 7), (16, 16)])  # outputs on the frame's pitch, and the output's own
def test_convolution_relu_keeps_nan(device, rng, size):
    # relu(NaN) is NaN, as in PyTorch: a NaN input must reach the outputs whose windows read it.
    x = rng.standard_normal((2, 3, *size)).astype(np.float32)
    x[1, 2, 3, 4] = np.nan
    ds, w, b = conv_source(rng, 4, 3, 3, 3, neuron=ng.NeuronDescriptor("relu"))
    got = run(ng.Convolution(ng.ImageNode(), ds, padding="same"), x, device)
    want = np.maximum(ref.conv2d(np.nan_to_num(x), w, b, padding="same"), 0)
    hit = np.zeros(got.shape, bool)
    hit[1, :, 2:5, 3:6] = True
    assert np.isnan(got[hit]).all() and not np.isnan(got[~hit]).any()
    np.testing.assert_allclose(got[~hit], want[~hit], **TOL)


@pytest.mark.parametrize("bias", [True, False])
def test_convolution_in_tiles_with_neurons(device, rng, bias):
    # Big enough for the cpu's Winograd form: its bias and neuron epilogue, with and without bias.
    x = rng.standard_normal((8, 16, 24, 22)).astype(np.float32)
    ds, w, b = conv_source(rng, 24, 16, 3, 3, neuron=ng.NeuronDescriptor("tanh", a=0.5, b=0.5), bias=bias)
    got = run(ng.Convolution(ng.ImageNode(), ds, padding="same"), x, device)
    np.testing.assert_allclose(got, ref.neuron(ref.conv2d(x, w, b, padding="same"), "tanh", 0.5, 0.5), **TOL)


def test_convolution_without_bias_and_fused_neurons(device, rng):
    x = rng.standard_normal((3, 4, 10, 10)).astype(np.float32)
    ds, w, _ = conv_source(rng, 5, 4, 3, 3, neuron=ng.NeuronDescriptor("tanh", a=1.5, b=0.5),
                           bias=False)
    got = run(ng.Convolution(ng.ImageNode(), ds, padding="same"), x, device)
    np.testing.assert_allclose(got, ref.neuron(ref.conv2d(x, w, None, padding="same"), "tanh", 1.5, 0.5),
                               **TOL)
    # A Neuron node after a convolution is folded into it; values must not change.
    ds2, w2, b2 = conv_source(rng, 5, 4, 3, 3)
    conv = ng.Convolution(ng.ImageNode(), ds2)
    g = ng.Graph(ng.Neuron(conv, "leaky_relu", a=0.2), device=device)
    g.run(x)
    assert g.memory_plan(3)["steps"] == ["conv+leaky_relu"]
    np.testing.assert_allclose(g.run(x), ref.neuron(ref.conv2d(x, w2, b2), "leaky_relu", 0.2), **TOL)


def test_neuron_not_fused_when_convolution_result_is_shared(device, rng):
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    ds, w, b = conv_source(rng, 4, 3, 3, 3)
    conv = ng.Convolution(ng.ImageNode(), ds)
    both = ng.Concatenation([conv, ng.Neuron(conv, "relu")])
    g = ng.Graph(both, device=device)
    y = ref.conv2d(x, w, b)
    np.testing.assert_allclose(g.run(x), np.concatenate([y, np.maximum(y, 0)], axis=1), **TOL)


@pytest.mark.parametrize("kernel_form", ["whole", "flat"])
def test_fully_connected(device, rng, kernel_form):
    x = rng.standard_normal((5, 3, 4, 6)).astype(np.float32)
    if kernel_form == "whole":
        desc = ng.ConvolutionDescriptor(kernel=(4, 6), input_channels=3, output_channels=7,
                                        neuron="sigmoid")
    else:
        desc = ng.ConvolutionDescriptor(kernel=1, input_channels=72, output_channels=7,
                                        neuron="sigmoid")
    w = rng.standard_normal(desc.weights_shape).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float32)
    got = run(ng.FullyConnected(ng.ImageNode(), ng.ArrayDataSource(desc, w, b)), x, device)
    want = ref.neuron(ref.fully_connected(x, w, b), "sigmoid")
    np.testing.assert_allclose(got, want, **TOL)


POOL_CASES = [
    # kernel, stride, padding, count_include_pad, shape
    ((2, 2), None, "valid", False, (2, 3, 8, 8)),
    ((3, 3), (2, 2), "same", False, (2, 2, 7, 9)),
    ((3, 2), (1, 2), "full", False, (1, 3, 5, 6)),
    ((3, 3), (2, 2), (1, 1, 1, 1), True, (2, 2, 7, 7)),
    ((2, 3), (3, 1), "valid", False, (3, 1, 11, 5)),
    ((3, 3), (2, 2), (1, 1, 1, 1), False, (2, 3, 12, 11)),  # ResNet's stem pooling
    ((3, 3), (2, 2), (1, 1, 1, 1), False, (1, 2, 5, 71)),  # rows of whole vectors and a tail
    ((5, 3), (1, 3), (2, 2, 1, 1), False, (1, 2, 6, 10)),
    ((3, 3), (1, 1), (1, 1, 1, 1), True, (2, 2, 6, 21)),  # Inception's pooling branch
    ((4, 3), (1, 1), (0, 1, 2, 1), False, (1, 3, 9, 20)),  # four rows a window
    ((3, 2), (1, 2), (1, 1, 0, 0), False, (1, 2, 70, 9)),  # 70 output rows: bands of 32
]


@pytest.mark.parametrize("mode", ["max", "average"])
@pytest.mark.parametrize("kernel,stride,padding,include,shape", POOL_CASES)
def test_pooling(device, rng, mode, kernel, stride, padding, include, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    node = ng.Pooling(ng.ImageNode(), mode, kernel=kernel, stride=stride, padding=padding,
                      count_include_pad=include)
    want = ref.pooling(x, mode, kernel, stride or kernel, padding, include)
    np.testing.assert_allclose(run(node, x, device), want, **TOL)


NEURONS = [("relu", None, None, None), ("leaky_relu", 0.3, None, None), ("sigmoid", None, None, None),
           ("hard_sigmoid", None, None, None), ("hard_sigmoid", 0.5, 0.1, None), ("tanh", None, None, None),
           ("tanh", 1.7, 0.66, None), ("linear", 2.0, -0.5, None), ("elu", 0.8, None, None),
           ("softplus", None, None, None), ("softplus", 2.0, 3.0, None), ("absolute", None, None, None),
           ("gelu", None, None, None), ("gelu_tanh", None, None, None), ("silu", None, None, None),
           ("silu", 1.7, None, None), ("hard_swish", None, None, None), ("relun", None, None, None),
           ("relun", 0.1, 2.0, None), ("power", None, None, None), ("power", 12.0, 1.0, 0.5),
           ("power", 0.5, -1.0, 3.0), ("exponential", None, None, None), ("exponential", 0.5, 0.1, 2.0),
           ("logarithm", 1.0, 12.0, None), ("logarithm", 2.0, 30.0, 10.0)]


@pytest.mark.parametrize("kind,a,b,c", NEURONS)
def test_neuron(device, rng, kind, a, b, c):
    x = (3 * rng.standard_normal((3, 5, 7, 3))).astype(np.float32)
    got = run(ng.Neuron(ng.ImageNode(), kind, a=a, b=b, c=c), x, device)
    np.testing.assert_allclose(got, ref.neuron(x, kind, a, b, c), **TOL)


def test_gelu_and_its_derivative_to_float32_accuracy(device):
    """GELU and GELU' (Abramowitz and Stegun's erfc, one exponential for both) within 6e-7 of a
    float64 reference over [−12, 12], and f within 5% of it, relatively, in the far negative tail
    (erf's form, 1 + erf(x/√2), rounds it to 0 there)."""
    x = np.linspace(-12, 12, 24001).astype(np.float32).reshape(1, 1, 1, -1)
    v = x.astype(np.float64)
    phi = 0.5 * np.vectorize(math.erfc)(-v / np.sqrt(2))
    got = run(ng.Neuron(ng.ImageNode(), "gelu"), x, device)
    np.testing.assert_allclose(got, v * phi, rtol=0, atol=6e-7)
    tail = x < -3
    np.testing.assert_allclose(got[tail], (v * phi)[tail], rtol=0.05)
    grad = ng.Neuron(ng.ImageNode(label="x"), "gelu").gradient_filter(ng.ImageNode(label="dy"))
    dx = ng.Graph(grad.result_image, device=device).run({"x": x, "dy": np.ones_like(x)})
    np.testing.assert_allclose(dx, phi + v * np.exp(-v * v / 2) / np.sqrt(2 * np.pi), rtol=0, atol=6e-7)


def test_neuron_defaults_and_bad_base():
    assert (ng.NeuronDescriptor("relun").b, ng.NeuronDescriptor("power").c) == (6.0, 2.0)
    assert ng.NeuronDescriptor("exponential").c == -1.0  # the base e, as in MPS
    for kind in ("exponential", "logarithm"):
        for c in (0.0, 1.0, -2.0):
            with pytest.raises(ng.InvalidInputError, match=f"{kind} base c must be positive"):
                ng.NeuronDescriptor(kind, c=c)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape", [(4, 10, 1, 1), (2, 7, 3, 5)])
def test_softmax(device, rng, log, shape):
    x = (4 * rng.standard_normal(shape)).astype(np.float32)
    x[0, 0] += 60  # large logits stay finite
    node = ng.LogSoftMax(ng.ImageNode()) if log else ng.SoftMax(ng.ImageNode())
    np.testing.assert_allclose(run(node, x, device), ref.softmax(x, log), rtol=1e-4, atol=1e-5)


def test_dropout_is_identity_at_inference(device, rng):
    x = rng.standard_normal((3, 2, 4, 4)).astype(np.float32)
    node = ng.Neuron(ng.Dropout(ng.ImageNode(), keep_probability=0.3, seed=7), "linear", a=1.0)
    np.testing.assert_array_equal(run(node, x, device), x)
    np.testing.assert_array_equal(run(ng.Dropout(ng.ImageNode()), x, device), x)


def test_addition_and_concatenation(device, rng):
    a, b = ng.ImageNode(label="a"), ng.ImageNode(label="b")
    xa = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    xb = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    xc = rng.standard_normal((2, 1, 5, 4)).astype(np.float32)
    c = ng.ImageNode(label="c")
    g = ng.Graph(ng.Concatenation([ng.Addition(a, b), c, a]), device=device)
    got = g.run({"a": xa, "b": xb, "c": xc})
    np.testing.assert_allclose(got, np.concatenate([xa + xb, xc, xa], axis=1), **TOL)


def test_digit_network_matches_composed_references(device, rng):
    x = rng.random((6, 1, 28, 28)).astype(np.float32)
    d1 = ng.ConvolutionDescriptor(5, 1, 32)
    d2 = ng.ConvolutionDescriptor(5, 32, 64)
    d3 = ng.ConvolutionDescriptor(7, 64, 1024)
    d4 = ng.ConvolutionDescriptor(1, 1024, 10)
    srcs = [ng.ArrayDataSource(d, "he", "zeros", f"l{i}", seed=i) for i, d in enumerate([d1, d2, d3, d4])]
    img = ng.ImageNode(shape=(1, 28, 28))
    h = ng.Pooling(ng.Neuron(ng.Convolution(img, srcs[0], padding="same"), "relu"))
    h = ng.Pooling(ng.Neuron(ng.Convolution(h, srcs[1], padding="same"), "relu"))
    h = ng.Dropout(ng.Neuron(ng.FullyConnected(h, srcs[2]), "relu"))
    out = ng.Graph(ng.SoftMax(ng.FullyConnected(h, srcs[3])), device=device).run(x)
    w = [s.weights() for s in srcs]
    r = ref.pooling(np.maximum(ref.conv2d(x, w[0], None, padding="same"), 0), "max", (2, 2), (2, 2))
    r = ref.pooling(np.maximum(ref.conv2d(r, w[1], None, padding="same"), 0), "max", (2, 2), (2, 2))
    r = np.maximum(ref.fully_connected(r, w[2], None), 0)
    # cuDNN's fastest algorithm (found per process: FFT, Winograd) rounds float32 to about 1e-3 here.
    np.testing.assert_allclose(out, ref.softmax(ref.fully_connected(r, w[3], None)), rtol=2e-3, atol=1e-6)


def test_allow_tf32_stays_close(device, rng):
    """tf32 tensor cores (cuda) round inputs to 10 mantissa bits; off by default, exact float32."""
    x = rng.standard_normal((4, 8, 12, 12)).astype(np.float32)
    ds, w, b = conv_source(rng, 16, 8, 3, 3)
    g = ng.Graph(ng.Convolution(ng.ImageNode(), ds, padding="same"), device=device)
    assert not g.allow_tf32
    g.allow_tf32 = True
    want = ref.conv2d(x, w, b, padding="same")
    got = g.run(x)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 5e-3
