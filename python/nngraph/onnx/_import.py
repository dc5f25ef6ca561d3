"""Import: an ONNX model as an inference graph. Activations become nngraph nodes over images
(`Act`), weights ArrayDataSources, and everything that depends on constants alone (shape
computations, folded initializers) is evaluated here, once."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnx.version_converter
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from nngraph._core import Graph, ImageNode, InvalidInputError, UnsupportedError
from nngraph.onnx._constants import expanded
from nngraph.onnx._layout import Act, Moved, Stacked, Unsupported, symbolic, unique
from nngraph.onnx._ops import HANDLERS
from nngraph.onnx._patterns import fuse_bias, fuse_gelu
from nngraph.onnx._symbolic import evaluate, is_symbolic

MIN_OPSET = 11
# What `run` returns for an output of each float type (computed in float32; bfloat16 stays so).
OUTPUT_DTYPES = {onnx.TensorProto.FLOAT16: np.float16, onnx.TensorProto.DOUBLE: np.float64}


def _opset(model: onnx.ModelProto):
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def _converted(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model as it is, or one of an opset below MIN_OPSET (the ONNX model zoo's 7 to 10)
    raised to MIN_OPSET by onnx's version converter."""
    opset, newest = _opset(model), onnx.defs.onnx_opset_version()
    if opset is None or not 1 <= opset <= newest:
        raise InvalidInputError(f"[onnx] the model's opset {opset} is outside the opsets 1..{newest} onnx knows")
    if opset >= MIN_OPSET:
        return model
    try:
        return onnx.version_converter.convert_version(model, MIN_OPSET)
    except Exception as e:  # the converter raises its own kinds, RuntimeError and ValueError among them
        raise UnsupportedError(f"[onnx] the model's opset {opset} could not be converted to opset {MIN_OPSET}, "
                               f"the oldest nngraph imports: {e}") from None


