"""Pinned (page-locked) host memory, as CUDA offers it: `t.pin_memory()`, `t.is_pinned()`,
`DataLoader(..., pin_memory=True)`.

Once mtia_sim is PyTorch's accelerator, pinning a CPU tensor asks the PrivateUse1 hooks for a
pinned-memory allocator, which only C++ can provide (a pure-Python backend's hooks answer
"not implemented"), so plain `torch.randn(4).pin_memory()` broke on import. The simulator has
no page tables to lock: a pinned tensor here is a host copy whose storage is *marked* pinned,
which `is_pinned()` reports, as a CUDA build would. The two ops are served at PyTorch's CPU
key (what CUDA's build does in C++ with its host allocator).

Still PyTorch's: factories with `pin_memory=True` (`torch.empty(n, pin_memory=True)`) go
straight to the C++ allocator lookup and raise; use `.pin_memory()` on the result instead
(Inductor's own pinned buffers are made so: inductor/_compat.pinned_host_buffers).
"""

from __future__ import annotations

import weakref

import torch

from ..._compat import DEVICE_NAME

_MARK = "_mtia_sim_pinned"  # on a host storage: this memory is pinned
_LIBRARIES: list[torch.library.Library] = []
# The pinned blocks, by address: start -> (end, the storage while it lives). A storage slice
# (`pinned.untyped_storage()[2:]`) is a new storage object inside a pinned block.
_BLOCKS: dict[int, tuple[int, weakref.ref]] = {}


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
    storage = pinned.untyped_storage()
    setattr(storage, _MARK, True)
    start = storage.data_ptr()
    if storage.nbytes():
        _BLOCKS[start] = (start + storage.nbytes(), weakref.ref(storage))
    return pinned


def is_pinned(tensor: torch.Tensor, device=None) -> bool:
    """aten::is_pinned on the CPU: is this memory inside a block made by pin_memory? (CUDA's
    question is about the address too: a view or storage slice of pinned memory is pinned.)"""
    _check_device(device)
    storage = tensor.untyped_storage()
    if getattr(storage, _MARK, False):
        return True
    return _in_pinned_block(storage.data_ptr()) if storage.nbytes() else False


def _in_pinned_block(address: int) -> bool:
    for start, (end, alive) in list(_BLOCKS.items()):
        if alive() is None:  # freed: its addresses may be reused by plain memory
            del _BLOCKS[start]
        elif start <= address < end:
            return True
    return False


def register() -> None:
    """Serve the two ops at the CPU key (idempotent)."""
    if _LIBRARIES:
        return
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("_pin_memory", pin_memory, "CPU")
    lib.impl("is_pinned", is_pinned, "CPU")
    _LIBRARIES.append(lib)
