"""A compiled function that copies a device value to the host without blocking (a metric read
back each step, `t.to("cpu", non_blocking=True)`): Inductor's wrapper allocates a pinned host
buffer for it (inductor/_compat.pinned_host_buffers)."""

import pytest
import torch

import mtia_lab  # noqa: F401

DEVICE = "mtia_sim"


@pytest.mark.parametrize("non_blocking", [True, False])
def test_a_device_to_host_copy_in_compiled_code_matches_eager(non_blocking):
    x = torch.randn(5, 7).t()  # strided: the host buffer keeps the layout

    def f(t):
        return (t.to(DEVICE) * 2).to("cpu", non_blocking=non_blocking) + 1

    torch.compiler.reset()
    got = torch.compile(f)(x)
    torch.mtia_sim.synchronize()
    torch.testing.assert_close(got, f(x))
    assert got.device.type == "cpu"