class Importer:
    def __init__(self, model: onnx.ModelProto, device, format: str, input_shapes: dict | None):
        self.model, self.device, self.format = _converted(model), device, format
        self.opset = _opset(self.model)
        self.input_shapes = dict(input_shapes or {})
        self.env: dict = {}
        self.labels: set = set()
        self.consumers: dict = {}
        self.info: dict = {"inputs": [], "outputs": [], "dtypes": []}
        self.lazy: dict = {}  # outputs made only when read (a recurrent layer's final state)
        self.batch = None  # the batch size of a model exported for one batch size only
        self.inputs: list = []  # the graph inputs' Acts
        self.ones = None  # a pixel of ones per image, made for the first constant that varies within images

    # --- values -------------------------------------------------------------------------

    def get(self, name: str):
        if name == "":
            return None
        if name in self.lazy:
            self.env[name] = self.lazy.pop(name)()
        if name not in self.env:
            raise InvalidInputError(f"no initializer, graph input or node output is named '{name}'")
        return self.env[name]

    def inputs(self, node) -> list:
        return [self.get(n) for n in node.input]

    def act(self, node, i: int = 0) -> Act:
        v = self.get(node.input[i]) if i < len(node.input) else None
        if not isinstance(v, Act):
            raise Unsupported(f"input {i} must be computed from the graph's inputs (it is a constant)")
        return v

    def const(self, node, i: int, optional: bool = False):
        v = self.get(node.input[i]) if i < len(node.input) else None
        if v is None and optional:
            return None
        if not isinstance(v, np.ndarray) or v.dtype == object:
            raise Unsupported(f"input {i} must be a constant")
        return v

    def label(self, base: str) -> str:
        return unique(re.sub(r"[^A-Za-z0-9_.:/-]+", "_", base).strip("/_.") or "layer", self.labels)

    def source_label(self, node, tensor: int = 1) -> str:
        """A data source's label: its weights' initializer name without the tensor's own name
        ("conv1.weight" → "conv1"), or its bias's where the weights' is anonymous (a transposed
        copy the exporter made); else the node's name."""
        def named(i):
            name = node.input[i] if len(node.input) > i else ""
            anonymous = not name or "::" in name or re.fullmatch(r"(val|_v|const|onnx)_?\d*|\d+", name) is not None
            return None if anonymous else re.sub(r"[._](weight|weights|bias|biases|W|B|kernel)$", "", name)
        name = named(tensor) or (named(2) if tensor == 1 and node.op_type in ("Gemm", "Conv", "ConvTranspose")
                                 else None)
        if name:
            return self.label(name)
        base = node.name.strip("/")
        ops = node.op_type + ("|MatMul" if node.op_type == "Gemm" else "")  # a MatMul and its bias fused
        base = re.sub(r"/(" + ops + r")(_\d+)?$", "", base)
        return self.label(base or node.op_type.lower())

    # --- the walk ---------------------------------------------------------------------

    def run(self) -> Graph:
        g = self.model.graph
        for init in g.initializer:
            self.env[init.name] = _array(init)
        nodes = fuse_bias(g, fuse_gelu(g))
        for node in nodes:
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
        for value in g.input:
            if value.name in self.env:
                continue  # an initializer listed as an input too (older exporters)
            act = self._graph_input(value)
            self.env[value.name] = act
            self.inputs.append(act)
        if not self.inputs:
            raise InvalidInputError("[onnx] the model has no input")
        for node in nodes:
            self._node(node)
        results = []
        for value in g.output:
            try:
                v = self.get(value.name)
            except InvalidInputError as e:
                raise InvalidInputError(f"[onnx] output '{value.name}': {e}") from None
            except Unsupported as e:
                raise UnsupportedError(f"[onnx] output '{value.name}' {e}") from None
            if isinstance(v, (Moved, Stacked)):
                raise UnsupportedError(f"[onnx] output '{value.name}' {v.why}")
            if not isinstance(v, Act) or isinstance(v.image, ImageNode) and v.image.producer is None:
                raise UnsupportedError(f"[onnx] output '{value.name}' is a constant or a graph input: "
                                       "nngraph graphs compute their results")
            results.append(v.image)
            self.info["outputs"].append((value.name, v))
            self.info["dtypes"].append(OUTPUT_DTYPES.get(value.type.tensor_type.elem_type, np.float32))
        return Graph(results if len(results) > 1 else results[0], device=self.device, format=self.format)

    def _graph_input(self, value) -> Act:
        t = value.type.tensor_type
        if t.elem_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
                               onnx.TensorProto.BFLOAT16):
            raise UnsupportedError(f"[onnx] input '{value.name}' holds {onnx.TensorProto.DataType.Name(t.elem_type)}: "
                                   "nngraph graphs take float images")
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        rank = len(dims)
        batch = 1 if rank == 3 and (self._recurrent_layout(value.name) == 0 or
                                    self._recurrent_layout(value.name) is None and dims[0] is not None and
                                    dims[1] is None) else 0
        if dims and dims[batch] is not None:
            self.batch = dims[batch]
        given = self.input_shapes.get(value.name)
        rest = [d for i, d in enumerate(dims) if i != batch]
        if given is not None:
            if len(given) != len(rest):
                raise InvalidInputError(f"[onnx] input_shapes gives '{value.name}' {len(given)} dims; it has "
                                        f"{len(rest)} besides the batch")
            rest = [int(d) for d in given]
        if rank not in (2, 3, 4) or any(d is None or d < 1 for d in rest):
            raise UnsupportedError(f"[onnx] input '{value.name}' has shape {dims}: nngraph takes (N, C, H, W), "
                                   "(N, C, L), (N, T, F) or (N, C) inputs with every dim but the batch known "
                                   "(input_shapes={name: dims without the batch} gives them)")
        if rank == 4 and self._transposed_to_channels_first(value.name):  # (N, H, W, C), as Keras exports
            shape, axes = (rest[2], rest[0], rest[1]), (("N",), ("H",), ("W",), ("D", "E"))
        elif rank == 4:
            shape, axes = tuple(rest), (("N",), ("D", "E"), ("H",), ("W",))
        elif rank == 2:
            shape, axes = (rest[0], 1, 1), (("N",), ("D", "E"))
        elif batch == 1:  # (T, N, F): a sequence, time first
            shape, axes = (rest[1], 1, rest[0]), (("W",), ("N",), ("D", "E"))
        elif self._reads_channels_first(value.name):  # (N, C, L): one-dimensional convolutions
            shape, axes = (rest[0], 1, rest[1]), (("N",), ("D", "E"), ("W",))
        else:  # (N, T, F): a sequence, batch first
            shape, axes = (rest[1], 1, rest[0]), (("N",), ("W",), ("D", "E"))
        image = ImageNode(shape=shape, label=value.name)
        act = Act(image, shape, axes)
        self.info["inputs"].append((value.name, act))
        return act

    def _transposed_to_channels_first(self, name: str) -> bool:
        """Whether every operator reading `name` is a Transpose from (N, H, W, C) to (N, C, H, W)."""
        readers = self.consumers.get(name, [])
        return bool(readers) and all(n.op_type == "Transpose" and _attr(n, "perm") == [0, 3, 1, 2]
                                     for n in readers)

    def _recurrent_layout(self, name: str):
        """The layout attribute of a recurrent operator reading `name` directly (None: none does)."""
        for n in self.consumers.get(name, []):
            if n.op_type in ("LSTM", "GRU", "RNN") and n.input[0] == name:
                return _attr(n, "layout", 0)
        return None

    def _reads_channels_first(self, name: str) -> bool:
        spatial = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "BatchNormalization", "InstanceNormalization",
                   "GlobalAveragePool", "GlobalMaxPool", "Pad", "Resize", "Upsample"}
        return any(n.op_type in spatial for n in self.consumers.get(name, []))

    def _node(self, node) -> None:
        where = node.name or (node.output[0] if node.output else node.op_type)
        try:
            if node.domain not in ("", "ai.onnx"):
                raise Unsupported(f"operators of domain '{node.domain}' are not supported")
            values = [self.get(n) for n in node.input]
            present = [v for v in values if v is not None]
            pending = next((v for v in present if isinstance(v, (Moved, Stacked))), None)
            if pending is not None and node.op_type not in pending.readers:
                raise Unsupported(pending.why)
            if node.op_type == "If":
                outs = self._branch(node, values[0])
            elif any(isinstance(v, (Act, Moved, Stacked)) for v in present):
                handler = HANDLERS.get(node.op_type)
                if handler is None:
                    raise Unsupported("is not supported")
                outs = handler(self, node)
            elif node.op_type == "Expand" and symbolic(values[1]) and isinstance(values[0], np.ndarray) and \
                    values[0].dtype != object and np.unique(values[0]).size > 1:  # a class token over the batch
                outs = expanded(self, node)
            elif any(is_symbolic(v) for v in present):
                outs = evaluate(node.op_type, values, _attrs(node), self.batch)
            else:
                outs = self._fold(node, values)
        except Unsupported as e:
            raise UnsupportedError(f"[{where}] {node.op_type} {e}") from None
        except (InvalidInputError, UnsupportedError) as e:
            raise type(e)(f"[{where}] {node.op_type}: {e}") from None
        except (ValueError, KeyError, IndexError, TypeError, ArithmeticError) as e:
            raise InvalidInputError(f"[{where}] {node.op_type}: {e}") from None
        except MemoryError:
            raise InvalidInputError(f"[{where}] {node.op_type}: asks for more memory than there is") from None
        for name, v in zip(node.output, outs):
            if name and callable(v):
                self.lazy[name] = v
            elif name:
                self.env[name] = v

    def _branch(self, node, condition) -> list:
        """If of a condition known at import (TorchScript's check of a dim before a Squeeze): the
        nodes of the branch taken, imported in place; their outputs the If's."""
        if not isinstance(condition, np.ndarray) or condition.dtype == object:  # an Act, or of the batch size
            raise Unsupported("of a condition computed at run time is not supported")
        if np.asarray(condition).size != 1:
            raise ValueError(f"condition holds {np.asarray(condition).size} values, not one")
        branch = _attrs(node)["then_branch" if bool(np.asarray(condition).ravel()[0]) else "else_branch"]
        for inner in branch.node:
            self._node(inner)
        return [self.lazy[o.name] if o.name in self.lazy else self.get(o.name) for o in branch.output]

    def _fold(self, node, values: list) -> list:
        """An operator on constants alone, by ONNX's reference implementation."""
        if node.op_type == "Identity":
            return values
        inputs = [helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None) for n in node.input if n]
        outputs = [helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None) for n in node.output if n]
        model = helper.make_model(helper.make_graph([node], "fold", inputs, outputs),
                                  opset_imports=self.model.opset_import)
        feeds = {n: v for n, v in zip(node.input, values) if n}
        try:
            out = ReferenceEvaluator(model).run(None, feeds)
        except Exception as e:  # the reference raises whatever its numpy code meets
            raise InvalidInputError(f"ONNX's reference implementation could not evaluate it on its constants "
                                    f"({type(e).__name__}: {e})") from None
        it = iter(out)
        return [next(it) if n else None for n in node.output]

    def attrs(self, node) -> dict:
        return _attrs(node)


