"""`torch.save` / `torch.load` of device tensors, the way PyTorch does it for CUDA.

torch.save writes each *storage* once (keyed by the storage, so views of one tensor share it)
together with a location tag such as "cuda:0"; each tensor is pickled as a rebuild call that
names its storage plus size, stride and offset. torch.load reads a storage's bytes into host
memory, asks the registered *deserializers* to move them to the tag's location (after
`map_location` rewrote it), and calls the rebuild functions.

A device tensor's storage here is the host storage of its inner tensor: the device's memory.
So saving needs no copy and no NumPy round trip, and the file is the one CUDA would write.
Four small pieces plug the device into the scheme:

- `reduce_device_tensor` (MTIATensor.__reduce_ex__): `_rebuild_tensor_v2` over the inner
  storage, marked with the device it belongs to, plus the tensor's own size/stride/offset;
- a *tagger* that reads that mark, so the file says "mtia_sim:N";
- a *deserializer* for "mtia_sim[:N]" locations (saved there, or sent there by map_location):
  the loaded host bytes become the memory of one new device allocation, with a clear error for
  a device that does not exist;
- a `set_(storage)` kernel, the step of PyTorch's rebuild that binds a tensor to its storage.

One allocation per saved storage means that views saved together come back sharing memory, and
memory statistics count each storage once. Tensors saved on the CPU load onto the device through
the same path (`map_location="mtia_sim"`).
"""

from __future__ import annotations

import collections
import re
import weakref

import torch

from ... import _compat
from ..._compat import DEVICE_NAME
from ..runtime.device_state import RUNTIME
from . import quantized
from .registry import register_kernel
from .tensor import DeviceStorage, MTIATensor, _rebuild_on_device

PRIORITY = 9  # before PyTorch's CPU tagger (10) and its generic privateuse1 deserializer (23)
_DEVICE_MARK = "_mtia_sim_device"  # on a host storage: the device whose memory it is
_LOCATION = re.compile(rf"^{DEVICE_NAME}(?::(\d+))?$")
_registered = False


# -- saving --------------------------------------------------------------------------------------
def reduce_device_tensor(tensor: MTIATensor):
    """What pickle stores for a device tensor: PyTorch's own rebuild call over its storage.

    The file is the one CUDA would write (`_rebuild_tensor_v2` over a storage tagged
    "mtia_sim:N"), so plain PyTorch loads it with map_location="cpu", even with weights_only."""
    untyped = tensor._inner.untyped_storage()
    # Every view of a storage returns this same Python object, so the tagger sees the mark
    # whichever view torch.save reaches first, and writes the bytes once for all of them.
    setattr(untyped, _DEVICE_MARK, tensor.device)
    if isinstance(tensor, torch.nn.Parameter):  # a parameter of a module on the device
        hooks = collections.OrderedDict()
        return (_compat.rebuild_parameter, (tensor.detach(), tensor.requires_grad, hooks))
    typed = torch.storage.TypedStorage(wrap_storage=untyped, dtype=tensor.dtype, _internal=True)
    if tensor.is_quantized:  # its quantizer too, as for a CUDA one
        return quantized.reduce(tensor, typed)
    args = (typed, tensor.storage_offset(), tuple(tensor.size()), tensor.stride(),
            tensor.requires_grad, collections.OrderedDict())
    # The lazy conj / neg bits, as torch.save writes them for CPU and CUDA tensors: without
    # them `x.conj()` would load un-conjugated.
    metadata = _compat.tensor_metadata(tensor)
    return (_compat.rebuild_tensor, args + (metadata,) if metadata else args)


def _tag(storage) -> str | None:
    device = getattr(storage, _DEVICE_MARK, None)
    return str(device) if device is not None else None


# -- loading -------------------------------------------------------------------------------------
class _BytesInFlight(torch.UntypedStorage):
    """Host bytes on their way to a device, for the legacy format (and plain pickle), which
    reads a storage's bytes into the object the deserializer returned, after it returned."""

    @property
    def device(self) -> torch.device:
        return self._mtia_device


