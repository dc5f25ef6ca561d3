import numpy as np
import pytest

import nngraph as ng

DEVICES = [b for b in ng.built_backends() if ng.device_count(b) > 0]
GPUS = [d for d in DEVICES if d != "cpu"]


@pytest.fixture(params=DEVICES)
def device(request):
    """Every backend built into this package whose device is present (cpu always)."""
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