# Attributes ONNX defines as 0 or 1, which the handlers read as truths.
FLAGS = {"allowzero", "ceil_mode", "count_include_pad", "exclusive", "keepdims", "reverse", "transA", "transB"}
# The values ONNX defines for string attributes, by (operator, attribute); "" for any operator.
_RESIZE = {"mode": {"nearest", "linear", "cubic"},
           "coordinate_transformation_mode": {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                              "align_corners", "asymmetric", "tf_half_pixel_for_nn",
                                              "tf_crop_and_resize"},
           "nearest_mode": {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}}
CHOICES = {("", "auto_pad"): {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"},
           ("", "direction"): {"forward", "reverse", "bidirectional"},
           ("DepthToSpace", "mode"): {"DCR", "CRD"}, ("Pad", "mode"): {"constant", "reflect", "edge", "wrap"},
           ("Upsample", "mode"): {"nearest", "linear", "bilinear"},
           **{("Resize", k): v for k, v in _RESIZE.items()}}


def _attr(node, name: str, default=None):
    """One attribute as stored, unchecked: for a look at a reader before the walk reaches it, which
    checks its attributes (_attrs) and raises naming it."""
    a = next((a for a in node.attribute if a.name == name), None)
    return default if a is None else helper.get_attribute_value(a)


def _attrs(node) -> dict:
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if a.name in FLAGS and v not in (0, 1):
            raise ValueError(f"attribute {a.name} must be 0 or 1, got {v}")
        # Integers go to 32-bit geometry, but for Slice-1's bounds (INT64_MAX: to the end).
        if a.name not in ("starts", "ends") and any(abs(i) >= 1 << 31 for i in (a.ints or [a.i])):
            raise ValueError(f"attribute {a.name} holds {v}, beyond 32 bits")
        if isinstance(v, bytes):
            v = v.decode()
            allowed = CHOICES.get((node.op_type, a.name), CHOICES.get(("", a.name)))
            if allowed is not None and v not in allowed:
                raise ValueError(f"{a.name} '{v}' is none of {sorted(allowed)}")
        elif isinstance(v, onnx.TensorProto):
            v = numpy_helper.to_array(v)
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [s.decode() for s in v]
        out[a.name] = v
    return out


def _array(init: onnx.TensorProto) -> np.ndarray:
    if init.data_location == onnx.TensorProto.EXTERNAL and not init.raw_data:
        raise InvalidInputError(f"[onnx] initializer '{init.name}' lies in an external file that was not loaded: "
                                "load the model from its path")
    try:
        a = numpy_helper.to_array(init)
    except Exception as e:  # an unknown data type, or fewer values than its dims
        raise InvalidInputError(f"[onnx] initializer '{init.name}' cannot be read ({type(e).__name__}: {e})") from None
    return a.astype(np.float32) if a.dtype.kind == "f" and a.dtype != np.float32 else a


def load_model(source) -> onnx.ModelProto:
    """An ONNX ModelProto from a path, bytes or a ModelProto, checked."""
    try:
        # The checker reads a path or bytes as they are: given a ModelProto it serializes it
        # first, which for ResNet-18 took longer than the rest of the check.
        if isinstance(source, onnx.ModelProto):
            model = checked = source
        elif isinstance(source, (bytes, bytearray, memoryview)):
            checked = bytes(source)
            model = onnx.load_model_from_string(checked)
        else:
            checked = str(source)
            model = onnx.load(checked)
        onnx.checker.check_model(checked)
    except FileNotFoundError:
        raise
    except Exception as e:  # a truncated, foreign or malformed file, whatever the reader raised
        what = "the bytes given" if isinstance(source, (bytes, bytearray, memoryview)) else \
            "the model given" if isinstance(source, onnx.ModelProto) else str(source)
        raise InvalidInputError(f"[onnx] {what} is not a valid ONNX model ({type(e).__name__}: {e})") from None
    return model


def import_graph(source, device, format: str, input_shapes) -> tuple[Graph, dict]:
    imp = Importer(load_model(source), device, format, input_shapes)
    return imp.run(), imp.info

