"""
nngraph native engine
"""
from __future__ import annotations
import collections.abc
from nngraph import DeviceError
from nngraph import Error
from nngraph import InvalidInputError
from nngraph import OutOfMemoryError
from nngraph import UnsupportedError
import numpy
import numpy.typing
import typing
__all__: list[str] = ['Adam', 'Addition', 'Arithmetic', 'ArrayDataSource', 'BatchNormalization', 'BatchNormalizationDescriptor', 'BuiltinOptimizer', 'Concatenation', 'Convolution', 'ConvolutionDescriptor', 'ConvolutionTranspose', 'Crop', 'DataSource', 'Device', 'DeviceDataset', 'DeviceError', 'Division', 'Dropout', 'Error', 'FilterNode', 'FullyConnected', 'GRU', 'GlobalAveragePooling', 'GlobalMaxPooling', 'Graph', 'GroupNormalization', 'Handle', 'Image', 'ImageCopyToMatrixNode', 'ImageNode', 'InstanceNormalization', 'InvalidInputError', 'LSTM', 'LayerNormalization', 'LogSoftMax', 'Loss', 'LossDescriptor', 'LossScaling', 'MGU', 'Matrix', 'MatrixCopyToImageNode', 'MatrixDescriptor', 'MatrixMultiplication', 'Multiplication', 'Neuron', 'NeuronDescriptor', 'NormalizationDescriptor', 'Optimizer', 'OutOfMemoryError', 'Padding', 'Pooling', 'RMSProp', 'RNN', 'RNNDescriptor', 'RNNMatrixLayer', 'RNNMatrixTrainingLayer', 'RNNMatrixTrainingState', 'SGD', 'SingleGate', 'SoftMax', 'Subtraction', 'TensorSpec', 'UnsupportedError', 'Upsampling', 'WeightsLayout', 'built_backends', 'device_count', 'image_copy_to_matrix', 'kernels', 'matrix_copy_to_image', 'memory_stats', 'patch_moments', 'reset_peak_memory']
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
    An activation and its parameters a, b, c (None: the type's default).
    """
    def __init__(self, type: str = 'none', a: typing.SupportsFloat | typing.SupportsIndex | None = None, b: typing.SupportsFloat | typing.SupportsIndex | None = None, c: typing.SupportsFloat | typing.SupportsIndex | None = None) -> None:
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
    def c(self) -> float:
        """
        The third parameter: power's exponent, exponential's and logarithm's base.
        """
    @property
    def type(self) -> str:
        ...
class TensorSpec:
    """
    One tensor a layer kind reads from its data source.
    """
    def __repr__(self) -> str:
        ...
    @property
    def fill(self) -> float:
        """
        Its value where an ArrayDataSource is not given one.
        """
    @property
    def name(self) -> str:
        """
        The data source method that returns it.
        """
    @property
    def non_negative(self) -> bool:
        """
        No value may be below zero (a variance).
        """
    @property
    def optional(self) -> bool:
        """
        A source may return None for it.
        """
    @property
    def shape(self) -> tuple:
        """
        As graphs hold it (convolution weights OIHW).
        """
    @property
    def trained(self) -> bool:
        """
        Whether optimizers update it (running statistics are not).
        """
class ConvolutionDescriptor:
    """
    Kernel size, feature channels, stride, dilation, groups and a fused neuron; transposed for a ConvolutionTranspose's weights (input × output/groups × kh × kw, PyTorch's layout).
    """
    def __init__(self, kernel: typing.Any, input_channels: typing.SupportsInt | typing.SupportsIndex, output_channels: typing.SupportsInt | typing.SupportsIndex, stride: typing.Any = 1, dilation: typing.Any = 1, groups: typing.SupportsInt | typing.SupportsIndex = 1, neuron: typing.Any = None, transposed: bool = False) -> None:
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
    def tensors(self) -> list[TensorSpec]:
        """
        What its data source supplies: weights, then biases (optional).
        """
    @property
    def transposed(self) -> bool:
        """
        Weights of a ConvolutionTranspose: input × output/groups × kh × kw.
        """
    @property
    def weights_shape(self) -> tuple:
        ...
class MatrixDescriptor:
    """
    A rows × columns weight matrix with optional biases (rows), as recurrent layers' gates read; diagonal=True holds only the diagonal (LSTM peepholes).
    """
    __hash__: typing.ClassVar[None] = None
    def __eq__(self, arg0: MatrixDescriptor) -> bool:
        ...
    def __init__(self, rows: typing.SupportsInt | typing.SupportsIndex, columns: typing.SupportsInt | typing.SupportsIndex, diagonal: bool = False) -> None:
        ...
    def __repr__(self) -> str:
        ...
    @property
    def columns(self) -> int:
        """
        Inputs: one column per input channel.
        """
    @property
    def diagonal(self) -> bool:
        """
        Holds only the diagonal (rows values).
        """
    @property
    def rows(self) -> int:
        """
        Outputs: one row per output channel.
        """
    @property
    def tensors(self) -> list[TensorSpec]:
        """
        What its data source supplies: weights, then biases (optional).
        """
class NormalizationDescriptor:
    """
    Per-channel gamma and beta (trained) and, with statistics, mean and variance (running statistics, batch normalization's); statistics=False for group, instance and layer normalization.
    """
    def __init__(self, feature_channels: typing.SupportsInt | typing.SupportsIndex, statistics: bool = True) -> None:
        ...
    def __repr__(self) -> str:
        ...
    @property
    def feature_channels(self) -> int:
        """
        Channels normalized: each tensor holds one value per channel.
        """
    @property
    def statistics(self) -> bool:
        """
        Whether it holds running mean and variance.
        """
    @property
    def tensors(self) -> list[TensorSpec]:
        """
        What its data source supplies: gamma, beta[, mean, variance].
        """
class Image:
    """
    A batch of N images, C×H×W each, in one device buffer (stored NCHW).
    """
    def __init__(self, array: numpy.ndarray, layout: str = 'NCHW', device: typing.Any = 'cpu') -> None:
        ...
    def __repr__(self) -> str:
        ...
    def astype(self, dtype: str) -> Image:
        """
        The images converted to float32, float16 or bfloat16 (a new image on the same device).
        """
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
    """
    An optimizer whose update runs on the device inside the step: SGD, Adam, RMSProp. Each also takes weight_decay (decoupled, as AdamW and SGDW: w ← w·(1 − lr·weight_decay) before the rule) and lookahead (Zhang et al. 2019): every lookahead_steps-th update moves the slow weights lookahead_alpha of the way to the fast ones and restarts the fast ones from there (one more state vector per tensor); and with ema_decay > 0 an exponential moving average of the weights, a ← ema_decay·a + (1 − ema_decay)·w after each update, starting from the weights (one more state vector per tensor; evaluate with it inside nngraph.averaged_weights).
    """
    @property
    def ema_decay(self) -> float:
        """
        Decay of the weights' exponential moving average, in [0, 1) (0: none); may change between steps (a warm-up) but not to or from 0.
        """
    @ema_decay.setter
    def ema_decay(self, arg1: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def lookahead_alpha(self) -> float:
        """
        How far each lookahead sync moves the slow weights toward the fast ones, in [0, 1]; may change between steps.
        """
    @lookahead_alpha.setter
    def lookahead_alpha(self, arg1: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def lookahead_steps(self) -> int:
        """
        Updates between lookahead syncs (0: none); fixed, as it adds a state vector.
        """
    @property
    def weight_decay(self) -> float:
        """
        Decoupled weight decay; may change between steps, as learning_rate.
        """
    @weight_decay.setter
    def weight_decay(self, arg1: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
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
    The only way parameters enter a graph. Subclass and define descriptor(), label(), load(), purge() and one method per tensor the descriptor names: weights() and biases() (None for no bias) for a ConvolutionDescriptor or MatrixDescriptor; gamma(), beta(), mean() and variance() for a NormalizationDescriptor. weights_layout() (convolutions) and update() are optional.
    """
    def __init__(self) -> None:
        ...
    def biases(self) -> typing.Any:
        """
        A convolution's or matrix's biases, or None: tensor('biases').
        """
    def descriptor(self) -> ConvolutionDescriptor | MatrixDescriptor | NormalizationDescriptor:
        ...
    def label(self) -> str:
        ...
    def load(self) -> bool:
        ...
    def purge(self) -> None:
        ...
    def tensor(self, name: str) -> typing.Any:
        """
        The tensor of that name in its descriptor's shape (float32), or None where left out.
        """
    def tensors(self) -> dict:
        """
        Every tensor by name, in the descriptor's order (None where left out).
        """
    def trainable(self) -> bool:
        ...
    def weights(self) -> typing.Any:
        """
        A convolution's or matrix's weights: tensor('weights').
        """
    def weights_layout(self) -> WeightsLayout:
        ...
class ArrayDataSource(DataSource):
    """
    Parameters from arrays or initializers. Convolutions and matrices: weights as an array (O, I/groups, kh, kw), (rows, columns) or an initializer 'he', 'glorot', 'zeros'; biases 'zeros', an array or None. Any kind: tensors={name: array} (normalizations: gamma, beta, mean, variance; 1, 0, 0 and 1 where not given). frozen: tensor names the optimizer skips.
    """
    def __init__(self, descriptor: ConvolutionDescriptor | MatrixDescriptor | NormalizationDescriptor, weights: typing.Any = 'he', biases: typing.Any = 'zeros', label: str = '', seed: typing.SupportsInt | typing.SupportsIndex = 0, optimizer: typing.Any = None, tensors: typing.Any = None, frozen: collections.abc.Sequence[str] = []) -> None:
        ...
    def check_optimizer_state(self, state: typing.Any) -> None:
        """
        Raises where load_optimizer_state(state) would; changes nothing.
        """
    def load_optimizer_state(self, state: typing.Any) -> None:
        """
        Restores what optimizer_state() returned (checked first); used at the next update.
        """
    def optimizer_state(self) -> dict:
        """
        {'step': updates so far, 'slots': [...]} as numpy arrays: slot_count() vectors per trained tensor in the descriptor's order (convolutions: weight slots, then bias slots).
        """
    def reset_optimizer_state(self) -> None:
        """
        Forgets the optimizer's state (momentum, moments, lookahead, average): the next update starts from zero slots at step 0, as with a new optimizer.
        """
    def set_tensors(self, tensors: dict) -> None:
        """
        Replaces the named tensors ({name: array}); the others keep their values.
        """
    def set_weights(self, weights: typing.Any, biases: typing.Any = None) -> None:
        """
        Replaces the weights and biases, here and in the graph that trains them.
        """
    def swap_average(self) -> None:
        """
        Exchanges the trained tensors' values with the exponential moving average the optimizer keeps of them (its ema_decay), so a second call exchanges them back (nngraph.averaged_weights does both around a block). Statistics and frozen tensors stay; raises without an average.
        """
    @property
    def frozen(self) -> list[str]:
        """
        Names of trained tensors the optimizer leaves as they are (a batch norm's gamma); a change restarts the optimizer's state vectors.
        """
    @frozen.setter
    def frozen(self, arg1: collections.abc.Sequence[str]) -> None:
        ...
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
    def attributes(self, source_shapes: collections.abc.Sequence[tuple[typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex]]) -> dict:
        """
        Its parameters for sources of these shapes, as an export writes them: kernel, stride, dilation, groups, padding (top, bottom, left, right, resolved), neuron, ... by kind; {} for kinds without.
        """
    def gradient_filter(self, source_gradient: typing.Any) -> FilterNode:
        """
        The gradient node: turns d(loss)/d(result) into d(loss)/d(source).
        """
    def gradient_filters(self, source_gradient: typing.Any) -> list[FilterNode]:
        """
        One gradient node per source (addition, concatenation).
        """
    def infer(self, source_shapes: collections.abc.Sequence[tuple[typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex]]) -> tuple[int, int, int]:
        """
        Its result's (C, H, W) for sources of these shapes; raises, naming the node, where they do not fit.
        """
    @property
    def data_sources(self) -> list:
        """
        The data sources its parameters come from, in the order the node reads them.
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
    def __init__(self, source: typing.Any, weights: typing.Any, padding: typing.Any = 'valid', label: str = '', accumulator_precision: str = 'float') -> None:
        """
        padding: 'valid', 'same', 'full' or (top, bottom, left, right). accumulator_precision: 'float', or 'half' to accumulate in float16 in a float16 graph on cuda (MPS's FP16 accumulation: faster, less precise; float32 and bfloat16 graphs and the cpu accumulate in float32).
        """
    @property
    def accumulator_precision(self) -> str:
        """
        'float' or 'half' (float16 graphs on cuda accumulate in float16), as constructed.
        """
class FullyConnected(Convolution):
    def __init__(self, source: typing.Any, weights: typing.Any, label: str = '', accumulator_precision: str = 'float') -> None:
        ...
class BatchNormalization(FilterNode):
    """
    y = gamma·(x − mean)/sqrt(var + epsilon) + beta per channel. Training graphs use the batch's mean and variance over N×H×W and, after each step, move the running ones toward them: running ← (1 − momentum)·running + momentum·batch (the variance unbiased), as PyTorch does; inference graphs use the running ones.
    """
    def __init__(self, source: typing.Any, parameters: typing.Any, epsilon: typing.SupportsFloat | typing.SupportsIndex = 9.999999747378752e-06, momentum: typing.SupportsFloat | typing.SupportsIndex = 0.10000000149011612, label: str = '') -> None:
        """
        parameters: a data source of a NormalizationDescriptor (gamma, beta, mean, variance), or the channel count for an ArrayDataSource holding 1, 0, 0 and 1.
        """
    @property
    def epsilon(self) -> float:
        """
        Added to the variance before its square root.
        """
    @property
    def feature_channels(self) -> int:
        """
        Channels normalized, as its data source describes.
        """
    @property
    def momentum(self) -> float:
        """
        How far each training step moves the running statistics toward the batch's.
        """
class Pooling(FilterNode):
    def __init__(self, source: typing.Any, mode: str = 'max', kernel: typing.Any = 2, stride: typing.Any = None, padding: typing.Any = 'valid', count_include_pad: bool = False, dilation: typing.Any = 1, label: str = '') -> None:
        """
        stride defaults to the kernel size; dilation spreads the window's taps apart.
        """
class Neuron(FilterNode):
    def __init__(self, source: typing.Any, neuron: typing.Any = 'relu', a: typing.SupportsFloat | typing.SupportsIndex | None = None, b: typing.SupportsFloat | typing.SupportsIndex | None = None, c: typing.SupportsFloat | typing.SupportsIndex | None = None, label: str = '') -> None:
        ...
    @property
    def neuron(self) -> NeuronDescriptor:
        ...
class SoftMax(FilterNode):
    """
    Softmax across feature channels at every pixel; with groups, across each group of channels.
    """
    def __init__(self, source: typing.Any, groups: typing.SupportsInt | typing.SupportsIndex = 1, label: str = '') -> None:
        ...
    @property
    def groups(self) -> int:
        """
        Groups of channels, each normalized alone (1: all).
        """
class MatrixMultiplication(FilterNode):
    """
    Each image's channels in `groups` groups, each group a matrix of its channels by its pixels: the result's
    group g is left_g · right_g (either transposed where asked), its rows as channels and its columns as
    pixels, laid out as right's H×W (1 × right's channels in a group where right is transposed).
    Attention's products: a head to a group.
    """
    def __init__(self, left: typing.Any, right: typing.Any, groups: typing.SupportsInt | typing.SupportsIndex = 1, transpose_left: bool = False, transpose_right: bool = False, label: str = '') -> None:
        ...
    @property
    def groups(self) -> int:
        """
        Groups of channels, each operand's group a matrix (attention's heads).
        """
    @property
    def transpose_left(self) -> bool:
        """
        Whether left's group matrices enter the product transposed.
        """
    @property
    def transpose_right(self) -> bool:
        """
        Whether right's group matrices enter the product transposed.
        """
class Dropout(FilterNode):
    def __init__(self, source: typing.Any, keep_probability: typing.SupportsFloat | typing.SupportsIndex = 0.5, seed: typing.SupportsInt | typing.SupportsIndex = 0, label: str = '') -> None:
        ...
    @property
    def keep_probability(self) -> float:
        ...
    @property
    def seed(self) -> int:
        ...
class Arithmetic(FilterNode):
    """
    The base of Addition, Subtraction, Multiplication and Division.
    """
class Addition(Arithmetic):
    """
    a + b of two images; either may broadcast: each of its axes equals the other's or is 1.
    """
    def __init__(self, a: typing.Any, b: typing.Any, label: str = '') -> None:
        ...
class Subtraction(Arithmetic):
    """
    a - b of two images; either may broadcast: each of its axes equals the other's or is 1.
    """
    def __init__(self, a: typing.Any, b: typing.Any, label: str = '') -> None:
        ...
class Multiplication(Arithmetic):
    """
    a * b of two images; either may broadcast: each of its axes equals the other's or is 1.
    """
    def __init__(self, a: typing.Any, b: typing.Any, label: str = '') -> None:
        ...
class Division(Arithmetic):
    """
    a / b of two images; either may broadcast: each of its axes equals the other's or is 1.
    """
    def __init__(self, a: typing.Any, b: typing.Any, label: str = '') -> None:
        ...
class Concatenation(FilterNode):
    def __init__(self, sources: list, label: str = '') -> None:
        ...
class ConvolutionTranspose(FilterNode):
    """
    The transpose (adjoint) of a convolution, which enlarges by the stride: weights is a data source of a ConvolutionDescriptor(..., transposed=True) (weights input × output/groups × kh × kw, PyTorch's layout; biases and neuron as a convolution's). padding: 'valid', 'same' (result = source × stride) or (top, bottom, left, right), cut from the result; output_padding (an int or (y, x), each below the stride) adds rows and columns after, or output_size=(h, w) picks it.
    """
    def __init__(self, source: typing.Any, weights: typing.Any, padding: typing.Any = 'valid', output_padding: typing.Any = 0, output_size: typing.Any = None, label: str = '', accumulator_precision: str = 'float') -> None:
        ...
    @property
    def accumulator_precision(self) -> str:
        """
        'float' or 'half', as Convolution's.
        """
    @property
    def descriptor(self) -> ConvolutionDescriptor:
        """
        The transposed ConvolutionDescriptor its data source describes.
        """
class Padding(FilterNode):
    """
    Pads each image: padding is an int, (rows, columns) or (top, bottom, left, right); mode 'zero', 'constant' (value), 'reflect' (mirrored about the edge pixel, each amount below the size) or 'edge' (the edge pixel repeated); channels=(before, after) pads channels with the constant. Negative amounts crop (constant modes).
    """
    def __init__(self, source: typing.Any, padding: typing.Any, mode: str = 'zero', value: typing.SupportsFloat | typing.SupportsIndex = 0.0, channels: tuple[typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex] = (0, 0), label: str = '') -> None:
        ...
class Upsampling(FilterNode):
    """
    Enlarges each image by integer factors scale (an int or (y, x)): mode 'nearest' repeats pixels, 'bilinear' interpolates; align_corners (bilinear) maps the corner pixels onto each other, else pixel centres scale (PyTorch's two conventions).
    """
    def __init__(self, source: typing.Any, scale: typing.Any = 2, mode: str = 'nearest', align_corners: bool = False, label: str = '') -> None:
        ...
    @property
    def align_corners(self) -> bool:
        """
        Whether bilinear upsampling maps the corner pixels onto each other.
        """
    @property
    def scale(self) -> tuple[int, int]:
        """
        The factors (y, x).
        """
class GroupNormalization(FilterNode):
    """
    y = gamma·(x − mean)/sqrt(var + epsilon) + beta, mean and var per image over each group of channels (all their pixels); gamma and beta per channel. parameters: a data source of a NormalizationDescriptor(C, statistics=False), or the channel count for an ArrayDataSource of ones and zeros. Training and inference graphs compute the same.
    """
    def __init__(self, source: typing.Any, groups: typing.SupportsInt | typing.SupportsIndex, parameters: typing.Any, epsilon: typing.SupportsFloat | typing.SupportsIndex = 9.999999747378752e-06, label: str = '') -> None:
        ...
    @property
    def epsilon(self) -> float:
        """
        Added to the variance before its square root.
        """
    @property
    def groups(self) -> int:
        """
        Groups of channels (the channel count for instance normalization).
        """
    @property
    def per_position(self) -> bool:
        """
        Whether each position is normalized over its channels (layer normalization over C).
        """
class RNNDescriptor:
    """
    One recurrent layer in one direction: its cell, sizes, neurons and weight data sources. Made by SingleGate, LSTM, GRU or MGU.
    """
    def __repr__(self) -> str:
        ...
    @property
    def cell(self) -> str:
        ...
    @property
    def cell_neuron(self) -> NeuronDescriptor:
        ...
    @property
    def cell_to_output_neuron(self) -> NeuronDescriptor:
        """
        The LSTM's ψ in h = o⊙ψ(c).
        """
    @property
    def data_sources(self) -> list[DataSource]:
        """
        The weight sources in the order graphs keep them.
        """
    @property
    def direction(self) -> str:
        ...
    @property
    def gate_neuron(self) -> NeuronDescriptor:
        ...
    @property
    def gates(self) -> int:
        ...
    @property
    def input_feature_channels(self) -> int:
        ...
    @property
    def input_weights(self) -> list[DataSource]:
        """
        Per gate: its W source (H × I).
        """
    @property
    def layer_descriptor(self) -> MatrixDescriptor:
        """
        The MatrixDescriptor a one-source-per-layer data source has.
        """
    @property
    def layer_weights(self) -> DataSource:
        """
        The one source of the layer's gate matrices [W | U (| P)], or None where they come per gate.
        """
    @property
    def memory_weights(self) -> list[DataSource]:
        """
        LSTM peepholes per gate i, f, o (diagonal).
        """
    @property
    def output_feature_channels(self) -> int:
        ...
    @property
    def peephole(self) -> bool:
        ...
    @property
    def recurrent_weights(self) -> list[DataSource]:
        """
        Per gate: its U source (H × H).
        """
    @property
    def reset_after(self) -> bool:
        ...
    @property
    def use_layer_input_unit_transform(self) -> bool:
        ...
class RNN(FilterNode):
    def __init__(self, source: typing.Any, layers: typing.Any, combine: str = 'concatenate', output: str = 'sequence', label: str = '') -> None:
        """
        Runs recurrent layers over the source's positions (row by row, each position's channels one step's features). layers: a descriptor, or a list of descriptors (stacked) and (forward, backward) pairs joined by `combine`. output='last' gives the final state.
        """
    @property
    def combine(self) -> str:
        """
        How a (forward, backward) pair's outputs are joined.
        """
    @property
    def last_only(self) -> bool:
        ...
    @property
    def layers(self) -> list[list[RNNDescriptor]]:
        """
        Its stages in order, each a list of one descriptor or a (forward, backward) pair.
        """
class RNNMatrixTrainingState:
    """
    What a forward sequence leaves for its gradient sequence.
    """
    @property
    def batch(self) -> int:
        ...
    @property
    def steps(self) -> int:
        ...
class RNNMatrixLayer:
    """
    Recurrent layers over sequences of matrices (one per step, one row per sequence), with the weights their data sources hold when it is made.
    """
    def __init__(self, layers: typing.Any, combine: str = 'concatenate', device: typing.Any = 'cpu') -> None:
        ...
    def encode_sequence(self, sources: typing.Any, initial_states: typing.Any = None, initial_cell_states: typing.Any = None) -> tuple[list, list, list]:
        """
        → (outputs per step, final state per layer, final cell state per layer (None but LSTM)).
        """
class RNNMatrixTrainingLayer:
    """
    Recurrent layers over matrix sequences for training: weights as matrices (create_weight_matrices), a forward sequence leaving a training state, a gradient sequence giving input, initial-state and weight gradients.
    """
    def __init__(self, layers: typing.Any, combine: str = 'concatenate', device: typing.Any = 'cpu') -> None:
        ...
    def create_weight_gradient_matrices(self) -> list[Matrix]:
        ...
    def create_weight_matrices(self) -> list[Matrix]:
        """
        Per data source: its weights (O × I), then its biases (1 × O) if it has them.
        """
    def encode_forward_sequence(self, sources: typing.Any, weights: collections.abc.Sequence[Matrix], initial_states: typing.Any = None, initial_cell_states: typing.Any = None) -> tuple[list, RNNMatrixTrainingState, list, list]:
        """
        → (outputs, training state, final states, final cell states).
        """
    def encode_gradient_sequence(self, output_gradients: typing.Any, training_state: RNNMatrixTrainingState, weights: collections.abc.Sequence[Matrix], weight_gradients: typing.Any = None, accumulate: bool = False, final_state_gradients: typing.Any = None, final_cell_state_gradients: typing.Any = None) -> tuple[list, list, list]:
        """
        Writes weight_gradients (adds to them with accumulate) → (source gradients, initial state gradients, initial cell state gradients).
        """
class ImageCopyToMatrixNode(FilterNode):
    def __init__(self, source: typing.Any, data_layout: str = 'chw', label: str = '') -> None:
        """
        Each image as one row of C·H·W values (an N × C·H·W × 1 × 1 result), in 'chw' or 'hwc' order.
        """
class MatrixCopyToImageNode(FilterNode):
    def __init__(self, source: typing.Any, shape: tuple[typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex], data_layout: str = 'chw', label: str = '') -> None:
        """
        Rows of C·H·W values back to C×H×W images (shape), read in 'chw' or 'hwc' order.
        """
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
    def training_graph(self, device: typing.Any = 'cpu', optimizer: typing.Any = None, max_in_flight: typing.SupportsInt | typing.SupportsIndex = 2, check_numerics: bool = False, format: str = 'float32', loss_scaling: typing.Any = None, layout: str = 'auto') -> Graph:
        """
        Every gradient node at once, wired to the forward nodes; data sources update after each step. format: the images' dtype between nodes (float32, float16, bfloat16); parameters keep float32 masters that the optimizers update. loss_scaling: a LossScaling for float16 (None: the defaults). layout: 'NCHW', 'NHWC' (channels-last) or 'auto' for the images between nodes.
        """
    @property
    def descriptor(self) -> LossDescriptor:
        ...
class LossScaling:
    """
    Dynamic loss scaling of a float16 training graph (torch.amp.GradScaler's rule), on the device inside the step: the loss gradient is multiplied by the scale; a step whose weight gradients overflow updates nothing and multiplies the scale by backoff; after growth_interval clean steps it is multiplied by growth. enabled=False trains float16 unscaled. bfloat16 and float32 graphs never scale.
    """
    def __init__(self, *, enabled: bool = True, initial: typing.SupportsFloat | typing.SupportsIndex = 65536.0, growth: typing.SupportsFloat | typing.SupportsIndex = 2.0, backoff: typing.SupportsFloat | typing.SupportsIndex = 0.5, growth_interval: typing.SupportsInt | typing.SupportsIndex = 2000) -> None:
        ...
    def __repr__(self) -> str:
        ...
    @property
    def backoff(self) -> float:
        ...
    @property
    def enabled(self) -> bool:
        ...
    @property
    def growth(self) -> float:
        ...
    @property
    def growth_interval(self) -> int:
        ...
    @property
    def initial(self) -> float:
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
        The result image(s) as numpy; waits for this encode (not later ones).
        """
    def wait(self) -> None:
        """
        Blocks until the encode and its callback finished; raises what they raised.
        """
    @property
    def done(self) -> bool:
        ...
    @property
    def loss_scale(self) -> float:
        """
        A float16 training step's loss scale (1.0 where the graph does not scale); waits for the step.
        """
    @property
    def skipped(self) -> bool:
        """
        Whether this float16 training step's gradients overflowed, so it updated nothing; waits for the step.
        """
class Graph:
    """
    Compiled graph from result image(s): orders nodes, infers shapes, fuses neurons into convolutions, plans one arena for intermediates and loads weights from data sources.
    """
    @staticmethod
    def __repr__(graph: Graph) -> str:
        """
        Graph(<device>, training|inference, N nodes, P parameters): the graph's repr.
        """
    @staticmethod
    def parameters(graph: Graph) -> dict:
        """
        {label: {tensor name: array or None}} of every data source of the graph, in node order
            (copies of the latest values): a convolution's {"weights": ..., "biases": ...}, a
            normalization's gamma, beta, mean and variance.
        """
    @staticmethod
    def predict(graph: Graph, images, batch_size: int = 256, layout: str = 'NCHW'):
        """
        Runs the inference graph (a training graph's inference()) over `images` in batches
            and returns the results as one array: (N, C) where each result is 1×1 (a classifier's
            scores), else (N, C, H, W) (or NHWC with layout="NHWC"); a list for several results.
            Images are converted to float32 once (float64 is numpy's default).
        """
    @staticmethod
    def summary(graph: Graph) -> str:
        """
        A table of the graph's forward nodes: label, kind, output shape (C, H, W) and
            parameter count, then the totals and the planned memory of intermediate images for one
            image. Shapes are known once declared on the source nodes or after a first run.
        """
    @staticmethod
    def training(loss: typing.Any, device: typing.Any = 'cpu', optimizer: typing.Any = None, max_in_flight: typing.SupportsInt | typing.SupportsIndex = 2, check_numerics: bool = False, format: str = 'float32', loss_scaling: typing.Any = None, layout: str = 'auto') -> Graph:
        """
        The training graph of a loss node (see Loss.training_graph), or of a list of them: the gradient of their sum, each weighted by its LossDescriptor's weight (an auxiliary classifier's loss beside the main one). Its results are the losses' sources in that order; encode takes one labels array per loss, in loss_labels' order.
        """
    def __init__(self, result: typing.Any, device: typing.Any = 'cpu', max_in_flight: typing.SupportsInt | typing.SupportsIndex = 2, format: str = 'float32', layout: str = 'auto') -> None:
        ...
    def _summary_rows(self) -> list:
        """
        (label, kind, (C, H, W) or None, parameter count) per forward node; see summary().
        """
    def encode(self, images: typing.Any, labels: typing.Any = None, callback: typing.Any = None, layout: str = 'NCHW') -> Handle:
        """
        Queues a run and returns a Handle at once (blocks only while max_in_flight are outstanding). callback(handle) runs on the graph's completion thread once the device has finished the run.
        """
    def evaluation(self) -> Graph:
        """
        Of a training graph: forward nodes in inference mode plus the loss nodes. It takes labels and gives losses (a validation set's) but trains nothing; reads the weights in place. Kept while referenced, as inference().
        """
    def inference(self) -> Graph:
        """
        An inference graph over this graph's results, reading its (trained) weights in place. While one is referenced, later calls return that graph, planned and captured already. Each call gives it this graph's allow_tf32.
        """
    def memory_plan(self, batch: typing.SupportsInt | typing.SupportsIndex) -> dict:
        """
        Arena bytes (intermediates aliased by liveness) against one buffer each.
        """
    def reload_from_data_sources(self) -> None:
        """
        Reads every data source again (load, copy, purge); all or nothing. inference() and evaluation() are made anew.
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
    def format(self) -> str:
        """
        The images' dtype between nodes it was made with: float32, float16 or bfloat16.
        """
    @property
    def is_training(self) -> bool:
        ...
    @property
    def layout(self) -> str:
        """
        How those images lie on its device: 'NCHW', or channels-last 'NHWC' (layout='auto' takes NHWC on cuda for half formats, and for float32 while allow_tf32 is on). Sources and results stay NCHW.
        """
    @property
    def loss_labels(self) -> list[str]:
        """
        Labels of the loss nodes, in the order encode() takes their labels (empty: takes none).
        """
    @property
    def loss_scale(self) -> float:
        """
        Float16 training graphs: the loss scale of the next step (after the queued ones); else 1.0.
        """
    @property
    def max_in_flight(self) -> int:
        ...
    @property
    def memory_budget(self) -> float:
        """
        Training graphs with recompute on: the share, 0 to 1, of the memory recomputation saves that the plan may spend keeping results after all, the largest first (each one kept saves a pass). 0 (the default): recompute wherever keeping would make the arena larger; 1: keep every result, as recompute off does. Like PyTorch's activation_memory_budget. Outside [0, 1]: InvalidInputError.
        """
    @memory_budget.setter
    def memory_budget(self, arg1: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def node_labels(self) -> list[str]:
        ...
    @property
    def recompute(self) -> bool:
        """
        Training graphs: a batch normalization's result (with its neuron, or a residual sum it computes) that only later layers' gradients read again is computed again just before them instead of kept through the forward pass: less memory for one more pass each, taken only where keeping the result would make the plan's arena larger (memory_plan shows 'bn1+relu (recomputed)'). On by default.
        """
    @recompute.setter
    def recompute(self, arg1: bool) -> None:
        ...
    @property
    def result_images(self) -> list[ImageNode]:
        ...
    @property
    def skipped_steps(self) -> int:
        """
        Float16 training graphs: the steps skipped so far for overflowing gradients; else 0.
        """
    @property
    def source_image_handles(self) -> list[ImageNode]:
        ...
    @property
    def storage(self) -> str:
        """
        The dtype those images are stored and computed in on its device (cpu: float32).
        """
class DeviceDataset:
    """
    A labelled dataset uploaded once to a device; fit() and evaluate() take it in place of (images, labels). Each batch is gathered there in the epoch's shuffled order and augmented on the way: translate=t shifts each image by up to t pixels each way (a random crop of the image padded by t: pad='reflect', 'zero' or 'edge'); flip='random' mirrors each image with probability 1/2, 'alternating' mirrors a random half in even epochs and the other half in odd ones. Every draw follows from (seed, epoch, image), the same on every backend. images: (N, C, H, W) (or (N, H, W, C) with layout='NHWC') or (N, C); labels: class indices (N,) (one-hot over `classes`, default the largest + 1) or float targets. dtype converts the images on the device ('float32', 'float16', 'bfloat16'; None keeps float16 or float32 as given).
    """
    def __init__(self, images: typing.Any, labels: typing.Any, device: typing.Any = 'cpu', *, classes: typing.Any = None, layout: str = 'NCHW', dtype: typing.Any = None, translate: typing.SupportsInt | typing.SupportsIndex = 0, pad: str = 'reflect', flip: typing.Any = None, seed: typing.SupportsInt | typing.SupportsIndex = 0) -> None:
        ...
    def __len__(self) -> int:
        """
        The number of images.
        """
    def __repr__(self) -> str:
        ...
    def batch(self, epoch: typing.SupportsInt | typing.SupportsIndex, start: typing.SupportsInt | typing.SupportsIndex, count: typing.SupportsInt | typing.SupportsIndex, shuffle: bool = True) -> tuple[Image, Image]:
        """
        (images, labels) at positions [start, start + count) of the epoch's order, the images augmented as drawn for that epoch; both Images on the dataset's device.
        """
    def order(self, epoch: typing.SupportsInt | typing.SupportsIndex, shuffle: bool = True) -> numpy.ndarray:
        """
        The images' order in that epoch (a permutation drawn from (seed, epoch), or 0..N-1 unshuffled).
        """
    def view(self, start: typing.SupportsInt | typing.SupportsIndex, count: typing.SupportsInt | typing.SupportsIndex, *, flip: bool = False, shift: typing.Any = 0) -> Image:
        """
        Images [start, start + count) in the dataset's order, every one mirrored (flip) and then shifted: out(y, x) = in(y + dy, x + dx) for shift=(dy, dx), with the dataset's padding (test-time augmentation).
        """
    @property
    def device(self) -> Device:
        """
        Where the images and labels lie.
        """
    @property
    def dtype(self) -> str:
        """
        The images' dtype on the device: float32, float16 or bfloat16.
        """
    @property
    def images(self) -> Image:
        """
        Every image, as uploaded (an Image).
        """
    @property
    def labels(self) -> numpy.ndarray:
        """
        The labels as a numpy array: one-hot or target rows (N, K), or (N, K, H, W).
        """
    @property
    def shape(self) -> tuple[int, int, int]:
        """
        (C, H, W) of each image.
        """
def Adam(learning_rate: typing.SupportsFloat | typing.SupportsIndex = 0.0010000000474974513, beta1: typing.SupportsFloat | typing.SupportsIndex = 0.8999999761581421, beta2: typing.SupportsFloat | typing.SupportsIndex = 0.9990000128746033, epsilon: typing.SupportsFloat | typing.SupportsIndex = 9.99999993922529e-09, amsgrad: bool = False, gradient_rescale: typing.SupportsFloat | typing.SupportsIndex = 1.0, clip_min: typing.SupportsFloat | typing.SupportsIndex | None = None, clip_max: typing.SupportsFloat | typing.SupportsIndex | None = None, regularization: str = 'none', regularization_scale: typing.SupportsFloat | typing.SupportsIndex = 0.0, weight_decay: typing.SupportsFloat | typing.SupportsIndex = 0.0, lookahead_steps: typing.SupportsInt | typing.SupportsIndex = 0, lookahead_alpha: typing.SupportsFloat | typing.SupportsIndex = 0.5, ema_decay: typing.SupportsFloat | typing.SupportsIndex = 0.0) -> BuiltinOptimizer:
    """
    Adam with bias correction (with weight_decay, AdamW).
    """
def Crop(source: typing.Any, window: typing.Any = None, channels: typing.Any = None, label: str = '') -> Padding:
    """
    The window (y, x, height, width) of each image (None: all of it) and channels (first, count) (None: all); the gradient puts dY back in place with zeros around it.
    """
def GRU(input_channels: typing.SupportsInt | typing.SupportsIndex, output_channels: typing.SupportsInt | typing.SupportsIndex, weights: typing.Any = None, input_weights: typing.Any = None, recurrent_weights: typing.Any = None, direction: str = 'forward', unit_input: bool = False, seed: typing.SupportsInt | typing.SupportsIndex = 0, label: str = '', reset_after: bool = True, gate_neuron: typing.Any = 'sigmoid', cell_neuron: typing.Any = 'tanh') -> RNNDescriptor:
    """
    Gates r, z, n. reset_after=True is the cuDNN/PyTorch formulation; False applies the reset gate to the state before the recurrent product (the original GRU, as MPS describes it).
    """
def GlobalAveragePooling(source: typing.Any, label: str = '') -> Pooling:
    """
    The mean of each channel over the image: C×1×1.
    """
def GlobalMaxPooling(source: typing.Any, label: str = '') -> Pooling:
    """
    The maximum of each channel over the image: C×1×1.
    """
def InstanceNormalization(source: typing.Any, parameters: typing.Any, epsilon: typing.SupportsFloat | typing.SupportsIndex = 9.999999747378752e-06, label: str = '') -> GroupNormalization:
    """
    Each channel of each image normalized over its pixels (MPSCNNInstanceNormalization); gamma and beta per channel, as GroupNormalization takes them.
    """
def LSTM(input_channels: typing.SupportsInt | typing.SupportsIndex, output_channels: typing.SupportsInt | typing.SupportsIndex, weights: typing.Any = None, input_weights: typing.Any = None, recurrent_weights: typing.Any = None, direction: str = 'forward', unit_input: bool = False, seed: typing.SupportsInt | typing.SupportsIndex = 0, label: str = '', memory_weights: typing.Any = None, peephole: bool = False, gate_neuron: typing.Any = 'sigmoid', cell_neuron: typing.Any = 'tanh', cell_to_output_neuron: typing.Any = 'tanh') -> RNNDescriptor:
    """
    Gates i, f, g, o. Per-gate sources list gates in that order; memory_weights (peepholes) are for i, f and o.
    """
def LayerNormalization(source: typing.Any, parameters: typing.Any, epsilon: typing.SupportsFloat | typing.SupportsIndex = 9.999999747378752e-06, over: str = 'chw', label: str = '') -> GroupNormalization:
    """
    Each image normalized over C×H×W (over='chw', GroupNormalization with one group) or each position over its channels (over='c', as a transformer's LayerNorm over the channel axis); gamma and beta per channel.
    """
def LogSoftMax(source: typing.Any, groups: typing.SupportsInt | typing.SupportsIndex = 1, label: str = '') -> SoftMax:
    """
    Log-softmax across feature channels (with groups, across each group of channels).
    """
def MGU(input_channels: typing.SupportsInt | typing.SupportsIndex, output_channels: typing.SupportsInt | typing.SupportsIndex, weights: typing.Any = None, input_weights: typing.Any = None, recurrent_weights: typing.Any = None, direction: str = 'forward', unit_input: bool = False, seed: typing.SupportsInt | typing.SupportsIndex = 0, label: str = '', gate_neuron: typing.Any = 'sigmoid', cell_neuron: typing.Any = 'tanh') -> RNNDescriptor:
    """
    Minimal gated unit, gates f, n: h = (1−f)⊙h₋ + f⊙tanh(Wₙx + Uₙ(f⊙h₋) + bₙ).
    """
def RMSProp(learning_rate: typing.SupportsFloat | typing.SupportsIndex = 0.009999999776482582, decay: typing.SupportsFloat | typing.SupportsIndex = 0.8999999761581421, epsilon: typing.SupportsFloat | typing.SupportsIndex = 9.99999993922529e-09, gradient_rescale: typing.SupportsFloat | typing.SupportsIndex = 1.0, clip_min: typing.SupportsFloat | typing.SupportsIndex | None = None, clip_max: typing.SupportsFloat | typing.SupportsIndex | None = None, regularization: str = 'none', regularization_scale: typing.SupportsFloat | typing.SupportsIndex = 0.0, weight_decay: typing.SupportsFloat | typing.SupportsIndex = 0.0, lookahead_steps: typing.SupportsInt | typing.SupportsIndex = 0, lookahead_alpha: typing.SupportsFloat | typing.SupportsIndex = 0.5, ema_decay: typing.SupportsFloat | typing.SupportsIndex = 0.0) -> BuiltinOptimizer:
    """
    RMSProp: s ← ρ·s + (1−ρ)·g²; w ← w − lr·g/(√s + ε).
    """
def SGD(learning_rate: typing.SupportsFloat | typing.SupportsIndex = 0.009999999776482582, momentum: typing.SupportsFloat | typing.SupportsIndex = 0.0, nesterov: bool = False, gradient_rescale: typing.SupportsFloat | typing.SupportsIndex = 1.0, clip_min: typing.SupportsFloat | typing.SupportsIndex | None = None, clip_max: typing.SupportsFloat | typing.SupportsIndex | None = None, regularization: str = 'none', regularization_scale: typing.SupportsFloat | typing.SupportsIndex = 0.0, weight_decay: typing.SupportsFloat | typing.SupportsIndex = 0.0, lookahead_steps: typing.SupportsInt | typing.SupportsIndex = 0, lookahead_alpha: typing.SupportsFloat | typing.SupportsIndex = 0.5, ema_decay: typing.SupportsFloat | typing.SupportsIndex = 0.0) -> BuiltinOptimizer:
    """
    SGD: v ← μ·v + g; w ← w − lr·(nesterov ? g + μ·v : v).
    """
def SingleGate(input_channels: typing.SupportsInt | typing.SupportsIndex, output_channels: typing.SupportsInt | typing.SupportsIndex, weights: typing.Any = None, input_weights: typing.Any = None, recurrent_weights: typing.Any = None, direction: str = 'forward', unit_input: bool = False, seed: typing.SupportsInt | typing.SupportsIndex = 0, label: str = '', neuron: typing.Any = 'tanh') -> RNNDescriptor:
    """
    h = neuron(W x + U h₋ + b).
    """
def built_backends() -> list[str]:
    """
    Backends compiled into this build.
    """
def device_count(type: str) -> int:
    """
    Devices of a type usable now: 'cpu' 1, 'cuda' the GPUs present (0 if not built).
    """
def image_copy_to_matrix(source: Image, data_layout: str = 'chw', destination: typing.Any = None) -> Matrix:
    """
    MPSImageCopyToMatrix: row n of the (new or given) matrix holds image n.
    """
def kernels() -> dict[str, list[str]]:
    """
    The kernels of this build, each with the device types it runs on: {'pooling': ['cpu', 'cuda'], ...}.
    """
def matrix_copy_to_image(source: Matrix, destination: typing.Any, data_layout: str = 'chw') -> Image:
    """
    MPSMatrixCopyToImage: image n from row n; destination is an Image or a (C, H, W) shape.
    """
def memory_stats(device: typing.Any = 'cpu') -> dict:
    """
    Bytes nngraph holds on a device now and at most since reset_peak_memory (images, weights, arenas).
    """
def patch_moments(images: typing.Any, kernel: tuple[typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex] = (2, 2), count: typing.SupportsInt | typing.SupportsIndex | None = None) -> numpy.typing.NDArray[numpy.float64]:
    """
    Σ p·pᵀ over every kh×kw patch p (stride 1, no padding) of the first `count` images (all by default), computed on their device (an Image; a numpy array (N, C, H, W) on the cpu): a (D, D) float64 array, D = C·kh·kw, p's values in (channel, row, column) order as a convolution's weights read them.
    """
def reset_peak_memory(device: typing.Any = 'cpu') -> None:
    ...
BatchNormalizationDescriptor = NormalizationDescriptor
