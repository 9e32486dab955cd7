"""The device-generic stream API (`torch.Stream`, `torch.Event`, `torch.accelerator`) on the
device, as PyTorch's reference backend is tested: the device index is honoured, and making a
stream current makes its device current."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _back_to_device_0():
    yield
    torch.accelerator.set_stream(torch.mtia_sim.default_stream(0))


def test_torch_stream_names_the_device_it_was_made_for():
    assert torch.Stream(device="mtia_sim").device_index == torch.mtia_sim.current_device()
    stream = torch.Stream(device="mtia_sim:1")
    assert (stream.device.type, stream.device_index) == ("mtia_sim", 1)
    assert torch.Stream(1).device == torch.device("mtia_sim", 1)
    assert "torch.Stream device_type=mtia_sim, device_index=1" in repr(stream)
    same = torch.Stream(stream_id=stream.stream_id, device_type=stream.device_type,
                        device_index=stream.device_index)
    assert same == stream


def test_streams_of_other_devices_are_pytorchs_own():
    cpu_stream = torch.Stream(device="cpu")
    assert type(cpu_stream) is torch._C.Stream and isinstance(cpu_stream, torch.Stream)
    assert isinstance(torch.Stream("mtia_sim"), torch.Stream)
    assert isinstance(torch.Event("mtia_sim"), torch.Event)


def test_set_stream_makes_the_streams_device_current():
    first, second = torch.Stream(device="mtia_sim:0"), torch.Stream(device="mtia_sim:1")
    torch.accelerator.set_stream(first)
    assert torch.accelerator.current_stream() == first
    torch.accelerator.set_stream(second)
    assert torch.accelerator.current_stream() == second
    assert torch.accelerator.current_device_index() == 1


def test_a_stream_context_makes_it_current_and_restores():
    with torch.Stream(device="mtia_sim:1") as stream:
        assert torch.accelerator.current_stream() == stream
    assert torch.accelerator.current_device_index() == 0


def test_device_work_on_a_torch_stream_advances_its_clock_only():
    torch.mtia_sim.synchronize(0)  # earlier tests may leave work queued on the default stream
    stream = torch.Stream(device="mtia_sim:0")
    before = torch.mtia_sim.default_stream(0).clock_us
    with stream:
        torch.randn(256, 256, device="mtia_sim") @ torch.randn(256, 256, device="mtia_sim")
    assert stream.clock_us > before == torch.mtia_sim.default_stream(0).clock_us
    assert stream.query() is False  # queued work not yet finished on the simulated clock
    stream.synchronize()
    assert stream.query() is True


def test_torch_event_records_waits_and_times():
    s1, s2 = torch.Stream(device="mtia_sim"), torch.Stream(device="mtia_sim")
    start, end = torch.Event("mtia_sim", enable_timing=True), torch.Event(enable_timing=True)
    start.record(s1)
    with s1:
        torch.randn(256, 256, device="mtia_sim").exp()
    end.record(s1)
    assert end.device == torch.device("mtia_sim", 0) and end.event_id != 0
    assert start.elapsed_time(end) > 0
    s2.wait_event(end)
    assert s2.clock_us >= s1.clock_us
    event = s1.record_event()
    event.synchronize()
    assert event.query() and s1.query()
    s2.wait_stream(torch.Stream(device="mtia_sim:1"))  # across devices: accepted


def test_a_torch_event_answers_as_torch_event_does():
    event = torch.Event(device="mtia_sim:1")
    assert (event.device.type, event.device.index, event.event_id) == ("mtia_sim", None, 0)
    assert torch.mtia_sim.Event().device is None  # torch.cuda.Event's answer
    untimed = torch.Event("mtia_sim")
    untimed.record()
    with pytest.raises(ValueError, match="enable_timing=True"):
        untimed.elapsed_time(untimed)
