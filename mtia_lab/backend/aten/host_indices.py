"""Host (CPU) index tensors and masks on device tensors, taken as CUDA takes them.

CUDA's advanced indexing (`x[idx]`, `x[mask]`, `x[mask] = 1`, `index_put_`) accepts index
tensors that live on the host (or on another device): ATen's `make_info` copies every index to
the indexed tensor's device (`indice.to(self.device())`) before the kernel runs. Every other op
that takes an index (`index_select`, `gather`, `scatter`, `masked_fill`, `take`, ...) requires
it on the device, on CUDA as here. So only the ops below may get indices from elsewhere.

Eager: the host indices are copied to the device first, as CUDA does (a `_to_copy` the trace
shows, priced on the host link). While torch.compile traces, the host index rides along as a host
tensor (compiled code runs on host tensors anyway), so it only has to pass the device check.
"""

from __future__ import annotations

import torch

from ..._compat import DEVICE_NAME

_aten = torch.ops.aten
INDEX_OPS = frozenset(
    getattr(packet, overload)
    for packet in (_aten.index, _aten.index_put_, _aten.index_put, _aten._index_put_impl_,
                   _aten._unsafe_index, _aten._unsafe_index_put)
    for overload in packet.overloads()
    if overload.startswith(("Tensor", "default", "out", "hacked_twin"))
)


def indices_to_device(func, args: tuple, kwargs: dict) -> tuple:
    """`args` of an indexing op with its index tensors on other devices (the host, or another
    mtia_sim device, as make_info allows) copied to `args[0]`'s device."""
    indices = args[1] if len(args) > 1 else None
    if not isinstance(indices, (list, tuple)) or args[0].device.type != DEVICE_NAME:
        return args
    device = args[0].device
    if all(not isinstance(i, torch.Tensor) or i.device == device for i in indices):
        return args
    moved = [i.to(device) if isinstance(i, torch.Tensor) and i.device != device else i
             for i in indices]
    return (args[0], type(indices)(moved), *args[2:])


def unwrap_traced(args: tuple, unwrap, devices: list) -> tuple:
    """`unwrap` every argument of an indexing op while tracing; its host indices do not count as
    a second device (they stay host tensors in the graph, like every buffer it computes on)."""
    inner = []
    for position, value in enumerate(args):
        if position == 1 and isinstance(value, (list, tuple)):
            seen: list = []
            inner.append(unwrap(value, seen))
            devices.extend(d for d in seen if not (isinstance(d, torch.device) and d.type == "cpu"))
        else:
            inner.append(unwrap(value, devices))
    return tuple(inner)
