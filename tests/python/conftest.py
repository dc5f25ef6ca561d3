import numpy as np
import pytest

import nngraph as ng


@pytest.fixture(params=ng.built_backends())
def device(request):
    """Every backend built into this package (cpu always)."""
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
