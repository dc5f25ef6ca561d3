"""Python data sources the tests share: fixed arrays returned as they are."""

import nngraph as ng


class HeldSource(ng.DataSource):
    """The protocol's plumbing for tensors held in Python: the given descriptor and label; load
    and purge do nothing. Subclasses add one method per tensor."""

    def __init__(self, descriptor, label):
        super().__init__()
        self.desc, self._label = descriptor, label

    def descriptor(self):
        return self.desc

    def label(self):
        return self._label

    def load(self):
        return True

    def purge(self):
        pass


class FixedSource(HeldSource):
    """Weights w (OIHW) and biases b (or None) held in Python; no update(), so frozen."""

    def __init__(self, w, b=None, label="fixed", descriptor=None):
        super().__init__(descriptor or ng.ConvolutionDescriptor(tuple(w.shape[2:]), w.shape[1], w.shape[0]), label)
        self.w, self.b = w, b

    def weights(self):
        return self.w

    def biases(self):
        return self.b


def checkpoint_contents(path):
    """A checkpoint file's arrays by name and its header (the sources' table decoded)."""
    import json

    import safetensors
    with safetensors.safe_open(str(path), framework="np") as f:
        header = dict(f.metadata())
        arrays = {k: f.get_tensor(k) for k in f.keys()}
    header["sources"] = json.loads(header["sources"])
    return arrays, header


def write_checkpoint(path, arrays, header, legacy=False):
    """A checkpoint of these arrays and header: safetensors, or the .npz of earlier versions."""
    import json

    import numpy as np
    import safetensors.numpy
    if legacy:
        meta = {"format": header["format"], "version": 1, "sources": header["sources"]}
        np.savez(path, **arrays, __nngraph__=np.frombuffer(json.dumps(meta).encode(), np.uint8))
    else:
        meta = {**header, "sources": json.dumps(header["sources"])}
        safetensors.numpy.save_file(arrays, str(path), metadata=meta)
    return path
