"""Import of values moved within each image (DepthToSpace, SpaceToDepth, Reshape and Transpose
chains that no image holds as they lie): followed as indices into the source image's values,
then made one strided convolution by one-hot weights where the moves go in blocks."""

from __future__ import annotations

import numpy as np

from nngraph._core import ArrayDataSource, Convolution, ConvolutionDescriptor, ConvolutionTranspose
from nngraph.onnx._layout import Moved, Unsupported, channels_first


def depth_space(imp, n) -> list:
    """DepthToSpace (DCR or CRD) and SpaceToDepth by blocks of r × r: the moves the specification
    writes as reshapes and a transpose, applied to the image's value indices, then settled as one
    strided convolution by one-hot weights (PyTorch's PixelShuffle, CRD, in one group a channel)."""
    x = imp.act(n)
    x.spatial_form(n.op_type, 4)
    r, (c, h, w) = imp.attrs(n)["blocksize"], x.shape
    index = np.arange(c * h * w).reshape(c, h, w)
    if n.op_type == "SpaceToDepth":
        if h % r or w % r:
            raise Unsupported(f"by {r} of an image of {h} × {w} is not supported (the block must divide it)")
        index = index.reshape(c, h // r, r, w // r, r).transpose(2, 4, 0, 1, 3).reshape(c * r * r, h // r, w // r)
    else:
        if c % (r * r):
            raise Unsupported(f"by {r} of {c} channels is not supported (r² must divide them)")
        if imp.attrs(n).get("mode", "DCR") == "CRD":
            index = index.reshape(c // (r * r), r, r, h, w).transpose(0, 3, 1, 4, 2)
        else:
            index = index.reshape(r, r, c // (r * r), h, w).transpose(2, 3, 0, 4, 1)
        index = index.reshape(c // (r * r), h * r, w * r)
    return [settled(imp, n, Moved(x, index, ""))]


def settled(imp, n, m: Moved):
    """A Moved tensor that reads as an image a convolution of kernel and stride k by one-hot weights
    makes (its source frozen; in as many groups as the moves keep apart): each output pixel
    (c′, y, x) reads (c, y·k + i, x·k + j) with c, i, j fixed by c′ (space-to-depth; k = 1:
    channels permuted), or (c, y//k, x//k) with c fixed by (c′, y mod k, x mod k) (depth-to-space,
    a transposed convolution). Otherwise m as it is."""
    if m.index.ndim != 3:
        return m
    (c, h, w), (oc, oh, ow) = m.source.shape, m.index.shape
    src_c, rest = np.divmod(m.index, h * w)
    src_y, src_x = np.divmod(rest, w)
    ys, xs = np.arange(oh)[None, :, None], np.arange(ow)[None, None, :]
    label = imp.label(n.name or n.op_type)
    if h % oh == 0 and w % ow == 0 and h // oh == w // ow:
        k = h // oh
        i, j = src_y - ys * k, src_x - xs * k
        if all((v == v[:, :1, :1]).all() for v in (src_c, i, j)) and i.min() >= 0 and i.max() < k and \
                j.min() >= 0 and j.max() < k:
            outs, ins = np.arange(oc), src_c[:, 0, 0]
            g = _groups(ins, outs, c, oc)
            wt = np.zeros((oc, c // g, k, k), np.float32)
            wt[outs, ins % (c // g), i[:, 0, 0], j[:, 0, 0]] = 1
            ds = ArrayDataSource(ConvolutionDescriptor(k, c, oc, stride=k, groups=g), weights=wt, biases=None,
                                 label=label, frozen=["weights"])
            return channels_first(Convolution(m.source.image, ds, label=label), (oc, oh, ow), ["H", "W"])
    elif oh % h == 0 and ow % w == 0 and oh // h == ow // w:
        k = oh // h
        blocks = src_c.reshape(oc, h, k, w, k)
        if (src_y == ys // k).all() and (src_x == xs // k).all() and (blocks == blocks[:, :1, :, :1, :]).all():
            outs, ti, tj = (a.ravel() for a in np.indices((oc, k, k)))
            ins = blocks[:, 0, :, 0, :].ravel()
            g = _groups(ins, outs, c, oc)
            wt = np.zeros((c, oc // g, k, k), np.float32)
            wt[ins, outs % (oc // g), ti, tj] = 1
            desc = ConvolutionDescriptor(k, c, oc, stride=k, groups=g, transposed=True)
            ds = ArrayDataSource(desc, weights=wt, biases=None, label=label, frozen=["weights"])
            return channels_first(ConvolutionTranspose(m.source.image, ds, label=label), (oc, oh, ow), ["H", "W"])
    return m


def _groups(ins: np.ndarray, outs: np.ndarray, c: int, oc: int) -> int:
    """The most groups (dividing c and oc) that keep every (input, output) channel pair in one."""
    return max(g for g in range(1, min(c, oc) + 1) if c % g == 0 and oc % g == 0 and
               (ins // (c // g) == outs // (oc // g)).all())
