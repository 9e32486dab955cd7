"""Out of memory, as CUDA reports it: `torch.OutOfMemoryError` with the device's summary.

A device tensor's bytes live in host memory (tensor.py), and the simulated allocator is charged
when a result is wrapped onto the device. Without the checks below, an allocation larger than
the simulated device but also larger than the host (`torch.empty(1 << 42, device="mtia_sim")`)
fails in the host allocator first, with a CPU RuntimeError, and a large one the host can back
would be written in host memory before the device refuses it. So:

- factories (registration.py) and ops whose result size is in their arguments (`new_empty`,
  `new_zeros`, `repeat`, `clone` and the `*_like` factories: `RESULT_BYTES`) check the
  simulated capacity *before* any host memory is allocated (`check_fits`);
- any other op (and a compiled kernel, compiler/runner.py) learns its result size only by
  computing it on the host: a host allocation that fails there becomes the device's
  OutOfMemoryError (`device_error`). Departure from CUDA, on
  purpose: such an op (e.g. `torch.kron`) may use host memory for a result that the device then
  refuses; it raises the same OutOfMemoryError and leaves its inputs intact.
"""

from __future__ import annotations

import math
import re

import torch

from .allocator import round_size
from .device_state import RUNTIME

_HOST_FAILURE = re.compile(r"can't allocate memory: you tried to allocate (\d+) bytes")
# Below this, checking first is not worth its cost on every clone: host memory that small is
# cheap to touch, and the allocator raises the same OutOfMemoryError when the result is wrapped.
CHECK_FROM_BYTES = 1 << 20


def check_fits(device_index: int, nbytes: int, op: str) -> None:
    """Raise the allocator's own OutOfMemoryError now if `nbytes` cannot fit on the device.

    A request larger than capacity minus the bytes tensors hold fits neither a cached free block
    nor a new segment, so `malloc` is asked only then: it raises with the device summary and
    counts the OOM in memory_stats, exactly as for any other failed allocation."""
    if nbytes < CHECK_FROM_BYTES:
        return
    allocator = RUNTIME.device(device_index).allocator
    if round_size(nbytes) <= allocator.capacity - allocator.allocated_bytes:
        return
    block = allocator.malloc(nbytes, op)  # raises torch.OutOfMemoryError
    allocator.free(block)  # not reached while the reasoning above holds


def on_host(device_index: int, nbytes: int, op: str, make, *args, **kwargs):
    """`make(*args, **kwargs)`, the host buffer of a device result of `nbytes`: the capacity is
    checked first, and a host allocation failure is reported as the device's OOM."""
    check_fits(device_index, nbytes, op)
    try:
        return make(*args, **kwargs)
    except RuntimeError as error:
        raise device_error(error, device_index, op)  # noqa: B904


def device_error(error: RuntimeError, device_index: int, op: str) -> RuntimeError:
    """The error to raise for `error`, raised while computing a device op on the host: a host
    allocation failure becomes the device's OutOfMemoryError; anything else is `error`."""
    if isinstance(error, torch.OutOfMemoryError):
        return error
    found = _HOST_FAILURE.search(str(error))
    if found is None:
        return error
    nbytes = int(found.group(1))
    try:
        check_fits(device_index, nbytes, op)
    except torch.OutOfMemoryError as oom:
        return oom
    # The simulated device would have room (its capacity was configured above the host's RAM).
    return torch.OutOfMemoryError(
        f"mtia_sim:{device_index} out of memory: {op} needs {nbytes} bytes, which the simulated "
        "device has room for but the host cannot back (the simulator keeps device bytes in host "
        "memory). Lower mtia_lab.configure(memory_capacity=...) to what this machine has, or "
        "use smaller tensors."
    )


def _dtype_size(args, kwargs, default: torch.Tensor) -> int:
    dtype = kwargs.get("dtype")
    return (dtype or default.dtype).itemsize


def _new_factory(args, kwargs) -> int:
    """new_empty / new_zeros / new_ones / new_full(self, size, ...)."""
    size = args[1] if len(args) > 1 else kwargs["size"]
    return math.prod(size) * _dtype_size(args, kwargs, args[0])


def _new_empty_strided(args, kwargs) -> int:
    size, stride = args[1], args[2]
    return strided_bytes(size, stride, _dtype_size(args, kwargs, args[0]))


def _like(args, kwargs) -> int:
    """empty_like / zeros_like / ... / clone: the input's elements, in the result's dtype."""
    return args[0].numel() * _dtype_size(args, kwargs, args[0])


def _repeat(args, kwargs) -> int:
    self, repeats = args[0], args[1] if len(args) > 1 else kwargs["repeats"]
    return self.numel() * math.prod(repeats) * self.element_size()


def strided_bytes(size, stride, itemsize: int) -> int:
    """The storage bytes a tensor of `size` and `stride` needs (0 when it has no element)."""
    if any(s == 0 for s in size):
        return 0
    return (sum((s - 1) * st for s, st in zip(size, stride, strict=True)) + 1) * itemsize


_aten = torch.ops.aten
RESULT_BYTES = {
    _aten.new_empty.default: _new_factory,
    _aten.new_zeros.default: _new_factory,
    _aten.new_ones.default: _new_factory,
    _aten.new_full.default: _new_factory,
    _aten.new_empty_strided.default: _new_empty_strided,
    _aten.repeat.default: _repeat,
    # results as large as an input, which may be a view far smaller in memory (x.expand(...))
    _aten.clone.default: _like,
    _aten.empty_like.default: _like,
    _aten.zeros_like.default: _like,
    _aten.ones_like.default: _like,
    _aten.full_like.default: _like,
    _aten.rand_like.default: _like,
    _aten.randn_like.default: _like,
}


def check_result(func, args: tuple, kwargs: dict) -> tuple:
    """Before an op of RESULT_BYTES runs: refuse a result the device cannot hold. Returns args."""
    kwargs = kwargs or {}
    nbytes = RESULT_BYTES[func](args, kwargs)
    if nbytes < CHECK_FROM_BYTES:
        return args
    requested = kwargs.get("device")
    device = args[0].device if requested is None else torch.device(requested)
    if device.type != args[0].device.type:  # `new_empty(n, device="cpu")`: not the device's
        return args
    check_fits(device.index or 0, nbytes, func.name())
    return args
