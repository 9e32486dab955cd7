"""Storage methods for the device, as PyTorch generates them for a PrivateUse1 backend.

`generate_methods_for_privateuse1_backend(for_storage=True)` gives every storage
`is_mtia_sim` and `.mtia_sim(device=None, non_blocking=False)`, like `is_cuda` / `.cuda()`.
The generated `.mtia_sim()` allocates with `torch.UntypedStorage(n, device="mtia_sim")`, which a
Python backend cannot serve (the device's bytes live behind wrapper tensors, not in a C++
allocator), so it is replaced by one that builds the storage the way torch.load does for this
device (serialization.py): host bytes that report `mtia_sim:N` and hold one device allocation.
`torch.empty(0, device="mtia_sim").set_(storage)` binds a tensor to it.

A device tensor's storage resizes its memory itself (tensor.DeviceUntypedStorage.resize_). Any
other storage that reports the device (a fake tensor's, one built by torch.load) reaches
PrivateUse1's C++ hook `resizePrivateUse1Bytes` through `UntypedStorage.resize_`, which a
Python backend cannot register (the Python hook class has no such method). torch.compile
calls it on the fake copy of every empty input (`meta_utils`: a 0-byte storage is resized to 0
bytes), so such a storage resized to the size it has is left as it is, as any backend's resize
does; another size fails with an error that says what to do instead.
"""

from __future__ import annotations

import torch

from ... import _compat
from ..._compat import DEVICE_NAME
from ..runtime.device_state import RUNTIME
from .tensor import DeviceStorage


def _index(device) -> int:
    if device is None:
        return RUNTIME.current_index
    if isinstance(device, int):
        index = device
    else:
        device = torch.device(device)
        if device.type != DEVICE_NAME:
            raise ValueError(f"storage.{DEVICE_NAME}(device): expected a {DEVICE_NAME} device, "
                             f"got {device}")
        index = device.index if device.index is not None else RUNTIME.current_index
    return RUNTIME.device(index).index  # a clear error for an index that does not exist


def to_device(self, device=None, non_blocking: bool = False):
    """A copy of this storage in the device's memory (`self` when it is there already)."""
    index = _index(device)
    if self.device.type == DEVICE_NAME and self.get_device() == index:
        return self
    if isinstance(self, torch.TypedStorage):
        untyped = to_device(self._untyped_storage, index, non_blocking)
        return torch.TypedStorage(wrap_storage=untyped, dtype=self.dtype, _internal=True)
    host = self.cpu().clone() if self.device.type == DEVICE_NAME else self.clone()
    on_device = _compat.storage_alias(host, torch.device(DEVICE_NAME, index))
    on_device._mtia_host = host
    on_device._mtia_memory = DeviceStorage(index, host.nbytes(), host.data_ptr(), "storage.to")
    return on_device


_UNTYPED_RESIZE = torch.UntypedStorage.resize_


def resize_(self, size: int):
    """`storage.resize_(size)` of a storage that reports the device but is no device tensor's:
    a no-op when the size is its own."""
    if self.device.type != DEVICE_NAME:
        return _UNTYPED_RESIZE(self, size)
    if size == self.nbytes():
        return self
    raise NotImplementedError(
        f"resizing this {DEVICE_NAME} storage (a fake tensor's, or one no device tensor owns) "
        f"from {self.nbytes()} to {size} bytes is not supported: a Python backend cannot "
        f"register PrivateUse1's resizePrivateUse1Bytes. Resize a device tensor's own storage "
        f"or the tensor (tensor.resize_) instead")


def register() -> None:
    """Generate the storage methods (once) and install the device copy. Idempotent."""
    _compat.generate_storage_methods(DEVICE_NAME)
    _compat.set_storage_method(DEVICE_NAME, to_device)
    torch.TypedStorage.mtia_sim = to_device
    torch.UntypedStorage.resize_ = resize_
