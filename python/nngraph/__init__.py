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

from nngraph import _core, schedules, store  # noqa: E402  (after the BLAS library is loaded)
from nngraph._core import *  # noqa: E402, F403  (every public name of the engine, declared in _core.pyi)
from nngraph.checkpoint import load, save  # noqa: E402
from nngraph.graphs import describe as _describe  # noqa: E402
from nngraph.graphs import parameters as _parameters  # noqa: E402
from nngraph.graphs import predict as _predict  # noqa: E402
from nngraph.graphs import summary as _summary  # noqa: E402
from nngraph.losses import LossDataDescriptor, LossLabels  # noqa: E402
from nngraph.plotting import plot_history  # noqa: E402
from nngraph.training import averaged_weights, evaluate, fit  # noqa: E402

# Graph's conveniences written in Python (batching, tables) become its methods.
_core.Graph.predict = _predict
_core.Graph.parameters = _parameters
_core.Graph.summary = _summary
_core.Graph.__repr__ = _describe

__version__ = "0.1.0"

# The Python layer's names, then the engine's, which follow from its bindings.
__all__ = ["LossDataDescriptor", "LossLabels", "averaged_weights", "evaluate", "fit", "load", "plot_history", "save",
           "schedules", "store"]
__all__ += sorted(name for name in dir(_core) if not name.startswith("_"))
