"""
nngraph native engine
"""
from __future__ import annotations
from nngraph import DeviceError
from nngraph import Error
from nngraph import InvalidInputError
from nngraph import OutOfMemoryError
from nngraph import UnsupportedError
import numpy
import typing
__all__: list[str] = ['Adam', 'Addition', 'ArrayDataSource', 'BuiltinOptimizer', 'Concatenation', 'Convolution', 'ConvolutionDescriptor', 'DataSource', 'Device', 'DeviceError', 'Dropout', 'Error', 'FilterNode', 'FullyConnected', 'Graph', 'Handle', 'Image', 'ImageNode', 'InvalidInputError', 'LogSoftMax', 'Loss', 'LossDescriptor', 'Matrix', 'Neuron', 'NeuronDescriptor', 'Optimizer', 'OutOfMemoryError', 'Pooling', 'RMSProp', 'SGD', 'SoftMax', 'UnsupportedError', 'WeightsLayout', 'built_backends', 'device_count', 'memory_stats', 'reset_peak_memory']
class Device:
    """
    Where a graph runs: 'cpu', 'cuda', 'cuda:N' ('mps' reserved).
    """
    __hash__: typing.ClassVar[None] = None
    def __eq__(self, arg0: typing.Any) -> bool:
        ...
    def __init__(self, spec: str = 'cpu') -> None:
        ...
    def __repr__(self) -> str:
        ...
    def __str__(self) -> str:
        ...
    @property
    def index(self) -> int:
        ...
    @property
    def type(self) -> str:
        ...
class NeuronDescriptor:
    """
    An activation and its parameters a, b (None: the type's default).
    """
    def __init__(self, type: str = 'none', a: typing.SupportsFloat | typing.SupportsIndex | None = None, b: typing.SupportsFloat | typing.SupportsIndex | None = None) -> None:
        ...
    def __repr__(self) -> str:
        ...
    @property
    def a(self) -> float:
        ...
    @property
    def b(self) -> float:
        ...
    @property
    def type(self) -> str:
        ...
class ConvolutionDescriptor:
    """
    Kernel size, feature channels, stride, dilation, groups and a fused neuron.
    """
    def __init__(self, kernel: typing.Any, input_channels: typing.SupportsInt | typing.SupportsIndex, output_channels: typing.SupportsInt | typing.SupportsIndex, stride: typing.Any = 1, dilation: typing.Any = 1, groups: typing.SupportsInt | typing.SupportsIndex = 1, neuron: typing.Any = None) -> None:
        ...
    def __repr__(self) -> str:
        ...
    @property
    def dilation_x(self) -> int:
        ...
    @property
    def dilation_y(self) -> int:
        ...
    @property
    def groups(self) -> int:
        ...
    @property
    def input_feature_channels(self) -> int:
        ...
    @property
    def kernel_height(self) -> int:
        ...
    @property
    def kernel_width(self) -> int:
        ...
    @property
    def neuron(self) -> NeuronDescriptor:
        ...
    @property
    def output_feature_channels(self) -> int:
        ...
    @property
    def stride_x(self) -> int:
        ...
    @property
    def stride_y(self) -> int:
        ...
    @property
    def weights_shape(self) -> tuple[int, int, int, int]:
        ...
class Image:
    """
    A batch of N images, C×H×W each, in one device buffer (stored NCHW).
    """
    def __init__(self, array: numpy.ndarray, layout: str = 'NCHW', device: typing.Any = 'cpu') -> None:
        ...
    def __repr__(self) -> str:
        ...
    def astype(self, arg0: str) -> Image:
        ...
    def numpy(self, layout: str = 'NCHW') -> numpy.ndarray:
        """
        The images as a numpy array (a view on cpu).
        """
    @property
    def device(self) -> Device:
        ...
    @property
    def dtype(self) -> str:
        ...
    @property
    def shape(self) -> tuple[int, int, int, int]:
        ...
class Matrix:
    """
    rows × columns with a row stride in elements (MPSMatrix).
    """
    def __init__(self, array: numpy.ndarray, device: typing.Any = 'cpu') -> None:
        ...
    def numpy(self) -> numpy.ndarray:
        ...
    @property
    def columns(self) -> int:
        ...
    @property
    def device(self) -> Device:
        ...
    @property
    def dtype(self) -> str:
        ...
    @property
    def row_stride(self) -> int:
        ...
    @property
    def rows(self) -> int:
        ...
