"""Bad input raises a clear nngraph error naming the node; nothing crashes."""

import numpy as np
import pytest
from sources import FixedSource

import nngraph as ng


def digit_input_graph(device):
    x = ng.ImageNode(shape=(1, 28, 28), label="digits")
    ds = ng.ArrayDataSource(ng.ConvolutionDescriptor(5, 1, 4), label="conv1")
    return ng.Graph(ng.Convolution(x, ds, padding="same"), device=device)


def test_wrong_shape_names_expected_shape(device):
    g = digit_input_graph(device)
    with pytest.raises(ng.InvalidInputError, match=r"\[digits\] expected images of shape \(N, 1, 28, 28\)"):
        g.run(np.zeros((2, 1, 28, 27), np.float32) + 1)
    with pytest.raises(ValueError, match=r"expected a 4-D array \(N, 1, 28, 28\)"):
        g.run(np.ones((2, 28, 28), np.float32))


def test_wrong_channel_count_at_build_names_node():
    x = ng.ImageNode(shape=(3, 8, 8))
    ds = ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 1, 4), label="conv1")
    with pytest.raises(ValueError, match=r"^\[conv1\] source has 3 feature channels, weights expect 1$"):
        ng.Graph(ng.Convolution(x, ds))
    # Undeclared shapes: the same check runs at the first encode.
    g = ng.Graph(ng.Convolution(ng.ImageNode(), ds))
    with pytest.raises(ng.InvalidInputError, match=r"\[conv1\] source has 3 feature channels"):
        g.run(np.ones((1, 3, 8, 8), np.float32))
    assert g.run(np.ones((1, 1, 8, 8), np.float32)).shape == (1, 4, 6, 6)


def test_empty_batch(device):
    with pytest.raises(ValueError, match="empty batch"):
        digit_input_graph(device).run(np.zeros((0, 1, 28, 28), np.float32))


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, bool])
def test_wrong_dtype(device, dtype):
    with pytest.raises(ValueError, match=r"expected a float array \(float32, float16 or float64\), got"):
        digit_input_graph(device).run(np.ones((1, 1, 28, 28), dtype))


def test_not_an_array():
    with pytest.raises(ValueError, match="expected a numpy array"):
        digit_input_graph("cpu").run("digits")
    # Nested lists are a batch: checked like an array.
    with pytest.raises(ng.InvalidInputError, match=r"expected images of shape \(N, 1, 28, 28\)"):
        digit_input_graph("cpu").run([[1.0, 2.0]])


def test_data_source_with_wrong_sized_weights():
    class Bad(ng.DataSource):
        def descriptor(self):
            return ng.ConvolutionDescriptor(3, 2, 4)

        def label(self):
            return "bad"

        def load(self):
            return True

        def purge(self):
            pass

        def weights(self):
            return np.ones(10, np.float32)

        def biases(self):
            return None

    with pytest.raises(ValueError, match=r"\[bad\] data source 'bad' returned 10 weights, expected 72"):
        ng.Graph(ng.Convolution(ng.ImageNode(), Bad()))
    with pytest.raises(ValueError, match=r"weights must have shape \(4, 2, 3, 3\)"):
        ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 2, 4), weights=np.ones((4, 2, 3, 2), np.float32))
    with pytest.raises(ValueError, match=r"biases must have shape \(4,\)"):
        ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 2, 4), biases=np.ones(3, np.float32))


def test_data_source_failing_load_or_incomplete_subclass():
    class NoLoad(ng.DataSource):
        def descriptor(self):
            return ng.ConvolutionDescriptor(1, 1, 1)

        def label(self):
            return "noload"

        def load(self):
            return False

        def purge(self):
            pass

    with pytest.raises(ng.DeviceError, match="failed to load"):
        ng.Graph(ng.Convolution(ng.ImageNode(), NoLoad()))

    class Incomplete(ng.DataSource):
        pass

    with pytest.raises(ng.InvalidInputError, match=r"\[Incomplete\] must define label\(\)"):
        ng.Convolution(ng.ImageNode(), Incomplete())


