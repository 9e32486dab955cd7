"""The CPU fallback: how the device runs an op it has no kernel for.

Like PyTorch's `at::native::cpu_fallback`, the op runs on the host: the device storages of its
inputs are copied to host memory, the CPU kernel computes, and what the op wrote is copied back.
Copying whole storages (not tensor by tensor) keeps every stride, storage offset and alias between
arguments exactly as it was on the device, so `op(x, x.t())` or an in-place op on a view sees the
same memory layout on the host. A failing CPU kernel only ever touched the host copies, so it
leaves the device tensors as they were.

Each fallback is counted with its reason; `fallback_counts()` shows them.
"""

from __future__ import annotations

from collections import Counter

import torch

from .runtime import DeviceState
from .schema import OpSchemaFacts
from .tensor import _LIVE_STORAGES

_COUNTS: Counter[str] = Counter()


def reason_for(name: str) -> str:
    return f"no native kernel for {name} on mtia_sim"


def fallback_counts() -> dict[str, int]:
    return dict(_COUNTS)


def reset_fallback_counts() -> None:
    _COUNTS.clear()


def _host_ptr(value: torch.Tensor) -> int | None:
    """Where a tensor's bytes are; None for a FakeTensor (torch.compile tracing has no bytes)."""
    try:
        return value.untyped_storage().data_ptr()
    except RuntimeError:
        return None


def run(func, op_facts: OpSchemaFacts, inner_args, inner_kwargs, device: DeviceState):
    _COUNTS[op_facts.name] += 1
    host_of: dict[int, torch.UntypedStorage] = {}  # device storage pointer -> host copy

    def to_host(value):
        if isinstance(value, torch.Tensor) and _host_ptr(value) in _LIVE_STORAGES:
            storage = value.untyped_storage()
            host = host_of.get(storage.data_ptr())
            if host is None:
                host = host_of[storage.data_ptr()] = storage.clone()
            return torch.empty(0, dtype=value.dtype).set_(
                host, value.storage_offset(), value.size(), value.stride()
            )
        if isinstance(value, (list, tuple)):
            return type(value)(to_host(v) for v in value)
        return value

    host_args = tuple(to_host(a) for a in inner_args)
    host_kwargs = {k: to_host(v) for k, v in inner_kwargs.items()}
    out = func(*host_args, **host_kwargs)
    for where in op_facts.mutated:
        written = op_facts.arg(inner_args, inner_kwargs, where)
        host = op_facts.arg(host_args, host_kwargs, where)
        if isinstance(written, torch.Tensor) and written is not host:
            if host.shape != written.shape:
                written.resize_(host.shape)  # out= resized on the host; the wrapper follows
            written.copy_(host)
    return out
