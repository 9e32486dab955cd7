"""Device tensors sent to another process (torch.multiprocessing queues, DataLoader workers).

PyTorch pickles a tensor for another process with `ForkingPickler`, which shares a CPU storage's
memory and hands a CUDA storage over as an IPC handle. A device tensor here has no reducer of
its own there, so pickle used its `__reduce_ex__` (serialization.py), whose storage is host
memory: PyTorch shared that as a plain CPU storage, and the other process got a CPU tensor.

Simulated device memory cannot be mapped into another process as CUDA's can, so the tensor is
sent as a copy: its storage's bytes (shared through PyTorch's own CPU reducer) plus its size,
stride and offset, rebuilt in the receiver on the same device index. Unlike CUDA, writes on one
side are not seen by the other (README, Known limits). As CUDA, the receiver cannot send the
tensor on (it must clone it first): a habit that works here would fail on the chip.
"""

from __future__ import annotations

from multiprocessing.reduction import ForkingPickler

import torch

from ..._compat import DEVICE_NAME
from .tensor import RESHARE_MESSAGE, MTIATensor, storage_of


def rebuild_from_process(host: torch.Tensor, index: int, size, stride, offset: int,
                         requires_grad: bool) -> torch.Tensor:
    """The receiver's side: the sender's storage, on mtia_sim:`index`, viewed as it was."""
    memory = host.to(torch.device(DEVICE_NAME, index))
    storage_of(memory).received_from_process = True
    tensor = memory.as_strided(size, stride, offset).detach()
    return tensor.requires_grad_(requires_grad)


def reduce_for_process(tensor: MTIATensor):
    """The sender's side: a host copy of the whole storage (PyTorch shares it with the
    receiver), and where the tensor sits in it. A tensor this process received is refused, in
    CUDA's words."""
    if storage_of(tensor).received_from_process:
        raise RuntimeError(RESHARE_MESSAGE)
    inner = tensor._inner
    storage = inner.untyped_storage()
    host = torch.empty(storage.nbytes() // inner.element_size(), dtype=inner.dtype)
    host.untyped_storage().copy_(storage)
    return (rebuild_from_process, (host, tensor.device.index, tuple(tensor.size()),
                                   tensor.stride(), tensor.storage_offset(),
                                   tensor.requires_grad))


def register() -> None:
    """Teach ForkingPickler the device's tensors (idempotent: it keeps one reducer a type)."""
    ForkingPickler.register(MTIATensor, reduce_for_process)