def test_dangling_and_malformed_graphs():
    with pytest.raises(ValueError, match="no filter node produces"):
        ng.Graph(ng.ImageNode(label="x"))
    with pytest.raises(ValueError, match="source is None"):
        ng.Neuron(None, "relu")
    with pytest.raises(ValueError, match="at least one source"):
        ng.Concatenation([])
    with pytest.raises(ValueError, match=r"\[graph\] needs at least one result"):
        ng.Graph([])
    a, b = ng.ImageNode(label="a"), ng.ImageNode(label="b")
    g = ng.Graph(ng.Addition(a, b))
    with pytest.raises(ValueError, match=r"expected a list of 2 arrays, one per source, got 1 items"):
        g.run([np.ones((1, 1, 2, 2), np.float32)])
    with pytest.raises(ValueError, match="no image given for b"):
        g.run({"a": np.ones((1, 1, 2, 2), np.float32)})
    with pytest.raises(ValueError, match="differ in batch size: 2 and 3"):
        g.run([np.ones((2, 1, 2, 2), np.float32), np.ones((3, 1, 2, 2), np.float32)])
    with pytest.raises(ValueError, match=r"\[addition\] sources differ in shape: 2×2×2 and 3×2×2"):
        g.run([np.ones((1, 2, 2, 2), np.float32), np.ones((1, 3, 2, 2), np.float32)])


def test_bad_node_arguments():
    src = ng.ImageNode()
    with pytest.raises(ValueError, match="unknown neuron type 'swish'"):
        ng.Neuron(src, "swish")
    with pytest.raises(ValueError, match="keep_probability"):
        ng.Dropout(src, keep_probability=0.0)
    with pytest.raises(ValueError, match="unknown padding"):
        ng.Pooling(src, padding="wrap")
    with pytest.raises(ValueError, match="mode must be"):
        ng.Pooling(src, mode="median")
    with pytest.raises(ValueError, match="smaller than the"):
        ng.Pooling(src, kernel=2, padding=(2, 0, 0, 0))
    with pytest.raises(ValueError, match="groups=3 must divide"):
        ng.ConvolutionDescriptor(3, input_channels=4, output_channels=6, groups=3)
    with pytest.raises(ValueError, match="does not fit"):
        ng.Graph(ng.Pooling(ng.ImageNode(shape=(1, 1, 1)), kernel=2))
    with pytest.raises(ValueError, match="unknown device"):
        ng.Graph(ng.SoftMax(src), device="tpu")
    with pytest.raises(ValueError, match="layout"):
        ng.Graph(ng.SoftMax(src)).run(np.ones((1, 2, 1, 1), np.float32), layout="CHWN")


def test_missing_backend_is_not_implemented():
    if "cuda" in ng.built_backends():
        pytest.skip("this build has a cuda backend")
    with pytest.raises(NotImplementedError, match="no cuda backend"):
        ng.Graph(ng.SoftMax(ng.ImageNode()), device="cuda")


def test_error_hierarchy():
    assert issubclass(ng.InvalidInputError, ng.Error) and issubclass(ng.InvalidInputError, ValueError)
    assert issubclass(ng.DeviceError, RuntimeError) and issubclass(ng.OutOfMemoryError, MemoryError)
    assert issubclass(ng.UnsupportedError, NotImplementedError)


def test_out_of_memory_leaves_the_graph_usable(device):
    """An intermediate far beyond any memory: a clear error, then the graph runs again."""
    ds = ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 1, 1 << 16), label="wide")
    g = ng.Graph(ng.Convolution(ng.ImageNode(), ds, padding="same"), device=device)
    with pytest.raises(ng.OutOfMemoryError, match="out of"):
        g.run(np.ones((64, 1, 256, 256), np.float32))  # 1.1 TB of output
    assert g.run(np.ones((1, 1, 2, 2), np.float32)).shape == (1, 1 << 16, 2, 2)


class Returns(FixedSource):
    """Returns what it is given from label() and descriptor() (for bad-return messages); a
    3×2×3×3 convolution otherwise, whatever the shape of w."""

    def __init__(self, w, **overrides):
        super().__init__(w, None, "ret", ng.ConvolutionDescriptor(3, 2, 3))
        self.overrides = overrides

    def descriptor(self):
        return self.overrides.get("descriptor", self.desc)

    def label(self):
        return self.overrides.get("label", self._label)


