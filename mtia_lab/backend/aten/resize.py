"""`resize_` and `resize_as_` on the device, honouring `memory_format` as CUDA does.

Through the CPU fallback they lost it: the fallback resizes a host copy, then resizes the device
tensor to the copy's shape only (contiguous strides). Run natively, the device's memory (the inner
tensor) is resized in place with its memory format, and the dispatcher makes the wrapper follow
the inner tensor's new sizes, strides and storage (dispatch._sync_metadata).
"""

from __future__ import annotations

from .registry import register_kernel, run_on_device

OPS = ("aten::resize_.default", "aten::resize_as_.default")


def register() -> None:
    for op in OPS:
        register_kernel(op)(run_on_device)
