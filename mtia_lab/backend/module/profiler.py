"""PyTorch's profiler asked to time the device: `profile(use_device="mtia_sim")`.

For a PrivateUse1 device, PyTorch's autograd profiler (without Kineto) times every event through
the backend's C++ profiler stubs (`registerPrivateUse1Methods`), which a Python backend cannot
register: PyTorch's default stubs then fail on each event, printing a C++ stack trace each time
(a 100-step loop took 80 s instead of 0.6 s), and every event gets the same meaningless start
and end (`cpu_time_total` of about -7e15 us). So `use_device="mtia_sim"` profiles the host side
only, exactly as `use_device=None` does, and says so (a UserWarning, which Python shows once per
calling line); the device's simulated times are in `mtia_lab.trace()`.
"""

from __future__ import annotations

import functools
import warnings

import torch.autograd.profiler

from ..._compat import DEVICE_NAME

MESSAGE = (
    f"profile(use_device='{DEVICE_NAME}') records the host side only (as use_device=None): "
    "PyTorch times a PrivateUse1 device through C++ profiler stubs, which a Python backend "
    "cannot register. For the simulated device's own times use mtia_lab.trace()."
)


def _host_only_init(init):
    @functools.wraps(init)
    def __init__(self, *args, use_device=None, **kwargs):
        if use_device == DEVICE_NAME:
            use_device = None
            warnings.warn(MESSAGE, UserWarning, stacklevel=2)
        init(self, *args, use_device=use_device, **kwargs)

    __init__._mtia_sim_host_only = True
    return __init__


def register() -> None:
    """Wrap `torch.autograd.profiler.profile.__init__` (idempotent)."""
    profile = torch.autograd.profiler.profile
    if not getattr(profile.__init__, "_mtia_sim_host_only", False):
        profile.__init__ = _host_only_init(profile.__init__)
