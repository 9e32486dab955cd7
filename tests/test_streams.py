"""Streams and events on the simulated clock, as CUDA code expects them to behave."""

import pytest
import torch

from mtia_lab.backend import RUNTIME


def _timed(stream=None):
    return torch.mtia_sim.Event(enable_timing=True)


def test_work_advances_the_stream_and_elapsed_time_is_simulated():
    x = torch.randn(256, 256, device="mtia_sim")
    start, end = _timed(), _timed()
    start.record()
    for _ in range(10):
        x = x @ x.t() / 256
    end.record()
    end.synchronize()
    elapsed = start.elapsed_time(end)  # milliseconds, like CUDA
    profile = RUNTIME.devices[0].profile
    # each mm is at least its launch overhead plus 2*N^3 flops on the GEMM engine
    floor_ms = 10 * (profile.kernel_launch_us + 2 * 256**3 / profile.gemm_flops_bf16 * 1e6) / 1e3
    assert elapsed >= floor_ms
    assert elapsed < 100 * floor_ms


def test_elapsed_time_needs_timing_and_recording():
    a, b = torch.mtia_sim.Event(), torch.mtia_sim.Event()
    a.record()
    b.record()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        a.elapsed_time(b)
    with pytest.raises(RuntimeError, match="recorded"):
        _timed().elapsed_time(_timed())


def test_synchronize_moves_device_time_to_the_end_of_queued_work():
    stream = torch.mtia_sim.current_stream()
    torch.ones(1 << 16, device="mtia_sim").mul_(3)
    assert RUNTIME.devices[0].now_us <= stream.clock_us
    torch.mtia_sim.synchronize()
    assert RUNTIME.devices[0].now_us == stream.clock_us
    assert stream.query()


def test_non_blocking_copy_overlaps_compute_on_another_stream():
    host = torch.randn(1 << 20)
    weights = torch.randn(512, 512, device="mtia_sim")
    torch.mtia_sim.synchronize()
    copy_stream = torch.mtia_sim.Stream()
    compute_start, compute_end = _timed(), _timed()
    copy_start, copy_end = _timed(), _timed()
    with torch.mtia_sim.stream(copy_stream):
        copy_start.record()
        moved = host.to("mtia_sim", non_blocking=True)
        copy_end.record()
    compute_start.record()
    for _ in range(4):
        weights = weights @ weights
    compute_end.record()
    # Both started at the same simulated instant and ran side by side.
    assert copy_start.recorded_us == compute_start.recorded_us
    assert copy_end.recorded_us > compute_start.recorded_us
    assert compute_end.recorded_us > copy_start.recorded_us
    # The default stream must wait for the copy before using its result.
    torch.mtia_sim.current_stream().wait_stream(copy_stream)
    after = _timed()
    after.record()
    assert after.recorded_us >= copy_end.recorded_us
    torch.testing.assert_close(moved.cpu(), host)


def test_blocking_copy_makes_the_host_wait():
    torch.mtia_sim.synchronize()
    before = RUNTIME.devices[0].now_us
    torch.randn(1 << 18).to("mtia_sim")
    assert RUNTIME.devices[0].now_us > before
    assert RUNTIME.devices[0].now_us == torch.mtia_sim.current_stream().clock_us


def test_wait_event_orders_streams():
    other = torch.mtia_sim.Stream()
    with torch.mtia_sim.stream(other):
        torch.ones(1 << 18, device="mtia_sim").exp_()
        done = torch.mtia_sim.Event()
        done.record()
    main = torch.mtia_sim.current_stream()
    main.wait_event(done)
    assert main.clock_us >= done.recorded_us


def test_each_device_has_its_own_clock():
    torch.mtia_sim.synchronize(0)
    torch.mtia_sim.synchronize(1)
    t1 = torch.mtia_sim.current_stream(1).clock_us
    x = torch.randn(128, 128, device="mtia_sim:0")
    (x @ x).sum()
    assert torch.mtia_sim.current_stream(1).clock_us == t1


def test_reading_a_result_on_the_host_waits_for_the_stream():
    torch.mtia_sim.synchronize()
    x = torch.randn(512, 512, device="mtia_sim")
    y = x @ x
    stream = torch.mtia_sim.current_stream()
    assert RUNTIME.devices[0].now_us < stream.clock_us  # queued, not done
    y.sum().item()
    assert RUNTIME.devices[0].now_us == stream.clock_us
    z = x @ x
    z.cpu()
    assert RUNTIME.devices[0].now_us == stream.clock_us
    w = x @ x
    w.to("cpu", non_blocking=True)
    assert RUNTIME.devices[0].now_us < stream.clock_us  # non_blocking: the host did not wait


def test_device_to_device_copy_crosses_the_link_and_is_charged_to_the_target():
    x = torch.randn(1 << 20, device="mtia_sim:0")
    torch.mtia_sim.synchronize(1)
    before = torch.mtia_sim.current_stream(1).clock_us
    x.to("mtia_sim:1", non_blocking=True)
    elapsed_us = torch.mtia_sim.current_stream(1).clock_us - before
    profile = RUNTIME.devices[1].profile
    assert elapsed_us >= (1 << 22) / profile.host_link_bandwidth * 1e6
