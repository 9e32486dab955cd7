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

from ..._compat import math_bit_keys_enabled
from ..runtime.device_state import DeviceState
from .quantized import host_view
from .schema import OpSchemaFacts
from .sparse import refuse_layout
from .tensor import _LIVE_STORAGES

_STORED_LAYOUTS = (torch.strided, torch.sparse_coo)  # what a device tensor can be (sparse.py)

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
    except NotImplementedError:  # a sparse COO tensor: the kernel reads its device memory
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
            if value.is_quantized:  # the host copy needs the quantizer too (quantized.py)
                return host_view(value, host)
            copy = torch.empty(0, dtype=value.dtype).set_(
                host, value.storage_offset(), value.size(), value.stride()
            )
            # The lazy conjugate / negative bits are metadata too (`x.conj()` on complex data):
            # without them the host kernel would read the bytes un-conjugated.
            if value.is_conj():
                copy = copy.conj()
            if value.is_neg():
                copy = copy._neg_view()
            return copy
        if isinstance(value, (list, tuple)):
            return type(value)(to_host(v) for v in value)
        return value

    host_args = tuple(to_host(a) for a in inner_args)
    host_kwargs = {k: to_host(v) for k, v in inner_kwargs.items()}
    with math_bit_keys_enabled():  # host composites (pinv, lstsq) make conjugate views
        out = func(*host_args, **host_kwargs)
    _check_layouts(out, op_facts.name)
    for where in op_facts.mutated:
        written = op_facts.arg(inner_args, inner_kwargs, where)
        host = op_facts.arg(host_args, host_kwargs, where)
        if isinstance(written, torch.Tensor):
            _copy_back(written, host)
        elif isinstance(written, (list, tuple)):  # `Tensor(a!)[] out`, e.g. unbind_copy.int_out
            for device_tensor, host_tensor in zip(written, host, strict=True):
                _copy_back(device_tensor, host_tensor)
    return out


def _copy_back(written: torch.Tensor, host: torch.Tensor) -> None:
    """What the host kernel wrote goes back to the device tensor it was copied from."""
    if written is host:  # a CPU tensor riding along: the kernel wrote it directly
        return
    if host.shape != written.shape:
        written.resize_(host.shape)  # out= resized on the host; the wrapper follows
    written.copy_(host)


def _check_layouts(out, name: str) -> None:
    """The device stores strided tensors (quantized ones too) and sparse COO ones: refuse the
    other layouts, rather than fail deep in the wrapper."""
    results = out if isinstance(out, (list, tuple)) else (out,)
    for result in results:
        if isinstance(result, torch.Tensor) and result.layout not in _STORED_LAYOUTS:
            raise refuse_layout(result.layout, name)
