"""Bad arguments get a clear error naming the argument and what is accepted, and change
nothing."""

import pytest
import torch

import mtia_lab
from mtia_lab.backend import RUNTIME
from mtia_lab.backend.runtime.profile import MTIA_V1, MTIA_V2

mt = torch.mtia_sim


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"device_count": 65}, ValueError, "device_count must be from 1 to 64"),
        ({"device_count": 0}, ValueError, "device_count must be from 1 to 64"),
        ({"device_count": 2.5}, TypeError, "device_count must be an int"),
        ({"device_count": True}, TypeError, "device_count must be an int"),
        ({"device_count": "3"}, TypeError, "device_count must be an int"),
        ({"memory_capacity": 1.5e9}, TypeError, r"memory_capacity \(bytes\) must be an int"),
        ({"memory_capacity": True}, TypeError, r"memory_capacity \(bytes\) must be an int"),
        ({"memory_capacity": -1}, ValueError, "must be at least 1"),
        ({"profile": "mtia_v9"}, ValueError, r"one of \['mtia_v1', 'mtia_v2'\]"),
        ({"profile": 2}, ValueError, "profile must be a ChipProfile"),
        ({"strict": "no"}, TypeError, "strict must be True or False"),
        ({"record_alloc_source": 1}, TypeError, "record_alloc_source must be True or False"),
        # checked before anything changes: the good device_count is not applied either
        ({"device_count": 3, "profile": "nope"}, ValueError, "profile must be"),
    ],
)
def test_configure_refuses_bad_arguments(kwargs, error, message):
    before = (len(RUNTIME.devices), RUNTIME.capacity, RUNTIME.profile, RUNTIME.strict)
    with pytest.raises(error, match=message):
        mtia_lab.configure(**kwargs)
    assert (len(RUNTIME.devices), RUNTIME.capacity, RUNTIME.profile, RUNTIME.strict) == before


def test_configure_takes_profile_names_and_the_largest_device_count():
    try:
        mtia_lab.configure(profile="mtia_v1")
        assert mt.get_device_name() == MTIA_V1.name
        mtia_lab.configure(device_count=64)
        assert (torch.ones(1, device="mtia_sim:63") + 1).item() == 2.0
    finally:
        mtia_lab.configure(profile=MTIA_V2, device_count=2)


def test_set_strict_takes_booleans_only():
    with pytest.raises(TypeError, match="True or False"):
        mtia_lab.set_strict("no")
    assert RUNTIME.strict is False  # "no" did not turn it on
    with pytest.raises(TypeError, match="True or False"):
        with mtia_lab.strict("yes"):
            pass
    assert RUNTIME.strict is False


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: mt.Stream(device=7), RuntimeError, "mtia_sim:7 does not exist"),
        (lambda: torch.accelerator.set_device_index(2), RuntimeError,
         "The device index is out of range: mtia_sim:2 does not exist"),  # torch_openreg's words
        (lambda: mt.Stream(device="cpu"), ValueError, "expected a mtia_sim device"),
        (lambda: mt.Stream(device=1.0), TypeError, "device must be an int"),
        (lambda: mt.set_device("cuda:0"), ValueError, "expected a mtia_sim device"),
        (lambda: mt.get_device_properties(-1), ValueError, "device index must be >= 0"),
        (lambda: mt.memory_allocated(-2), ValueError, "device index must be >= 0"),
        (lambda: mt.set_stream(object()), TypeError, "Stream or None"),
        (lambda: mt.set_per_process_memory_fraction(True), TypeError, "fraction must be a float"),
        (lambda: mtia_lab.register_kernel("add"), ValueError, "'aten::add.Tensor'"),
        (lambda: mtia_lab.register_kernel("aten::no_such_op"), ValueError, "does not exist"),
        (lambda: mtia_lab.register_kernel(42), TypeError, "op must be a string"),
        (lambda: mtia_lab.register_kernel("aten::add", kind="fast"), ValueError, "kind must be"),
        (lambda: mtia_lab.storage_of("x"), TypeError, r"storage_of expects a tensor on mtia_sim, "
                                                      r"got 'x' \(str\)"),
        (lambda: mtia_lab.storage_of(torch.ones(1)), TypeError, "got one on cpu"),
    ],
)
def test_device_api_refuses_bad_arguments(make, error, message):
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"page_size": 0}, ValueError, "page_size must be at least 1"),
        ({"page_size": 2.5}, TypeError, "page_size must be an int"),
        ({"page": -1}, ValueError, "page must be at least 0"),
    ],
)
def test_trace_table_refuses_bad_paging(kwargs, error, message):
    from mtia_lab.viz import TraceExplorer, trace_table

    with mtia_lab.trace() as t:
        torch.ones(2, device="mtia_sim").add_(1)
    with pytest.raises(error, match=message):
        trace_table(t, **kwargs)
    if "page_size" in kwargs:
        with pytest.raises(error, match=message):
            TraceExplorer(t, page_size=kwargs["page_size"])



@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("MTIA_SIM_MEMORY_CAPACITY", "1.5e9", "MTIA_SIM_MEMORY_CAPACITY='1.5e9': expected a whole"),
        ("MTIA_SIM_DEVICE_COUNT", "100", "MTIA_SIM_DEVICE_COUNT must be from 1 to 64, got 100"),
    ],
)
def test_environment_settings_are_checked(monkeypatch, variable, value, message):
    """What Runtime() reads at import (a fresh process would show the same error)."""
    from mtia_lab.backend.runtime.device_state import Runtime

    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        Runtime()
