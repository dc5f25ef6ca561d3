"""nngraph: neural-network graphs on a native C++ engine, in the model of Apple's MPS
training API. Build a graph of image and filter nodes, feed weights through data sources,
run it on "cpu" (or "cuda" where built)."""

import ctypes as _ctypes
import os as _os

import scipy_openblas32 as _openblas

# Load the BLAS library before the extension so the loader finds it whatever the layout of
# site-packages (the extension also carries an rpath to it).
_ctypes.CDLL(
    _os.path.join(_openblas.get_lib_dir(), "lib" + _openblas.get_library() + ".so"),
    mode=_ctypes.RTLD_GLOBAL,
)

from nngraph import schedules  # noqa: E402
from nngraph._core import (  # noqa: E402  (after the BLAS library is loaded)
    GRU,
    LSTM,
    MGU,
    RNN,
    SGD,
    Adam,
    Addition,
    ArrayDataSource,
    Concatenation,
    Convolution,
    ConvolutionDescriptor,
    DataSource,
    Device,
    DeviceError,
    Dropout,
    Error,
    FilterNode,
    FullyConnected,
    Graph,
    Handle,
    Image,
    ImageCopyToMatrixNode,
    ImageNode,
    InvalidInputError,
    LogSoftMax,
    Loss,
    LossDescriptor,
    Matrix,
    MatrixCopyToImageNode,
    Neuron,
    NeuronDescriptor,
    Optimizer,
    OutOfMemoryError,
    Pooling,
    RMSProp,
    RNNDescriptor,
    RNNMatrixLayer,
    RNNMatrixTrainingLayer,
    RNNMatrixTrainingState,
    SingleGate,
    SoftMax,
    UnsupportedError,
    WeightsLayout,
    built_backends,
    device_count,
    image_copy_to_matrix,
    matrix_copy_to_image,
    memory_stats,
    reset_peak_memory,
)
from nngraph.checkpoint import load, save  # noqa: E402
from nngraph.graphs import describe as _describe  # noqa: E402
from nngraph.graphs import parameters as _parameters  # noqa: E402
from nngraph.graphs import predict as _predict  # noqa: E402
from nngraph.graphs import summary as _summary  # noqa: E402
from nngraph.losses import LossDataDescriptor, LossLabels  # noqa: E402
from nngraph.plotting import plot_history  # noqa: E402
from nngraph.training import evaluate, fit  # noqa: E402

# Graph's conveniences written in Python (batching, tables) become its methods.
Graph.predict = _predict
Graph.parameters = _parameters
Graph.summary = _summary
Graph.__repr__ = _describe

__version__ = "0.1.0"

__all__ = [
    "SGD", "Adam", "Addition", "ArrayDataSource", "Concatenation", "Convolution", "ConvolutionDescriptor",
    "DataSource", "Device", "DeviceError", "Dropout", "Error", "FilterNode", "FullyConnected", "Graph",
    "Handle", "Image", "ImageCopyToMatrixNode", "ImageNode", "InvalidInputError", "LogSoftMax", "Loss",
    "LossDataDescriptor", "LossDescriptor", "LossLabels", "Matrix", "MatrixCopyToImageNode", "Neuron",
    "NeuronDescriptor", "Optimizer", "OutOfMemoryError", "Pooling", "RMSProp", "RNN", "RNNDescriptor",
    "RNNMatrixLayer", "RNNMatrixTrainingLayer", "RNNMatrixTrainingState", "SingleGate", "LSTM", "GRU", "MGU",
    "SoftMax", "UnsupportedError", "WeightsLayout", "built_backends", "device_count", "image_copy_to_matrix",
    "matrix_copy_to_image", "memory_stats", "reset_peak_memory", "evaluate", "fit", "load", "save",
    "plot_history", "schedules",
]
