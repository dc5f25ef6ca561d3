"""The shape layers of modern CNNs: dilated and global pooling, padding, crop, upsampling and
transpose convolution, each forward against numpy and each gradient against central
differences, with bad input naming the node."""

import numpy as np
import pytest
import reference as ref
from sources import HeldSource
from test_gradients import check, input_gradient, numeric_grad

import nngraph as ng

TOL = {"rtol": 1e-4, "atol": 1e-5}


def run(node, x, device):
    return ng.Graph(node, device=device).run(x)


def distinct(rng, shape):
    """Well separated values: a maximum stays put under the finite-difference step."""
    return (rng.permutation(np.prod(shape)).reshape(shape) * 0.01 - 0.3).astype(np.float32)


def gradient_matches(make, fwd, x, rng, device):
    """dx of make(source) for a random upstream gradient against central differences (the
    graph takes x only where the gradient reads it)."""
    r = rng.standard_normal(fwd(x).shape).astype(np.float32)
    src, dy = ng.ImageNode(label="x"), ng.ImageNode(label="dy")
    g = ng.Graph(make(src).gradient_filter(dy), device=device)
    feeds = {"x": x, "dy": r}
    dx = g.run({s.label: feeds[s.label] for s in g.source_image_handles})
    check(dx, numeric_grad(lambda v: (fwd(v) * r).sum(), x))


DILATED = [  # kernel, stride, padding, dilation, shape
    ((3, 3), (1, 1), "valid", (2, 2), (2, 3, 9, 8)),
    ((2, 3), (2, 1), "same", (3, 2), (1, 2, 11, 9)),
    ((3, 2), (2, 2), (2, 1, 1, 2), (2, 3), (2, 2, 8, 9)),
    ((2, 2), (3, 3), "valid", (2, 2), (1, 2, 10, 10)),  # disjoint windows
]


@pytest.mark.parametrize("mode", ["max", "average"])
@pytest.mark.parametrize("kernel,stride,padding,dilation,shape", DILATED)
def test_dilated_pooling(device, rng, mode, kernel, stride, padding, dilation, shape):
    x = distinct(rng, shape)
    fwd = lambda v: ref.pooling(v, mode, kernel, stride, padding, dilation=dilation)  # noqa: E731
    make = lambda s: ng.Pooling(s, mode, kernel=kernel, stride=stride, padding=padding,  # noqa: E731
                                dilation=dilation)
    np.testing.assert_allclose(run(make(ng.ImageNode()), x, device), fwd(x), **TOL)
    gradient_matches(make, fwd, x, rng, device)


@pytest.mark.parametrize("mode", ["max", "average"])
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (3, 4, 1, 1), (1, 2, 33, 40)])
def test_global_pooling(device, rng, mode, shape):
    x = distinct(rng, shape)
    reduce = np.max if mode == "max" else np.mean
    fwd = lambda v: reduce(v.astype(np.float64), axis=(2, 3), keepdims=True)  # noqa: E731
    make = ng.GlobalMaxPooling if mode == "max" else ng.GlobalAveragePooling
    node = make(ng.ImageNode())
    assert node.label == f"global_{mode}_pooling"
    np.testing.assert_allclose(run(node, x, device), fwd(x), **TOL)
    if shape[2] * shape[3] < 100:  # the finite differences of the large image take long
        gradient_matches(make, fwd, x, rng, device)


def test_global_max_pooling_gradient_of_a_large_image(device, rng):
    x = distinct(rng, (2, 3, 33, 40))
    r = rng.standard_normal((2, 3, 1, 1)).astype(np.float32)
    [dx] = input_gradient(ng.GlobalMaxPooling, x, r, device)
    want = np.zeros_like(x)
    for n in range(2):
        for c in range(3):
            want[n, c].flat[np.argmax(x[n, c])] = r[n, c, 0, 0]
    np.testing.assert_array_equal(dx, want)