def test_wrong_return_types_name_the_method():
    w = np.ones((3, 2, 3, 3), np.float32)
    with pytest.raises(ng.InvalidInputError, match=r"\[Returns.label\(\)\] must return a str, got int"):
        ng.Convolution(ng.ImageNode(), Returns(w, label=7))
    with pytest.raises(ng.InvalidInputError, match=r"\[Returns.descriptor\(\)\] must return an nngraph.Conv.*NoneType"):
        ng.Convolution(ng.ImageNode(), Returns(w, descriptor=None))

    class Slots(ng.Optimizer):
        def __init__(self, k):
            super().__init__()
            self.k = k

        def slot_count(self):
            return self.k

        def update(self, values, gradient, slots, step):
            pass

    with pytest.raises(ng.InvalidInputError, match=r"\[Slots.slot_count\(\)\] must return an int, got str"):
        ng.ArrayDataSource(ng.ConvolutionDescriptor(1, 2, 2), optimizer=Slots("2"))
    for k in (-1, 10**9):  # refused at once, before anything is allocated
        with pytest.raises(ng.InvalidInputError, match=f"slot_count\\(\\) must be between 0 and 16, got {k}"):
            ng.ArrayDataSource(ng.ConvolutionDescriptor(1, 2, 2), label="d", optimizer=Slots(k))


def test_python_weights_must_have_the_declared_layouts_shape():
    w = np.random.default_rng(0).standard_normal((3, 3, 3, 2)).astype(np.float32)  # OHWI of (3, 2, 3, 3)
    with pytest.raises(ng.InvalidInputError, match=r"\(3, 3, 3, 2\), the descriptor needs \(3, 2, 3, 3\) in OIHW"):
        ng.Graph(ng.Convolution(ng.ImageNode(), Returns(w)))

    class OHWI(Returns):
        def weights_layout(self):
            return ng.WeightsLayout.OHWI

    g = ng.Graph(ng.Convolution(ng.ImageNode(), OHWI(w)))
    x = np.ones((1, 2, 3, 3), np.float32)
    np.testing.assert_allclose(g.run(x).ravel(), w.sum(axis=(1, 2, 3)), rtol=1e-5)


@pytest.mark.parametrize("make", [
    lambda: ng.LossDescriptor("softmax_cross_entropy", label_smoothing=float("nan")),
    lambda: ng.LossDescriptor("huber", delta=float("nan")),
    lambda: ng.LossDescriptor("mean_squared_error", weight=float("inf")),
    lambda: ng.SGD(momentum=float("nan")),
    lambda: ng.Adam(beta1=float("nan")),
    lambda: ng.RMSProp(decay=float("nan")),
    lambda: ng.Adam(learning_rate=float("inf")),
    lambda: ng.SGD(regularization="l2", regularization_scale=float("nan")),
    lambda: ng.NeuronDescriptor("leaky_relu", a=float("nan")),
])
def test_nan_parameters_are_refused(make):
    with pytest.raises(ng.InvalidInputError, match="must"):
        make()
    opt = ng.SGD()
    with pytest.raises(ng.InvalidInputError, match="learning_rate must be finite"):
        opt.learning_rate = float("nan")


def test_frozen_python_source_reports_the_true_loss_and_warns():
    w = np.random.default_rng(1).standard_normal((10, 1, 8, 8)).astype(np.float32)
    frozen = Returns(w, descriptor=ng.ConvolutionDescriptor(8, 1, 10), label="frozen")
    loss = ng.Loss(ng.FullyConnected(ng.ImageNode(shape=(1, 8, 8)), frozen), ng.LossDescriptor("softmax_cross_entropy"))
    with pytest.warns(UserWarning, match=r"'frozen' define no update\(\) and stay frozen"):
        g = loss.training_graph(optimizer=ng.Adam())
    x = np.random.default_rng(2).random((4, 1, 8, 8), dtype=np.float32)
    y = np.array([0, 3, 5, 9])
    h = g.encode(x, labels=y)
    logits = x.reshape(4, 64).astype(np.float64) @ w.reshape(10, 64).T
    z = logits - logits.max(axis=1, keepdims=True)
    per_image = np.log(np.exp(z).sum(axis=1)) - z[np.arange(4), y]
    np.testing.assert_allclose(h.losses(), per_image, rtol=1e-5)
    assert h.loss() == pytest.approx(per_image.mean(), rel=1e-5)
