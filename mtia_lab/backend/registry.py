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

KernelFn = Callable[..., object]


@dataclass(frozen=True)
class Kernel:
    fn: KernelFn  # fn(func, args, kwargs, device) -> CPU-level result
    kind: str  # "native", "view", or "query" (metadata only, no tensor result: not traced)
    cross_device: bool = False  # copies may mix devices; every other op may not


KERNELS: dict[torch._ops.OpOverload, Kernel] = {}


def resolve_overloads(op: str | torch._ops.OpOverload | torch._ops.OpOverloadPacket):
    """'aten::add.Tensor' -> [aten.add.Tensor]; 'aten::add' or aten.add -> every overload."""
    if isinstance(op, torch._ops.OpOverload):
        return [op]
    if isinstance(op, str):
        namespace, _, rest = op.partition("::")
        packet_name, _, overload = rest.partition(".")
        packet = getattr(getattr(torch.ops, namespace), packet_name)
        if overload:
            return [getattr(packet, overload)]
        op = packet
    return [getattr(op, name) for name in op.overloads()]


def register_kernel(op, *, kind: str = "native", cross_device: bool = False):
    """Decorator: make `fn` the device kernel of `op` (one overload, or all of a packet)."""

    def decorate(fn: KernelFn) -> KernelFn:
        for overload in resolve_overloads(op):
            KERNELS[overload] = Kernel(fn, kind, cross_device)
        return fn

    return decorate


def unregister_kernel(op) -> None:
    for overload in resolve_overloads(op):
        KERNELS.pop(overload, None)


def run_on_device(func, args, kwargs, device):
    """The generic native kernel: the aten op, computed on the device's memory."""
    return func(*args, **kwargs)


def kernel_for(func: torch._ops.OpOverload) -> Kernel | None:
    return KERNELS.get(func)


def native_ops() -> list[str]:
    return sorted(str(op) for op, kernel in KERNELS.items() if kernel.kind == "native")
