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

import warnings

import torch

from ..._compat import below_autograd
from .registry import register_kernel, run_on_device

_LIBRARIES: list[torch.library.Library] = []


def _set_with_geometry(self, source, storage_offset, size, stride=()):
    self.set_(source)
    if not stride:  # contiguous strides for `size`
        stride = torch.empty(size, device="meta").stride()
    return self.as_strided_(size, stride, storage_offset)


def _matmul_out(self, other, *, out):
    """matmul(out=) above its decomposition. PyTorch's composite computes into a reshaped view
    of `out` and then skips copying it onto `out` when `is_alias_of` says they share memory;
    device views do not share one C++ storage, so the copy would run between two differently
    shaped views of the same elements, which copy_ refuses as on the CPU. Compute, then fill
    `out` once, as the composite means to."""
    if torch.is_grad_enabled() and (self.requires_grad or other.requires_grad):
        raise RuntimeError(
            "matmul(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad."
        )
    with below_autograd():
        result = torch.matmul(self, other)
    if out.device != result.device:  # a host `out` for device inputs: refused as on CUDA
        raise RuntimeError(
            f"aten::matmul.out: expected 'out' to be on {result.device}, but got a tensor on "
            f"{out.device}. Pass a tensor made on the device, or omit out=."
        )
    if out.dtype != result.dtype:
        raise RuntimeError(
            f"Expected out tensor to have dtype {result.dtype}, but got {out.dtype} instead"
        )
    if out.shape != result.shape:  # at::native::resize_output
        if out.numel():
            warnings.warn(
                f"An output with one or more elements was resized since it had shape "
                f"{list(out.shape)}, which does not match the required output shape "
                f"{list(result.shape)}. This behavior is deprecated, and in a future PyTorch "
                "release outputs will not be resized unless they have zero elements. You can "
                "explicitly reuse an out tensor t by resizing it, inplace, to zero elements with "
                "t.resize_(0).", UserWarning, stacklevel=2)
        out.resize_(result.shape)
    return out.copy_(result)


def register() -> None:
    aten = torch.ops.aten
    for op in (aten.set_.source_Tensor, aten.set_.source_Tensor_storage_offset, aten.set_.default):
        register_kernel(op)(run_on_device)
    if not _LIBRARIES:
        lib = torch.library.Library("aten", "IMPL")
        lib.impl("set_.source_Tensor_storage_offset", _set_with_geometry, "AutogradPrivateUse1")
        lib.impl("matmul.out", _matmul_out, "AutogradPrivateUse1")
        _LIBRARIES.append(lib)
