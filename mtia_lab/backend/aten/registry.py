"""The one place that maps an aten overload to its device kernel.

A kernel receives the op, its arguments with every device tensor replaced by its inner CPU tensor
(the device's memory), and the device state; it returns CPU-level results that the dispatcher
wraps back onto the device. Most native kernels are the aten op itself run on device memory
(`run_on_device`): that is what "the device computes it" means in a simulator. The kernels that
need more (the device's RNG, copies between devices and the host) are written out in kernels.py.

An op with no entry here goes through the CPU fallback (fallback.py), or raises in strict mode.
Add your own kernel with `@register_kernel("aten::my_op.default")`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..._compat import OpOverload, OpOverloadPacket

KernelFn = Callable[..., object]


@dataclass(frozen=True)
class Kernel:
    fn: KernelFn  # fn(func, args, kwargs, device) -> CPU-level result
    kind: str  # "native", "view", or "query" (metadata only, no tensor result: not traced)
    cross_device: bool = False  # copies may mix devices; every other op may not


KERNELS: dict[OpOverload, Kernel] = {}
# A composite op that reaches the device whole (autograd's keys off: inference mode) runs its
# pieces on the device (dispatch.py). An entry here runs it instead, on the device tensors
# themselves, as the device's own autograd-key kernel does outside inference mode.
WHOLE_OPS: dict[OpOverload, Callable] = {}


def resolve_overloads(op: str | OpOverload | OpOverloadPacket):
    """'aten::add.Tensor' -> [aten.add.Tensor]; 'aten::add' or aten.add -> every overload."""
    if isinstance(op, OpOverload):
        return [op]
    if isinstance(op, str):
        namespace, _, rest = op.partition("::")
        packet_name, _, overload = rest.partition(".")
        if not namespace or not packet_name:
            raise ValueError(
                f"op {op!r}: name an aten operator as 'namespace::name' or "
                f"'namespace::name.overload', e.g. 'aten::{op or 'add'}' or "
                f"'aten::{op or 'add'}.Tensor' (or pass torch.ops.aten.add.Tensor)"
            )
        try:
            packet = getattr(getattr(torch.ops, namespace), packet_name)
            if overload:
                return [getattr(packet, overload)]
        except (AttributeError, RuntimeError) as error:
            raise ValueError(f"op {op!r} does not exist: {error}") from None
        op = packet
    if not isinstance(op, OpOverloadPacket):
        raise TypeError(
            f"op must be a string such as 'aten::add.Tensor', a torch.ops OpOverload or "
            f"OpOverloadPacket, got {op!r} ({type(op).__name__})"
        )
    return [getattr(op, name) for name in op.overloads()]


# How a kernel serves its op; "collective" is mtia_lab.distributed's (bytes move between ranks).
KERNEL_KINDS = ("native", "view", "query", "collective")


def register_kernel(op, *, kind: str = "native", cross_device: bool = False):
    """Decorator: make `fn` the device kernel of `op` (one overload, or all of a packet)."""
    if kind not in KERNEL_KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, KERNEL_KINDS))}, "
                         f"got {kind!r}")
    overloads = resolve_overloads(op)  # a clear error now, not when the decorator is applied

    def decorate(fn: KernelFn) -> KernelFn:
        if not callable(fn):
            raise TypeError(f"register_kernel({op!r}) decorates a function, got {fn!r}")
        for overload in overloads:
            KERNELS[overload] = Kernel(fn, kind, cross_device)
        return fn

    return decorate


def unregister_kernel(op) -> None:
    for overload in resolve_overloads(op):
        KERNELS.pop(overload, None)


def run_on_device(func, args, kwargs, device):
    """The generic native kernel: the aten op, computed on the device's memory."""
    return func(*args, **kwargs)


def ask_inner(func, args, kwargs, device):
    """The generic query kernel: a question about a device tensor's metadata that its inner
    tensor answers (a sparse tensor's `_nnz()`, a quantized one's `q_scale()`), on the host,
    with no data moved. A dense device tensor answers too, so that `x.is_coalesced()` or
    `x.q_scale()` on one raises the CPU's (and CUDA's) error."""
    return func(*[getattr(a, "_inner", a) if isinstance(a, torch.Tensor) else a for a in args],
                **kwargs)


def kernel_for(func: OpOverload) -> Kernel | None:
    return KERNELS.get(func)


def native_ops() -> list[str]:
    return sorted(str(op) for op, kernel in KERNELS.items() if kernel.kind == "native")