def _restore(storage, location: str):
    """Deserializer: bytes tagged (or mapped) to mtia_sim[:N] become one device allocation.

    It returns a storage that reports mtia_sim:N, so torch.load's ordinary rebuild makes an
    empty device tensor and calls `set_(storage, offset, size, stride)` on it: the device's
    set_ kernel below binds the tensor to the allocation."""
    match = _LOCATION.match(location)
    if match is None:
        return None
    index = int(match.group(1)) if match.group(1) is not None else RUNTIME.current_index
    count = len(RUNTIME.devices)
    if index >= count:
        raise RuntimeError(
            f"torch.load: the file puts a storage on {location}, but this process has {count} "
            f"{DEVICE_NAME} device(s). Pass map_location, e.g. map_location='{DEVICE_NAME}:0' "
            f"or {{'{location}': '{DEVICE_NAME}:0'}} (or 'cpu'), or ask for more devices with "
            "mtia_lab.configure(device_count=N)."
        )
    device = torch.device(DEVICE_NAME, index)
    if getattr(storage, "_torch_load_uninitialized", False):
        in_flight = _BytesInFlight(storage.nbytes())
        in_flight._mtia_device = device
        return in_flight
    if storage.device.type != "cpu":  # a callable map_location moved it already
        storage = storage.cpu()
    on_device = _compat.storage_alias(storage, device)
    on_device._mtia_host = storage
    on_device._mtia_memory = DeviceStorage(
        index, storage.nbytes(), storage.data_ptr(), "torch.load"
    )
    return on_device


def _device_memory(source, index: int):
    """(host bytes, DeviceStorage) of a storage that `_restore` put on mtia_sim:`index`."""
    host = _host_of(source)
    if host is None:
        if not isinstance(source, _BytesInFlight):
            raise NotImplementedError(
                f"Tensor.set_(storage) on {DEVICE_NAME} accepts only the storages torch.load "
                f"puts on the device. To fill a device tensor from a storage, build the tensor on "
                f"the host (`torch.empty(0).set_(storage, ...)`) and move it with "
                f"`.to('{DEVICE_NAME}')`."
            )
        # Its bytes arrive after the rebuild, so tensors must use them in place; but the object
        # says "mtia_sim", so tensors get a plain host view of them, which keeps it alive.
        host = _compat.storage_alias(source, torch.device("cpu"))
        host._mtia_keep = source
        source._mtia_host = weakref.ref(host)  # weak: no cycle, the tensors own `host`
        source._mtia_memory = DeviceStorage(index, host.nbytes(), host.data_ptr(), "torch.load")
    memory = source._mtia_memory
    if memory.device_index != index:
        raise RuntimeError(
            f"set_: the storage is on {DEVICE_NAME}:{memory.device_index}, the tensor on "
            f"{DEVICE_NAME}:{index}"
        )
    return host, memory


def _host_of(source):
    host = getattr(source, "_mtia_host", None)
    return host() if isinstance(host, weakref.ref) else host


def _set_storage(func, args, kwargs, device):
    """set_(storage, ...) on device memory: bind the tensor to the storage's allocation.
    The dispatcher then sees a new storage under the tensor and rewraps it (dispatch.py)."""
    host, _memory = _device_memory(args[1], device.index)
    return func(args[0], host, *args[2:], **kwargs)


def _reduce_ex(tensor: MTIATensor, protocol: int):
    """`MTIATensor.__reduce_ex__`: pickle a device tensor as `reduce_device_tensor` says."""
    return reduce_device_tensor(tensor)


def register() -> None:
    """Plug the tagger, the deserializer and the set_ kernel into PyTorch. Idempotent."""
    global _registered
    if _registered:
        return
    torch.serialization.register_package(PRIORITY, _tag, _restore)
    # torch.save writes the device storage once for all its views (tensor.py defines no
    # __reduce_ex__ of its own, so that it does not import this module).
    MTIATensor.__reduce_ex__ = _reduce_ex
    # Files written before this module pickled `.cpu()` copies and named this rebuild.
    torch.serialization.add_safe_globals([_rebuild_on_device])
    aten = torch.ops.aten
    for op in (aten.set_.source_Storage_storage_offset, aten.set_.source_Storage):
        register_kernel(op)(_set_storage)
    _registered = True
