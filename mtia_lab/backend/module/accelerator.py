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
`torch.Stream(device=...)` and `torch.Event(...)` are built by PyTorch's C++ device guard, which
a Python backend cannot fill (its one-device guard reported index 0 and did nothing), so
`torch.Stream` and `torch.Event` are routed too: for mtia_sim they make the device's own Stream
and Event (subclasses of PyTorch's, on the simulated clock); for other devices, PyTorch's.
`torch.Generator(device="mtia_sim")` needs a C++ hook (getNewGenerator): PyTorch raises.
"""

from __future__ import annotations

import collections

import torch
import torch.accelerator
import torch.accelerator.memory

from ... import _compat
from ..._compat import DEVICE_NAME
from ..runtime.streams import DEVICE_TYPE, Event, Stream, find_stream
from . import device_module as mtia

_ORIGINALS: dict[str, object] = {}


def _ours() -> bool:
    accelerator = _compat.current_accelerator()
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


def _named_device(device) -> int | None:
    """The mtia_sim index a torch.Stream / torch.Event `device` argument names, or None when it
    names another device. None and bare ints mean the current accelerator, as in PyTorch."""
    if device is None or (isinstance(device, int) and not isinstance(device, bool)):
        if not _ours():
            return None
        return mtia.current_device() if device is None or device < 0 else device
    if isinstance(device, (str, torch.device)):
        device = torch.device(device)
        if device.type == DEVICE_NAME:
            return device.index if device.index is not None else mtia.current_device()
    return None


def _generic_stream(device=None, *args, priority: int = 0, **kwargs):
    """torch.Stream(...) on mtia_sim: the device's own Stream (None for other devices)."""
    if "stream_id" in kwargs or args:  # Stream(stream_id, device_index, device_type)
        values = dict(zip(("device_index", "device_type"), args, strict=False), **kwargs)
        values.setdefault("stream_id", device)
        if values.get("device_type") != DEVICE_TYPE:
            return None
        return find_stream(values["device_index"], values["stream_id"])
    index = _named_device(device)
    return None if index is None else Stream(index, priority)


def _generic_event(device=None, *, enable_timing: bool = False, blocking: bool = False,
                   interprocess: bool = False):
    """torch.Event(...) on mtia_sim: the device's own Event (None for other devices)."""
    if _named_device(device) is None:
        return None
    event = Event(enable_timing, blocking, interprocess)
    event.generic = True
    return event


def _set_stream(stream) -> None:
    if not isinstance(stream, Stream):
        raise TypeError(
            f"torch.accelerator.set_stream on {DEVICE_NAME} takes a stream of the device "
            f"(torch.Stream('{DEVICE_NAME}:N'), torch.{DEVICE_NAME}.Stream(), "
            f"torch.accelerator.current_stream()); got {type(stream).__name__}"
        )
    mtia.set_stream(stream)


# The device stores its bytes in host tensors: every dtype the host can allocate and convert.
SUPPORTED_DTYPES = {
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16,
    torch.uint32, torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64,
    torch.complex32, torch.complex64, torch.complex128, torch.float8_e4m3fn, torch.float8_e5m2,
    # quantized tensors: the integers in device memory, the quantizer PyTorch's (quantized.py)
    torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4,
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
    _compat.route_device_generic_class("Stream", _generic_stream)
    _compat.route_device_generic_class("Event", _generic_event)
