"""PyTorch's own profiler on the device: `profile(use_device="mtia_sim")` (and
`torch.profiler.profile` with the PrivateUse1 activity) record sane host times, as without
`use_device`, instead of PyTorch's C++ device-timing path that a Python backend cannot serve."""

from __future__ import annotations

import pytest
import torch
from torch.autograd.profiler import profile
from torch.profiler import ProfilerActivity, record_function

DEVICE = "mtia_sim"


def _run_a_few_ops() -> None:
    x = torch.randn(16, 16, device=DEVICE)
    with record_function("user_block"):
        (x @ x + 1).relu().sum()


def test_use_device_records_non_negative_times_and_says_so():
    with pytest.warns(UserWarning, match="host side only.*mtia_lab.trace"):
        with profile(use_device=DEVICE) as prof:
            _run_a_few_ops()
    names = {event.name for event in prof.function_events}
    assert {"user_block", "aten::mm"} <= names
    assert all(event.cpu_time_total >= 0 for event in prof.function_events)
    total = sum(avg.cpu_time_total for avg in prof.key_averages())
    assert 0 <= total < 60e6  # microseconds: the ops took well under a minute


def test_the_privateuse1_activity_records_the_same_way():
    with torch.profiler.profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
    ) as prof:
        _run_a_few_ops()
    events = prof.events()
    assert any(event.name == "aten::mm" for event in events)
    assert all(event.cpu_time_total >= 0 for event in events)
