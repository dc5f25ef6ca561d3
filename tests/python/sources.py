"""Python data sources the tests share: fixed arrays returned as they are."""

import nngraph as ng


class FixedSource(ng.DataSource):
    """Weights w (OIHW) and biases b (or None) held in Python; no update(), so frozen."""

    def __init__(self, w, b=None, label="fixed", descriptor=None):
        super().__init__()
        self.w, self.b, self._label = w, b, label
        self.desc = descriptor or ng.ConvolutionDescriptor(tuple(w.shape[2:]), w.shape[1], w.shape[0])

    def descriptor(self):
        return self.desc

    def label(self):
        return self._label

    def load(self):
        return True

    def purge(self):
        pass

    def weights(self):
        return self.w

    def biases(self):
        return self.b
