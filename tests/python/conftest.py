import numpy as np
import pytest

import nngraph as ng


def _devices():
    return [b for b in ng.built_backends()]


@pytest.fixture(params=_devices())
def device(request):
    """Every backend built into this package (cpu always)."""
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
