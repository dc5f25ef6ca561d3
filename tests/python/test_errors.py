"""Bad input raises a clear nngraph error naming the node; nothing crashes."""

import numpy as np
import pytest

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


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint8, bool])
def test_wrong_dtype(device, dtype):
    with pytest.raises(ValueError, match="expected a float32 or float16 array"):
        digit_input_graph(device).run(np.ones((1, 1, 28, 28), dtype))


def test_not_an_array():
    with pytest.raises(ValueError, match="expected a numpy array"):
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

    with pytest.raises(RuntimeError, match="pure virtual"):
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
    with pytest.raises(ValueError, match=r"expected 2 source image\(s\), got 1"):
        g.run([np.ones((1, 1, 2, 2), np.float32)])
    with pytest.raises(ValueError, match="no image given for b"):
        g.run({"a": np.ones((1, 1, 2, 2), np.float32)})
    with pytest.raises(ValueError, match="differ in batch size"):
        g.run([np.ones((1, 1, 2, 2), np.float32), np.ones((2, 1, 2, 2), np.float32)])
    with pytest.raises(ValueError, match=r"\[addition\] sources differ in shape"):
        g.run([np.ones((1, 1, 2, 2), np.float32), np.ones((1, 2, 2, 2), np.float32)])


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
