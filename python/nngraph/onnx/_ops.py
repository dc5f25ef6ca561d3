"""Import handlers by operator: each function takes the importer and the NodeProto of an
operator that reads a computed tensor and returns the node's outputs (Acts; a callable for an
output made only if something reads it)."""

from __future__ import annotations

from nngraph.onnx import _elementwise as e
from nngraph.onnx import _moves as m
from nngraph.onnx import _relabel as r
from nngraph.onnx import _resample as s
from nngraph.onnx import _windows as w
from nngraph.onnx._rnn import import_rnn

HANDLERS = {
    "Conv": w.conv, "ConvTranspose": w.conv_transpose, "MaxPool": w.pool, "AveragePool": w.pool,
    "GlobalAveragePool": w.global_pool, "GlobalMaxPool": w.global_pool,
    "DepthToSpace": m.depth_space, "SpaceToDepth": m.depth_space,
    **dict.fromkeys(("ReduceMean", "ReduceMax", "ReduceSum", "ReduceLogSumExp", *w.DERIVED_REDUCTIONS), w.reduce),
    "Gemm": w.gemm, "MatMul": w.matmul,
    "BatchNormalization": e.batch_norm, "InstanceNormalization": e.instance_norm, "GroupNormalization": e.group_norm,
    "LayerNormalization": e.layer_norm, "Softmax": e.softmax, "LogSoftmax": e.softmax, "Dropout": e.dropout,
    "PRelu": e.prelu, "LRN": e.local_response_norm,
    "Identity": r.identity, "Cast": r.identity, "Flatten": r.flatten, "Reshape": r.reshape_op,
    "Transpose": r.transpose, "Squeeze": r.squeeze, "Unsqueeze": r.unsqueeze, "Shape": r.shape, "Gather": r.gather,
    "Slice": s.slice_op, "Split": r.split, "Concat": r.concat, "Pad": r.pad, "Resize": s.resize, "Upsample": s.resize,
    "CumSum": s.cumulative, "Tile": s.tile,
    "Expand": r.expand,
    "LSTM": import_rnn, "GRU": import_rnn, "RNN": import_rnn,
    **dict.fromkeys((*e.NEURONS, "LeakyRelu", "Elu", "Selu", "Celu", "Mish", "Softsign", "HardSigmoid", "Gelu",
                     "Clip", "Pow"), e.neuron),
    "Max": e.extremum, "Min": e.extremum, "Where": e.where,
    **dict.fromkeys(e.ARITHMETIC, e.arithmetic), "Sum": e.total, "Mean": e.total,
}
