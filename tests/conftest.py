import gc

import pytest
import torch

import mtia_lab  # noqa: F401  (registers the mtia_sim device)

DEVICE = "mtia_sim"


@pytest.fixture
def device() -> torch.device:
    return torch.device(DEVICE, 0)


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches and counters empty before and after: compile records start at zero."""
    torch.compiler.reset()
    yield
    torch.compiler.reset()


@pytest.fixture
def clean_memory():
    """Collect garbage so that memory figures start from what live tensors hold."""
    gc.collect()
    torch.mtia_sim.empty_cache()
    yield
    gc.collect()
