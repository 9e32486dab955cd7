"""Pinned (page-locked) host memory, as CUDA offers it: `t.pin_memory()`, `t.is_pinned()`,
`DataLoader(..., pin_memory=True)`.

Once mtia_sim is PyTorch's accelerator, pinning a CPU tensor asks the PrivateUse1 hooks for a
pinned-memory allocator, which only C++ can provide (a pure-Python backend's hooks answer
"not implemented"), so plain `torch.randn(4).pin_memory()` broke on import. The simulator has
no page tables to lock: a pinned tensor here is a host copy whose storage is *marked* pinned,
which `is_pinned()` reports, as a CUDA build would. The two ops are served at PyTorch's CPU
key (what CUDA's build does in C++ with its host allocator).

Still PyTorch's: factories with `pin_memory=True` (`torch.empty(n, pin_memory=True)`) go
straight to the C++ allocator lookup and raise; use `.pin_memory()` on the result instead.
"""

from __future__ import annotations

import torch

from ..._compat import DEVICE_NAME

_MARK = "_mtia_sim_pinned"  # on a host storage: this memory is pinned
_LIBRARIES: list[torch.library.Library] = []


def _check_device(device) -> None:
    if device is not None and torch.device(device).type not in (DEVICE_NAME, "cpu"):
        raise RuntimeError(
            f"pin_memory(device={device!r}): this process pins host memory for {DEVICE_NAME} "
            f"only; pass device='{DEVICE_NAME}' or no device"
        )


def pin_memory(tensor: torch.Tensor, device=None) -> torch.Tensor:
    """aten::_pin_memory on the CPU: a copy with the same sizes and strides, marked pinned."""
    _check_device(device)
    pinned = torch.empty_strided(tensor.size(), tensor.stride(), dtype=tensor.dtype)
    pinned.copy_(tensor)
    setattr(pinned.untyped_storage(), _MARK, True)
    return pinned


def is_pinned(tensor: torch.Tensor, device=None) -> bool:
    """aten::is_pinned on the CPU: was this memory made by pin_memory?"""
    _check_device(device)
    return bool(getattr(tensor.untyped_storage(), _MARK, False))


def register() -> None:
    """Serve the two ops at the CPU key (idempotent)."""
    if _LIBRARIES:
        return
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("_pin_memory", pin_memory, "CPU")
    lib.impl("is_pinned", is_pinned, "CPU")
    _LIBRARIES.append(lib)