def test_bad_pooling_dilation():
    with pytest.raises(ng.InvalidInputError, match=r"\[max_pooling\] dilation must be >= 1"):
        ng.Pooling(ng.ImageNode(), "max", kernel=2, dilation=0)
    with pytest.raises(ng.InvalidInputError, match=r"\[p\] .*window \(dilated\) does not fit"):
        ng.Graph(ng.Pooling(ng.ImageNode(shape=(1, 4, 4)), "max", kernel=3, dilation=2, label="p"))


def pad_reference(x, pads, mode, value=0.0, channels=(0, 0)):
    """np.pad, with negative amounts cropping."""
    t, b, left, r = pads
    amounts = [(0, 0), channels, (t, b), (left, r)]
    grow = [(max(a, 0), max(z, 0)) for a, z in amounts]
    np_mode = {"zero": "constant", "constant": "constant", "reflect": "reflect", "edge": "edge"}[mode]
    extra = {"constant_values": value} if np_mode == "constant" else {}
    y = np.pad(x.astype(np.float64), grow, mode=np_mode, **extra)
    cut = tuple(slice(max(-a, 0), y.shape[i] - max(-z, 0)) for i, (a, z) in enumerate(amounts))
    return y[cut]


PADS = [  # padding, mode, value, channels, shape
    (1, "zero", 0.0, (0, 0), (2, 3, 5, 4)),
    ((2, 1, 0, 3), "constant", 1.5, (1, 2), (2, 2, 4, 5)),
    ((-1, 2, 1, -2), "constant", -0.5, (0, -1), (1, 3, 6, 7)),  # negative amounts crop
    ((2, 3), "reflect", 0.0, (0, 0), (2, 2, 5, 4)),
    ((1, 3, 2, 0), "reflect", 0.0, (0, 0), (1, 2, 4, 3)),
    ((3, 1, 4, 2), "edge", 0.0, (0, 0), (2, 2, 3, 1)),
]


@pytest.mark.parametrize("padding,mode,value,channels,shape", PADS)
def test_padding(device, rng, padding, mode, value, channels, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    pads = (padding,) * 4 if isinstance(padding, int) else padding if len(padding) == 4 else \
        (padding[0], padding[0], padding[1], padding[1])
    fwd = lambda v: pad_reference(v, pads, mode, value, channels)  # noqa: E731
    make = lambda s: ng.Padding(s, padding, mode=mode, value=value, channels=channels)  # noqa: E731
    np.testing.assert_allclose(run(make(ng.ImageNode()), x, device), fwd(x), **TOL)
    gradient_matches(make, fwd, x, rng, device)


@pytest.mark.parametrize("window,channels", [((1, 2, 3, 4), None), (None, (1, 2)), ((0, 0, 5, 1), (2, 1))])
def test_crop(device, rng, window, channels):
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)

    def fwd(v):
        y, xx, h, w = window or (0, 0, 5, 7)
        c, k = channels or (0, 3)
        return v[:, c:c + k, y:y + h, xx:xx + w].astype(np.float64)
    make = lambda s: ng.Crop(s, window=window, channels=channels)  # noqa: E731
    node = make(ng.ImageNode())
    assert node.label == "crop"
    np.testing.assert_array_equal(run(node, x, device), fwd(x))
    gradient_matches(make, fwd, x, rng, device)


def test_bad_padding_and_crop():
    src = ng.ImageNode(shape=(2, 4, 4))
    with pytest.raises(ng.InvalidInputError, match=r"\[pad\] reflect padding .* smaller than the 4×4 source"):
        ng.Graph(ng.Padding(src, (4, 0, 0, 0), mode="reflect", label="pad"))
    with pytest.raises(ng.InvalidInputError, match=r"\[padding\] negative amounts .* crop"):
        ng.Padding(src, -1, mode="edge")
    with pytest.raises(ng.InvalidInputError, match=r"\[padding\] only constant padding pads channels"):
        ng.Padding(src, 1, mode="reflect", channels=(1, 0))
    with pytest.raises(ng.InvalidInputError, match=r"\[padding\] amounts .* leave nothing"):
        ng.Graph(ng.Padding(src, (-2, -2, 0, 0)))
    with pytest.raises(ng.InvalidInputError, match=r"\[padding\] mode must be"):
        ng.Padding(src, 1, mode="wrap")
    with pytest.raises(ng.InvalidInputError, match=r"\[c\] the window .* does not lie inside the 2×4×4 source"):
        ng.Graph(ng.Crop(src, window=(1, 1, 4, 2), label="c"))
    with pytest.raises(ng.InvalidInputError, match=r"\[crop\] the window's origin and size must not be negative"):
        ng.Crop(src, window=(-1, 0, 2, 2))


