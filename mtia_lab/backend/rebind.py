"""Ops that rebind a device tensor to other memory instead of computing: `set_`.

`v.set_(other)` makes `v` a view of `other`'s memory: later writes to either show in both, and
`v`'s old allocation is freed when nothing else uses it. Through the CPU fallback it would
instead copy `other`'s values into host copies and back into `v`'s old memory: the values
right once, the aliasing lost. So the device runs it itself, on the inner tensors (the device's
memory), and the dispatcher rewraps `v` over `other`'s DeviceStorage (dispatch._sync_metadata).
The storage overloads (`set_(storage, ...)`, torch.load's rebuild) are serialization.py's.

`v.set_(other, offset, size, stride)` is decomposed by PyTorch (above the device) into
`set_(other.untyped_storage(), ...)`, and a device tensor's own storage object holds no memory a
Python backend can reach. So that overload is served above the decomposition, at the device's
autograd key: rebind to `other`, then take the asked-for geometry (`as_strided_`), which is
what the overload means.
"""

from __future__ import annotations

import torch

from .registry import register_kernel, run_on_device

_LIBRARIES: list[torch.library.Library] = []


def _set_with_geometry(self, source, storage_offset, size, stride=()):
    self.set_(source)
    if not stride:  # contiguous strides for `size`
        stride = torch.empty(size, device="meta").stride()
    return self.as_strided_(size, stride, storage_offset)


def register() -> None:
    aten = torch.ops.aten
    for op in (aten.set_.source_Tensor, aten.set_.source_Tensor_storage_offset, aten.set_.default):
        register_kernel(op)(run_on_device)
    if not _LIBRARIES:
        lib = torch.library.Library("aten", "IMPL")
        lib.impl("set_.source_Tensor_storage_offset", _set_with_geometry, "AutogradPrivateUse1")
        _LIBRARIES.append(lib)
