"""`torch.accelerator.*` answered by the simulated devices.

Once mtia_lab is imported, PrivateUse1 (mtia_sim) is this process's accelerator, and
`torch.accelerator` asks its C++ hooks. PyTorch 2.13 lets a Python backend register only a
one-device guard and three hooks (is_available, is_built, has_primary_context), so without help
`torch.accelerator` reports device 0 whatever device is current (a silent wrong index),
ignores `set_device_index`, fails inside the allocator ("INTERNAL ASSERT FAILED ... not a
DeviceAllocator") for every memory query, and `empty_host_cache()` crashes the process.

So the functions of `torch.accelerator` (and `torch.accelerator.memory`) that PyTorch cannot
route to a Python backend are replaced by versions that ask `torch.mtia_sim` while mtia_sim is
the accelerator, and call PyTorch's own otherwise. Left as PyTorch has it, with PyTorch's clear
RuntimeError: `Graph` ("not supported on device type: mtia_sim"; use torch.mtia_sim.MTIAGraph).
Not reachable from Python at all: `torch.Stream(device="mtia_sim:1")` and
`torch.Event(device=...)` are built by the one-device guard and report device index 0 (a known
limitation; use `torch.mtia_sim.Stream` / `torch.mtia_sim.Event`), and
`torch.Generator(device="mtia_sim")` needs a C++ hook (getNewGenerator): PyTorch raises.
"""

from __future__ import annotations

import collections

import torch
import torch.accelerator
import torch.accelerator.memory

from .._compat import DEVICE_NAME
from . import device_module as mtia
from .streams import Stream

_ORIGINALS: dict[str, object] = {}


def _ours() -> bool:
    accelerator = torch._C._accelerator_getAccelerator()
    return accelerator is not None and accelerator.type == DEVICE_NAME


def _routed(name: str, ours):
    original = getattr(torch.accelerator, name)
    _ORIGINALS.setdefault(name, original)

    def function(*args, **kwargs):
        if _ours():
            return ours(*args, **kwargs)
        return _ORIGINALS[name](*args, **kwargs)

    function.__name__ = name
    function.__doc__ = (getattr(original, "__doc__", None) or "") + (
        f"\n(mtia_lab: answered by torch.{DEVICE_NAME} while it is the accelerator.)"
    )
    return function


def _set_stream(stream) -> None:
    if not isinstance(stream, Stream):
        raise TypeError(
            f"torch.accelerator.set_stream on {DEVICE_NAME} takes a torch.{DEVICE_NAME}.Stream "
            f"(from torch.accelerator.current_stream() or torch.{DEVICE_NAME}.Stream()); "
            f"got {type(stream).__name__}. A torch.Stream cannot name a {DEVICE_NAME} device "
            "other than 0 in PyTorch 2.13."
        )
    mtia.set_stream(stream)


# The device stores its bytes in host tensors: every dtype the host can allocate and convert.
SUPPORTED_DTYPES = {
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16,
    torch.uint32, torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64,
    torch.complex64, torch.complex128, torch.float8_e4m3fn, torch.float8_e5m2,
}


def _device_capability(device=None, /) -> dict:
    mtia.get_device_properties(device)  # a clear error for a device that does not exist
    return {"supported_dtypes": set(SUPPORTED_DTYPES)}


def _memory_stats(device_index=None, /) -> collections.OrderedDict:
    return collections.OrderedDict(mtia.memory_stats(device_index))


class device_index:
    """Context manager: make device `device` current for the block (None: no-op), as
    torch.accelerator.device_index."""

    def __init__(self, device, /) -> None:
        self.idx = device
        self._inner = None

    def __enter__(self) -> None:
        if self.idx is None:
            return
        if _ours():
            self._inner = mtia.device(self.idx)
        else:
            self._inner = _ORIGINALS["device_index"](self.idx)
        self._inner.__enter__()

    def __exit__(self, *exc_info) -> None:
        if self._inner is not None:
            self._inner.__exit__(*exc_info)


ROUTES = {
    "current_device_index": lambda: mtia.current_device(),
    "current_device_idx": lambda: mtia.current_device(),
    "set_device_index": lambda device, /: mtia.set_device(device),
    "set_device_idx": lambda device, /: mtia.set_device(device),
    "current_stream": lambda device=None, /: mtia.current_stream(device),
    "set_stream": _set_stream,
    "synchronize": lambda device=None, /: mtia.synchronize(device),
    "get_device_capability": _device_capability,
    "empty_cache": lambda: mtia.empty_cache(),
    "empty_host_cache": lambda: None,  # no pinned-memory cache of ours to empty
    "memory_stats": _memory_stats,
    "memory_allocated": lambda device_index=None, /: mtia.memory_allocated(device_index),
    "max_memory_allocated": lambda device_index=None, /: mtia.max_memory_allocated(device_index),
    "memory_reserved": lambda device_index=None, /: mtia.memory_reserved(device_index),
    "max_memory_reserved": lambda device_index=None, /: mtia.max_memory_reserved(device_index),
    "reset_accumulated_memory_stats":
        lambda device_index=None, /: mtia.reset_accumulated_memory_stats(device_index),
    "reset_peak_memory_stats": lambda device_index=None, /: mtia.reset_peak_memory_stats(
        device_index),
    "get_memory_info": lambda device_index=None, /: mtia.mem_get_info(device_index),
}


def register() -> None:
    """Install the routes in torch.accelerator and torch.accelerator.memory. Idempotent."""
    if _ORIGINALS:
        return
    for name, ours in ROUTES.items():
        routed = _routed(name, ours)
        setattr(torch.accelerator, name, routed)
        if hasattr(torch.accelerator.memory, name):
            setattr(torch.accelerator.memory, name, routed)
    _ORIGINALS["device_index"] = torch.accelerator.device_index
    torch.accelerator.device_index = device_index
