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
