"""Ops that rebind a device tensor to other memory instead of computing: `set_`.

`v.set_(other)` makes `v` a view of `other`'s memory: later writes to either show in both, and
`v`'s old allocation is freed when nothing else uses it. Through the CPU fallback it would
instead copy `other`'s values into host copies and back into `v`'s old memory: the values
right once, the aliasing lost. So the device runs it itself, on the inner tensors (the device's
memory), and the dispatcher rewraps `v` over `other`'s DeviceStorage (dispatch._sync_metadata).
The storage overloads (`set_(storage, ...)`, torch.load's rebuild) are serialization.py's.
"""

from __future__ import annotations

import torch

from .registry import register_kernel, run_on_device


def register() -> None:
    aten = torch.ops.aten
    for op in (aten.set_.source_Tensor, aten.set_.source_Tensor_storage_offset, aten.set_.default):
        register_kernel(op)(run_on_device)