class Optimizer:
    """
    Base of optimizers. Subclass it and define slot_count() and update(values, gradient, slots, step), which changes values and slots in place (numpy arrays).
    """
    def __init__(self, learning_rate: typing.SupportsFloat | typing.SupportsIndex = 0.0010000000474974513, gradient_rescale: typing.SupportsFloat | typing.SupportsIndex = 1.0, clip_min: typing.SupportsFloat | typing.SupportsIndex | None = None, clip_max: typing.SupportsFloat | typing.SupportsIndex | None = None, regularization: str = 'none', regularization_scale: typing.SupportsFloat | typing.SupportsIndex = 0.0) -> None:
        ...
    def slot_count(self) -> int:
        ...
    @property
    def gradient_rescale(self) -> float:
        ...
    @property
    def learning_rate(self) -> float:
        ...
    @learning_rate.setter
    def learning_rate(self, arg1: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def regularization_scale(self) -> float:
        ...
class BuiltinOptimizer(Optimizer):
    pass
class WeightsLayout:
    """
    Members:
    
      OIHW
    
      OHWI
    """
    OHWI: typing.ClassVar[WeightsLayout]
    OIHW: typing.ClassVar[WeightsLayout]
    __members__: typing.ClassVar[dict[str, WeightsLayout]]
    @typing.overload
    def __eq__(self, other: WeightsLayout) -> bool:
        ...
    @typing.overload
    def __eq__(self, other: typing.Any) -> bool:
        ...
    def __getstate__(self) -> int:
        ...
    def __hash__(self) -> int:
        ...
    def __index__(self) -> int:
        ...
    def __init__(self, value: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def __int__(self) -> int:
        ...
    @typing.overload
    def __ne__(self, other: WeightsLayout) -> bool:
        ...
    @typing.overload
    def __ne__(self, other: typing.Any) -> bool:
        ...
    def __repr__(self) -> str:
        ...
    def __setstate__(self, state: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def __str__(self) -> str:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def value(self) -> int:
        ...
class DataSource:
    """
    The only way weights enter a graph. Subclass and define descriptor(), label(), load(), purge(), weights() and biases() (None for no bias); weights_layout() is optional.
    """
    def __init__(self) -> None:
        ...
    def biases(self) -> typing.Any:
        ...
    def descriptor(self) -> ConvolutionDescriptor:
        ...
    def label(self) -> str:
        ...
    def load(self) -> bool:
        ...
    def purge(self) -> None:
        ...
    def trainable(self) -> bool:
        ...
    def weights(self) -> numpy.ndarray:
        ...
    def weights_layout(self) -> WeightsLayout:
        ...
class ArrayDataSource(DataSource):
    """
    Weights from an array (O, I/groups, kh, kw) or an initializer: 'he', 'glorot', 'zeros'.
    """
    def __init__(self, descriptor: ConvolutionDescriptor, weights: typing.Any = 'he', biases: typing.Any = 'zeros', label: str = '', seed: typing.SupportsInt | typing.SupportsIndex = 0, optimizer: typing.Any = None) -> None:
        ...
    def load_optimizer_state(self, state: dict) -> None:
        ...
    def optimizer_state(self) -> dict:
        """
        {'step': updates so far, 'slots': [weight slots..., bias slots...]} as numpy arrays.
        """
    def set_weights(self, weights: typing.Any, biases: typing.Any = None) -> None:
        """
        Replaces the values, here and in the graph that trains them.
        """
    @property
    def optimizer(self) -> Optimizer:
        """
        Updates the weights in training graphs; its state (momentum, velocity, step) lives here.
        """
    @optimizer.setter
    def optimizer(self, arg1: typing.Any) -> None:
        ...
class ImageNode:
    """
    A data edge. Made directly it is a graph source; shape=(C, H, W) declares its images so the graph checks every shape when it is built.
    """
    label: str
    def __init__(self, shape: tuple[typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex] | None = None, label: str = '') -> None:
        ...
    def __repr__(self) -> str:
        ...
    @property
    def producer(self) -> typing.Any:
        ...
    @property
    def shape(self) -> typing.Any:
        ...
class FilterNode:
    """
    An operation; result_image feeds the next node.
    """
    label: str
    def __repr__(self) -> str:
        ...
    def gradient_filter(self, source_gradient: typing.Any) -> FilterNode:
        """
        The gradient node: turns d(loss)/d(result) into d(loss)/d(source).
        """
    def gradient_filters(self, source_gradient: typing.Any) -> list[FilterNode]:
        """
        One gradient node per source (addition, concatenation).
        """
    @property
    def kind(self) -> str:
        ...
    @property
    def result_image(self) -> ImageNode:
        ...
    @property
    def sources(self) -> list[ImageNode]:
        ...
class Convolution(FilterNode):
    def __init__(self, source: typing.Any, weights: typing.Any, padding: typing.Any = 'valid', label: str = '') -> None:
        """
        padding: 'valid', 'same', 'full' or (top, bottom, left, right).
        """
class FullyConnected(Convolution):
    def __init__(self, source: typing.Any, weights: typing.Any, label: str = '') -> None:
        ...
class Pooling(FilterNode):
    def __init__(self, source: typing.Any, mode: str = 'max', kernel: typing.Any = 2, stride: typing.Any = None, padding: typing.Any = 'valid', count_include_pad: bool = False, label: str = '') -> None:
        """
        stride defaults to the kernel size.
        """
class Neuron(FilterNode):
    def __init__(self, source: typing.Any, neuron: typing.Any = 'relu', a: typing.SupportsFloat | typing.SupportsIndex | None = None, b: typing.SupportsFloat | typing.SupportsIndex | None = None, label: str = '') -> None:
        ...
    @property
    def neuron(self) -> NeuronDescriptor:
        ...
class SoftMax(FilterNode):
    def __init__(self, source: typing.Any, label: str = '') -> None:
        ...
class Dropout(FilterNode):
    def __init__(self, source: typing.Any, keep_probability: typing.SupportsFloat | typing.SupportsIndex = 0.5, seed: typing.SupportsInt | typing.SupportsIndex = 0, label: str = '') -> None:
        ...
    @property
    def keep_probability(self) -> float:
        ...
    @property
    def seed(self) -> int:
        ...
class Addition(FilterNode):
    def __init__(self, a: typing.Any, b: typing.Any, label: str = '') -> None:
        ...
class Concatenation(FilterNode):
    def __init__(self, sources: list, label: str = '') -> None:
        ...
class LossDescriptor:
    """
    Loss type, reduction (none, sum, mean), weight, label_smoothing, delta (huber), epsilon.
    """
    def __init__(self, type: str = 'softmax_cross_entropy', reduction: str = 'mean', weight: typing.SupportsFloat | typing.SupportsIndex = 1.0, label_smoothing: typing.SupportsFloat | typing.SupportsIndex = 0.0, delta: typing.SupportsFloat | typing.SupportsIndex = 1.0, epsilon: typing.SupportsFloat | typing.SupportsIndex = 1.0000000116860974e-07) -> None:
        ...
    @property
    def delta(self) -> float:
        ...
    @property
    def epsilon(self) -> float:
        ...
    @property
    def label_smoothing(self) -> float:
        ...
    @property
    def reduction(self) -> str:
        ...
    @property
    def type(self) -> str:
        ...
    @property
    def weight(self) -> float:
        ...
class Loss(FilterNode):
    """
    A loss over `source`; its labels enter at encode time. Its result image is d(loss)/d(source).
    """
    def __init__(self, source: typing.Any, descriptor: typing.Any = 'softmax_cross_entropy', label: str = '') -> None:
        ...
    def training_graph(self, device: typing.Any = 'cpu', optimizer: typing.Any = None, max_in_flight: typing.SupportsInt | typing.SupportsIndex = 2, check_numerics: bool = False) -> Graph:
        """
        Every gradient node at once, wired to the forward nodes; data sources update after each step.
        """
    @property
    def descriptor(self) -> LossDescriptor:
        ...
class Handle:
    """
    One encode in flight: wait(), done, result().
    """
    def loss(self, index: typing.SupportsInt | typing.SupportsIndex = 0) -> float:
        """
        The reduced loss (what the gradient is of).
        """
    def losses(self, index: typing.SupportsInt | typing.SupportsIndex = 0) -> typing.Any:
        """
        Per-image loss values of loss node `index` (N,), once the encode completed.
        """
    def result(self, layout: str = 'NCHW') -> typing.Any:
        """
        The result image(s) as numpy; waits for them.
        """
    def wait(self) -> None:
        """
        Blocks until the encode and its callback finished; raises what they raised.
        """
    @property
    def done(self) -> bool:
        ...
class Graph:
    """
    Compiled graph from result image(s): orders nodes, infers shapes, fuses neurons into convolutions, plans one arena for intermediates and loads weights from data sources.
    """
    @staticmethod
    def training(loss: Loss, device: typing.Any = 'cpu', optimizer: typing.Any = None, max_in_flight: typing.SupportsInt | typing.SupportsIndex = 2, check_numerics: bool = False) -> Graph:
        """
        The training graph of a loss node (see Loss.training_graph).
        """
    def __init__(self, result: typing.Any, device: typing.Any = 'cpu', max_in_flight: typing.SupportsInt | typing.SupportsIndex = 2) -> None:
        ...
    def encode(self, images: typing.Any, labels: typing.Any = None, callback: typing.Any = None, layout: str = 'NCHW') -> Handle:
        """
        Queues a run and returns a Handle at once (blocks only while max_in_flight are outstanding). callback(handle) runs on the graph's worker when the run completes.
        """
    def inference(self) -> Graph:
        """
        An inference graph over this graph's results, reading its (trained) weights in place.
        """
    def memory_plan(self, batch: typing.SupportsInt | typing.SupportsIndex) -> dict:
        """
        Arena bytes (intermediates aliased by liveness) against one buffer each.
        """
    def reload_from_data_sources(self) -> None:
        """
        Reads every data source again (load, copy, purge); all or nothing.
        """
    def run(self, images: typing.Any, labels: typing.Any = None, layout: str = 'NCHW') -> typing.Any:
        """
        Runs synchronously: one array per source (a list, a dict keyed by node or label, or the array alone for one source) → the result array(s).
        """
    @property
    def allow_tf32(self) -> bool:
        """
        cuda: convolutions and fully connected layers may use tf32 tensor cores (about 1e-3 relative error); off (the default): exact float32.
        """
    @allow_tf32.setter
    def allow_tf32(self, arg1: bool) -> None:
        ...
    @property
    def check_numerics(self) -> bool:
        """
        Training graphs: a NaN or inf loss or weight gradient raises and updates no weight.
        """
    @check_numerics.setter
    def check_numerics(self, arg1: bool) -> None:
        ...
    @property
    def data_sources(self) -> list:
        """
        The data sources of the graph's nodes, each once.
        """
    @property
    def device(self) -> Device:
        ...
    @property
    def is_training(self) -> bool:
        ...
    @property
    def max_in_flight(self) -> int:
        ...
    @property
    def node_labels(self) -> list[str]:
        ...
    @property
    def result_images(self) -> list[ImageNode]:
        ...
    @property
    def source_image_handles(self) -> list[ImageNode]:
        ...
def Adam(learning_rate: typing.SupportsFloat | typing.SupportsIndex = 0.0010000000474974513, beta1: typing.SupportsFloat | typing.SupportsIndex = 0.8999999761581421, beta2: typing.SupportsFloat | typing.SupportsIndex = 0.9990000128746033, epsilon: typing.SupportsFloat | typing.SupportsIndex = 9.99999993922529e-09, amsgrad: bool = False, gradient_rescale: typing.SupportsFloat | typing.SupportsIndex = 1.0, clip_min: typing.SupportsFloat | typing.SupportsIndex | None = None, clip_max: typing.SupportsFloat | typing.SupportsIndex | None = None, regularization: str = 'none', regularization_scale: typing.SupportsFloat | typing.SupportsIndex = 0.0) -> BuiltinOptimizer:
    """
    Adam with bias correction.
    """
def LogSoftMax(source: typing.Any, label: str = '') -> SoftMax:
    """
    Log-softmax across feature channels.
    """
def RMSProp(learning_rate: typing.SupportsFloat | typing.SupportsIndex = 0.009999999776482582, decay: typing.SupportsFloat | typing.SupportsIndex = 0.8999999761581421, epsilon: typing.SupportsFloat | typing.SupportsIndex = 9.99999993922529e-09, gradient_rescale: typing.SupportsFloat | typing.SupportsIndex = 1.0, clip_min: typing.SupportsFloat | typing.SupportsIndex | None = None, clip_max: typing.SupportsFloat | typing.SupportsIndex | None = None, regularization: str = 'none', regularization_scale: typing.SupportsFloat | typing.SupportsIndex = 0.0) -> BuiltinOptimizer:
    """
    RMSProp: s ← ρ·s + (1−ρ)·g²; w ← w − lr·g/(√s + ε).
    """
def SGD(learning_rate: typing.SupportsFloat | typing.SupportsIndex = 0.009999999776482582, momentum: typing.SupportsFloat | typing.SupportsIndex = 0.0, nesterov: bool = False, gradient_rescale: typing.SupportsFloat | typing.SupportsIndex = 1.0, clip_min: typing.SupportsFloat | typing.SupportsIndex | None = None, clip_max: typing.SupportsFloat | typing.SupportsIndex | None = None, regularization: str = 'none', regularization_scale: typing.SupportsFloat | typing.SupportsIndex = 0.0) -> BuiltinOptimizer:
    """
    SGD: v ← μ·v + g; w ← w − lr·(nesterov ? g + μ·v : v).
    """
def built_backends() -> list[str]:
    """
    Backends compiled into this build.
    """
def device_count(type: str) -> int:
    """
    Devices of a type usable now: 'cpu' 1, 'cuda' the GPUs present (0 if not built).
    """
def memory_stats(device: typing.Any = 'cpu') -> dict:
    """
    Bytes nngraph holds on a device now and at most since reset_peak_memory (images, weights, arenas).
    """
def reset_peak_memory(device: typing.Any = 'cpu') -> None:
    ...
