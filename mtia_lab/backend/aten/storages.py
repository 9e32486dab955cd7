"""Storages made directly on the device: refused with a clear error instead of a segfault.

`torch.UntypedStorage(n, device="mtia_sim")` (and what builds on it: `TypedStorage(...,
device=)`, `storage.to("mtia_sim")`, `storage.clone()` of a device tensor's storage,
`_new_shared`) asks PyTorch's C++ for the PrivateUse1 memory allocator. A pure-Python backend
cannot register one (that is C++: `c10::SetAllocator`), so PyTorch dereferences a null allocator
and the process dies. Device memory here belongs to tensors (tensor.py); a storage on its own
has no place to live, so the constructor says so, and names what works instead.
"""

from __future__ import annotations

import torch

from ... import _compat
from ..._compat import DEVICE_NAME


def _refuse(what: str) -> RuntimeError:
    return RuntimeError(
        f"{what} on {DEVICE_NAME} is not supported: {DEVICE_NAME} keeps its memory in device "
        "tensors, and a storage on its own would need a C++ allocator, which a Python backend "
        "cannot register. Make a tensor instead, e.g. torch.empty(n, dtype=torch.uint8, "
        f"device='{DEVICE_NAME}'), or build the storage on the host and move tensors over "
        f"with `.to('{DEVICE_NAME}')`."
    )


def _on_device(device) -> bool:
    if device is None:
        return False
    try:
        return torch.device(device).type == DEVICE_NAME
    except (RuntimeError, TypeError):
        return False  # PyTorch's own constructor reports a bad device argument


def _checked_new(original_new):
    def new(cls, *args, **kwargs):
        if _on_device(kwargs.get("device")):
            raise _refuse(f"torch.{cls.__name__}(..., device=...)")
        return original_new(cls, *args, **kwargs)

    new.__wrapped__ = original_new
    return new


def install() -> None:
    """Guard the storage constructor (idempotent)."""
    _compat.wrap_storage_new(_checked_new)
