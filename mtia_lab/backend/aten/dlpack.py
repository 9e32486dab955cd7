"""DLPack and the device: refused with a clear error, not a broken tensor.

On CUDA, `torch.from_dlpack(x)` / `to_dlpack(x)` share the tensor's memory with another library
through a C struct (device type, data pointer, sizes, strides). A tensor on mtia_sim is a Python
wrapper whose bytes live in an inner host tensor; its own storage has no data pointer. So
PyTorch's exporter would describe a null pointer on a "kDLExtDev" device, and importing that
capsule gives a plain tensor on mtia_sim without the wrapper, which no op can serve. Until DLPack
can describe a Python backend's memory, export is refused (BufferError, as the DLPack protocol
asks of a producer that cannot export), naming the way round: go through the host.
"""

from __future__ import annotations

import torch
import torch.utils.dlpack

from ..._compat import DEVICE_NAME
from .tensor import MTIATensor

MESSAGE = (
    "{what}: tensors on {device} cannot be exchanged through DLPack: the simulated device keeps "
    "its bytes in host memory behind a Python wrapper, which a DLPack capsule (device type + "
    "data pointer) cannot describe. Go through the host: `torch.from_dlpack(x.cpu())`, and "
    "`.to('{device}')` on the way back."
)


def _refuse(what: str, tensor: torch.Tensor) -> BufferError:
    return BufferError(MESSAGE.format(what=what, device=tensor.device))


def _dlpack(self, *args, **kwargs):
    raise _refuse("__dlpack__", self)


def _dlpack_device(self):
    raise _refuse("__dlpack_device__", self)


_original_to_dlpack = torch.utils.dlpack.to_dlpack


def to_dlpack(tensor):
    """torch.utils.dlpack.to_dlpack, refusing device tensors (see the module docstring)."""
    if isinstance(tensor, MTIATensor) or (
        isinstance(tensor, torch.Tensor) and tensor.device.type == DEVICE_NAME
    ):
        raise _refuse("to_dlpack", tensor)
    return _original_to_dlpack(tensor)


to_dlpack.__doc__ = (_original_to_dlpack.__doc__ or "") + "\n(mtia_lab: refuses mtia_sim tensors.)"


def register() -> None:
    """Install the refusals. Idempotent."""
    MTIATensor.__dlpack__ = _dlpack
    MTIATensor.__dlpack_device__ = _dlpack_device
    torch.utils.dlpack.to_dlpack = to_dlpack
    torch.to_dlpack = to_dlpack