def upsample_reference(x, scale, mode, align_corners):
    """PyTorch's interpolate(scale_factor=scale, mode) in float64, one axis at a time."""
    x = x.astype(np.float64)
    for axis, s in ((2, scale[0]), (3, scale[1])):
        n = x.shape[axis]
        m = n * s
        o = np.arange(m)
        if mode == "nearest":
            x = np.take(x, o // s, axis=axis)
            continue
        if align_corners:
            src = o * (n - 1) / (m - 1) if m > 1 else np.zeros(1)
        else:
            src = np.maximum((o + 0.5) / s - 0.5, 0)
        i0 = np.minimum(np.floor(src).astype(int), n - 1)
        i1 = np.minimum(i0 + 1, n - 1)
        w1 = (src - i0).reshape([-1 if a == axis else 1 for a in range(4)])
        x = np.take(x, i0, axis=axis) * (1 - w1) + np.take(x, i1, axis=axis) * w1
    return x


UPSAMPLES = [  # scale, mode, align_corners, shape
    (2, "nearest", False, (2, 3, 4, 5)),
    ((3, 1), "nearest", False, (1, 2, 3, 4)),
    (2, "bilinear", False, (2, 2, 4, 5)),
    ((3, 2), "bilinear", False, (1, 2, 3, 1)),
    (2, "bilinear", True, (2, 2, 4, 5)),
    ((1, 4), "bilinear", True, (1, 3, 1, 3)),
]


@pytest.mark.parametrize("scale,mode,align,shape", UPSAMPLES)
def test_upsampling(device, rng, scale, mode, align, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    pair = (scale, scale) if isinstance(scale, int) else scale
    fwd = lambda v: upsample_reference(v, pair, mode, align)  # noqa: E731
    make = lambda s: ng.Upsampling(s, scale, mode=mode, align_corners=align)  # noqa: E731
    np.testing.assert_allclose(run(make(ng.ImageNode()), x, device), fwd(x), **TOL)
    gradient_matches(make, fwd, x, rng, device)


def test_bad_upsampling():
    with pytest.raises(ng.InvalidInputError, match=r"\[upsampling_nearest\] scale factors must be at least 1, got 0×2"):
        ng.Upsampling(ng.ImageNode(), (0, 2))
    with pytest.raises(ng.InvalidInputError, match=r"\[up\] align_corners applies to bilinear upsampling only"):
        ng.Upsampling(ng.ImageNode(), 2, align_corners=True, label="up")
    with pytest.raises(ng.InvalidInputError, match=r"\[upsampling\] mode must be 'nearest' or 'bilinear'"):
        ng.Upsampling(ng.ImageNode(), 2, mode="bicubic")


class TransposeCapture(HeldSource):
    """Transposed-convolution weights (input × output/groups × kh × kw) held in Python;
    update() records the gradients it is handed."""

    def __init__(self, w, b, stride, dilation, groups, neuron=None):
        super().__init__(ng.ConvolutionDescriptor(w.shape[2:], w.shape[0], w.shape[1] * groups, stride=stride,
                                                  dilation=dilation, groups=groups, neuron=neuron,
                                                  transposed=True), "up")
        self.w, self.b, self.grads = w, b, None

    def weights(self):
        return self.w

    def biases(self):
        return self.b

    def update(self, gradient, weights):
        self.grads = gradient


def conv_transpose_reference(x, w, b, stride, dilation, groups, pads, size):
    """Scatter each input pixel through the kernel, then cut the padding (top, left) away."""
    x = x.astype(np.float64)
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // groups
    full = np.zeros((n, og * groups, (h + 1) * stride[0] + (kh - 1) * dilation[0] + 1,
                     (wd + 1) * stride[1] + (kw - 1) * dilation[1] + 1))
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                part = np.einsum("nchw,co->nohw", x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg, :, i, j])
                y0, x0 = i * dilation[0], j * dilation[1]
                full[:, g * og:(g + 1) * og, y0:y0 + (h - 1) * stride[0] + 1:stride[0],
                     x0:x0 + (wd - 1) * stride[1] + 1:stride[1]] += part
    y = full[:, :, pads[0]:pads[0] + size[0], pads[1]:pads[1] + size[1]]
    return y if b is None else y + b.reshape(1, -1, 1, 1)


TRANSPOSES = [  # c, o, kernel, stride, dilation, groups, padding, output_padding, output_size, (top, left, h, w)
    (3, 4, (3, 3), (2, 2), (1, 1), 1, (1, 1, 1, 1), 1, None, (1, 1, 10, 8)),
    (4, 6, (2, 3), (2, 1), (1, 2), 2, "valid", 0, None, (0, 0, 10, 8)),
    (2, 3, (4, 4), (2, 2), (1, 1), 1, "same", 0, None, (1, 1, 10, 8)),
    (2, 2, (1, 1), (3, 3), (1, 1), 1, "same", 0, None, (0, 0, 15, 12)),
    (3, 2, (3, 3), (2, 2), (1, 1), 1, "valid", 0, (12, 9), (0, 0, 12, 9)),
    (2, 4, (3, 2), (2, 3), (2, 1), 2, (0, 2, 1, 0), (1, 2), None, (0, 1, 12, 12)),
]


@pytest.mark.parametrize("c,o,k,stride,dil,groups,padding,op,size,want", TRANSPOSES)
def test_convolution_transpose(device, rng, c, o, k, stride, dil, groups, padding, op, size, want):
    x = rng.standard_normal((2, c, 5, 4)).astype(np.float32)
    w = (0.5 * rng.standard_normal((c, o // groups, *k))).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    ds = TransposeCapture(w, b, stride, dil, groups)
    top, left, h, wd = want

    def fwd(xx, ww=w, bb=b):
        return conv_transpose_reference(xx, ww, bb, stride, dil, groups, (top, left), (h, wd))
    make = lambda s: ng.ConvolutionTranspose(s, ds, padding=padding, output_padding=op,  # noqa: E731
                                             output_size=size)
    got = run(make(ng.ImageNode()), x, device)
    assert got.shape == (2, o, h, wd)
    np.testing.assert_allclose(got, fwd(x), rtol=1e-4, atol=1e-4)
    r = rng.standard_normal(got.shape).astype(np.float32)
    [dx] = input_gradient(make, x, r, device)
    check(dx, numeric_grad(lambda v: (fwd(v) * r).sum(), x))
    dw, db = ds.grads
    check(dw, numeric_grad(lambda v: (fwd(x, v) * r).sum(), w))
    check(db, numeric_grad(lambda v: (fwd(x, w, v) * r).sum(), b))


def test_convolution_transpose_neurons(device, rng):
    """A descriptor neuron runs in the pass and trains through its output; a following neuron
    folds into the pass."""
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    w = (0.4 * rng.standard_normal((3, 2, 3, 3))).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    ds = TransposeCapture(w, b, 2, 1, 1, neuron=ng.NeuronDescriptor("tanh"))

    def fwd(xx, ww=w, bb=b):
        return np.tanh(conv_transpose_reference(xx, ww, bb, (2, 2), (1, 1), 1, (0, 0), (9, 9)))
    make = lambda s: ng.ConvolutionTranspose(s, ds)  # noqa: E731
    np.testing.assert_allclose(run(make(ng.ImageNode()), x, device), fwd(x), rtol=1e-4, atol=1e-5)
    r = rng.standard_normal((2, 2, 9, 9)).astype(np.float32)
    [dx] = input_gradient(make, x, r, device)
    check(dx, numeric_grad(lambda v: (fwd(v) * r).sum(), x))
    check(ds.grads[0], numeric_grad(lambda v: (fwd(x, v) * r).sum(), w))
    check(ds.grads[1], numeric_grad(lambda v: (fwd(x, w, v) * r).sum(), b))
    plain = TransposeCapture(w, b, 2, 1, 1)
    g = ng.Graph(ng.Neuron(ng.ConvolutionTranspose(ng.ImageNode(shape=(3, 4, 4)), plain, label="up"), "relu"),
                 device=device)
    assert g.memory_plan(2)["steps"] == ["up+relu"]
    want = np.maximum(conv_transpose_reference(x, w, b, (2, 2), (1, 1), 1, (0, 0), (9, 9)), 0)
    np.testing.assert_allclose(g.run(x), want, rtol=1e-4, atol=1e-5)


def test_convolution_transpose_trains_like_its_reference(device, rng):
    """ArrayDataSource weights in PyTorch's layout, one SGD step against the formula."""
    d = ng.ConvolutionDescriptor(3, 2, 3, stride=2, transposed=True)
    assert d.weights_shape == (2, 3, 3, 3) and d.tensors[1].shape == (3,)
    ds = ng.ArrayDataSource(d, seed=4, label="up")
    w0, b0 = ds.tensor("weights").copy(), ds.tensor("biases").copy()
    x = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    target = rng.standard_normal((2, 3, 7, 7)).astype(np.float32)
    loss = ng.Loss(ng.ConvolutionTranspose(ng.ImageNode(), ds), ng.LossDescriptor("mean_squared_error", "sum"))
    train = loss.training_graph(optimizer=ng.SGD(learning_rate=0.01), device=device)
    train.encode(x, labels=ng.LossLabels(target)).wait()

    def objective(ww, bb):
        return ((conv_transpose_reference(x, ww, bb, (2, 2), (1, 1), 1, (0, 0), (7, 7)) - target) ** 2).sum()
    gw = numeric_grad(lambda v: objective(v, b0), w0)
    gb = numeric_grad(lambda v: objective(w0, v), b0)
    check(ds.tensor("weights"), w0 - 0.01 * gw, rtol=1e-3, atol=1e-4)
    check(ds.tensor("biases"), b0 - 0.01 * gb, rtol=1e-3, atol=1e-4)


def test_bad_convolution_transpose():
    plain = ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 2, 4, stride=2))
    up = ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 2, 4, stride=2, transposed=True))
    with pytest.raises(ng.InvalidInputError, match=r"needs a transposed ConvolutionDescriptor"):
        ng.ConvolutionTranspose(ng.ImageNode(), plain)
    with pytest.raises(ng.InvalidInputError, match=r"its weights are a ConvolutionTranspose's"):
        ng.Convolution(ng.ImageNode(), up)
    with pytest.raises(ng.InvalidInputError, match=r"\[t\] output padding 2×2 must be below the stride 2×2"):
        ng.ConvolutionTranspose(ng.ImageNode(), up, output_padding=2, label="t")
    with pytest.raises(ng.InvalidInputError, match=r"\[t\] output size 13 is out of reach"):
        ng.Graph(ng.ConvolutionTranspose(ng.ImageNode(shape=(2, 5, 5)), up, output_size=(13, 11), label="t"))
    with pytest.raises(ng.InvalidInputError, match=r"\[t\] source has 3 feature channels, weights expect 2"):
        ng.Graph(ng.ConvolutionTranspose(ng.ImageNode(shape=(3, 5, 5)), up, label="t"))
    with pytest.raises(ng.InvalidInputError, match=r"groups=3 must divide"):
        ng.ConvolutionDescriptor(3, 6, 4, groups=3, transposed=True)


def test_gradients_read_the_source_only_where_they_need_it():
    """A padding's and an upsampling's dX shape follows from dY's, so X need not stay alive for
    them; a crop's does not."""
    def sources(node):
        g = ng.Graph(node.gradient_filter(ng.ImageNode(label="dy")))
        return sorted(s.label for s in g.source_image_handles)
    assert sources(ng.Padding(ng.ImageNode(label="x"), (1, 2, 0, 3), mode="reflect")) == ["dy"]
    assert sources(ng.Upsampling(ng.ImageNode(label="x"), 2)) == ["dy"]
    assert sources(ng.Crop(ng.ImageNode(label="x"), window=(0, 0, 2, 2))) == ["dy", "x"]
