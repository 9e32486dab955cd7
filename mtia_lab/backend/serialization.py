"""`torch.save` / `torch.load` of device tensors, the way PyTorch does it for CUDA.

torch.save writes each *storage* once (keyed by the storage, so views of one tensor share it)
together with a location tag such as "cuda:0"; each tensor is pickled as a rebuild call that
names its storage plus size, stride and offset. torch.load reads a storage's bytes into host
memory, asks the registered *deserializers* to move them to the tag's location (after
`map_location` rewrote it), and calls the rebuild functions.

A device tensor's storage here is the host storage of its inner tensor: the device's memory.
So saving needs no copy and no NumPy round trip, and three small pieces plug us into the scheme:

- `reduce_device_tensor` (MTIATensor.__reduce_ex__): pickle the inner storage (marked with the
  device it belongs to) plus the tensor's own size/stride/offset;
- a *tagger* that reads that mark, so the file says "mtia_sim:N";
- a *deserializer* for "mtia_sim[:N]" locations that takes the loaded host bytes as the memory of
  one new device allocation, with a clear error for a device that does not exist;

and `rebuild_device_tensor` puts every tensor on the storage's final location: a device index,
or the host when `map_location` said "cpu". One allocation per saved storage means that views
saved together come back sharing memory, and memory statistics count each storage once.
"""

from __future__ import annotations

import re

import torch

from .. import _compat
from .._compat import DEVICE_NAME
from .registry import register_kernel
from .runtime import RUNTIME
from .tensor import DeviceStorage, MTIATensor, _rebuild_on_device

PRIORITY = 9  # before PyTorch's CPU tagger (10) and its generic privateuse1 deserializer (23)
_DEVICE_MARK = "_mtia_sim_device"  # on a host storage: the device whose memory it is
_LOCATION = re.compile(rf"^{DEVICE_NAME}(?::(\d+))?$")
_registered = False


# -- saving --------------------------------------------------------------------------------------
def reduce_device_tensor(tensor: MTIATensor):
    """What pickle stores for a device tensor: a rebuild call over its (shared) storage."""
    untyped = tensor._inner.untyped_storage()
    # The host storage object is the same Python object for every view of it, so the mark is
    # seen by the tagger whichever view torch.save reaches first.
    setattr(untyped, _DEVICE_MARK, tensor.device)
    typed = torch.storage.TypedStorage(wrap_storage=untyped, dtype=tensor.dtype, _internal=True)
    is_param = isinstance(tensor, torch.nn.Parameter)
    return (
        rebuild_device_tensor,
        (typed, tensor.storage_offset(), tuple(tensor.size()), tuple(tensor.stride()),
         tensor.requires_grad, is_param),
    )


def _tag(storage) -> str | None:
    device = getattr(storage, _DEVICE_MARK, None)
    return str(device) if device is not None else None


# -- loading -------------------------------------------------------------------------------------
def _restore(storage, location: str):
    """Deserializer: host bytes tagged (or mapped) to mtia_sim[:N] become one device allocation.

    Returns a storage whose device is mtia_sim:N, whose bytes are the host storage it keeps (as
    for every device storage here); `rebuild_device_tensor` wraps them."""
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
    if storage.device.type != "cpu":  # a callable map_location moved it already
        storage = storage.cpu()
    memory = DeviceStorage(index, storage.nbytes(), storage.data_ptr(), "torch.load")
    if getattr(storage, "_torch_load_uninitialized", False):
        # The legacy format (and plain pickle) reads the bytes into the storage we return, so
        # it must stay a host storage: it carries its device allocation along instead.
        storage._mtia_memory = memory
        return storage
    on_device = _compat.storage_alias(storage, torch.device(DEVICE_NAME, index))
    on_device._mtia_host = storage
    on_device._mtia_memory = memory
    return on_device


def rebuild_device_tensor(
    storage: torch.storage.TypedStorage,
    storage_offset: int,
    size: tuple[int, ...],
    stride: tuple[int, ...],
    requires_grad: bool = False,
    is_param: bool = False,
) -> torch.Tensor:
    """The tensor over its loaded storage: on the device, or wherever map_location sent it."""
    untyped = storage._untyped_storage
    memory = getattr(untyped, "_mtia_memory", None)
    if memory is not None:
        host = getattr(untyped, "_mtia_host", untyped)
        inner = torch.empty(0, dtype=storage.dtype).set_(host, storage_offset, size, stride)
        tensor = MTIATensor(inner, memory)
    elif untyped.device.type == "cpu":
        tensor = torch.empty(0, dtype=storage.dtype).set_(untyped, storage_offset, size, stride)
    else:  # meta (or another backend a map_location chose)
        tensor = torch._utils._rebuild_tensor(storage, storage_offset, size, stride)
    if is_param:
        return torch.nn.Parameter(tensor, requires_grad=requires_grad)
    return tensor.requires_grad_(requires_grad) if requires_grad else tensor


def _refuse_set_storage(func, args, kwargs, device):
    raise NotImplementedError(
        f"Tensor.set_(storage) is not supported on {DEVICE_NAME}: a device tensor cannot be "
        "rebound to another storage. This happens when torch.load maps tensors that were saved "
        f"on the CPU onto {DEVICE_NAME}. Load them with map_location='cpu', then move them: "
        f"`tensor.to('{DEVICE_NAME}')`, or `model.load_state_dict(state)` on a model already on "
        f"{DEVICE_NAME}."
    )


def register() -> None:
    """Plug the tagger, the deserializer and the rebuild function into torch.serialization."""
    global _registered
    if _registered:
        return
    torch.serialization.register_package(PRIORITY, _tag, _restore)
    # torch.load(weights_only=True), the default, only calls functions it was told are safe.
    torch.serialization.add_safe_globals([rebuild_device_tensor, _rebuild_on_device])
    aten = torch.ops.aten
    for op in (aten.set_.source_Storage_storage_offset, aten.set_.source_Storage):
        register_kernel(op)(_refuse_set_storage)
    _registered = True
