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


# The files that take minutes (compiling every graph of a suite by our backend and by
# Inductor, real models, a browser), longest first, as measured by `make test`'s junit times.
# `make test`'s two workers take whole files in collection order (the Makefile turns off
# pytest-xdist's re-sort by test count), so a long file collected last would leave one worker
# running it alone at the end. tests/test_test_order.py checks that each is still a file here.
LONGEST_FIRST = ("test_scheduler_fidelity_blind.py", "test_model_zoo.py",
                 "test_tutorials_in_jupyterlab.py", "test_scheduler_fidelity.py",
                 "test_fidelity_rules.py", "test_meta_strides.py", "test_opinfo_inductor.py",
                 "test_distributed.py")


def pytest_collection_modifyitems(items: list) -> None:
    def rank(item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each file's tests keep their order


_FILE_RUNNING: list = [None]


def pytest_runtest_setup(item) -> None:
    """At the start of each test file: collect garbage, then freeze what is left (`gc.freeze`).

    A worker that ran the fidelity suites holds over a million objects (imported model
    families, Inductor's and sympy's caches); every `gc.collect()` a later test makes (a memory
    check, an interrupt storm) walked all of them again, which made those files up to ten times
    slower than alone. Frozen objects are skipped by the cycle collector; reference counting
    still frees them, and everything a test creates is collected as before."""
    if item.path != _FILE_RUNNING[0]:
        _FILE_RUNNING[0] = item.path
        gc.collect()
        gc.freeze()


def pytest_sessionfinish(session) -> None:
    """Hand the frozen objects back to the collector: what they hold (Triton's bindings among
    them) is then finalized at exit as usual."""
    gc.unfreeze()
