"""What a tensor on the simulated device is made of.

A device tensor is a *wrapper*: a `torch.Tensor` whose metadata (size, strides, storage offset,
dtype, device `mtia_sim:N`) is its own, while its bytes live in an *inner* CPU tensor. Views of
one device tensor have inner tensors that share one CPU storage, so aliasing and in-place
updates behave exactly as on a real device.

Every CPU storage that backs device data is owned by one `DeviceStorage`, which holds the
allocator block that says where on the simulated device those bytes are. When the last tensor
that uses a storage dies, Python drops the `DeviceStorage` and the block goes back to the
caching allocator: freeing follows tensor lifetime, as on CUDA.
"""

from __future__ import annotations

import copy
import weakref

import torch

from ... import _compat
from ..._compat import DEVICE_NAME, copy_math_bits, is_fake
from ...source import user_source
from ..runtime.allocator import Block
from ..runtime.device_state import RUNTIME, BadForkError

# CPU storage data pointer -> weak reference to the DeviceStorage that owns it (tensors own
# storages). A plain dict of `weakref.ref`s, emptied by `DeviceStorage.__del__`, costs a fraction
# of a WeakValueDictionary on the hot path (one per op result).
_LIVE_STORAGES: dict[int, weakref.ref[DeviceStorage]] = {}
_DATA = _compat.tensor_data_descriptor  # the C++ getter/setter of `Tensor.data`
_BACKWARD_HOOKS = _compat.tensor_backward_hooks_descriptor
_DEVICES: list[torch.device] = []  # mtia_sim:0, mtia_sim:1, ... (filled once registered)
# While a graph captures (graph_capture.py), every device allocation goes through this route:
# route(device_index, nbytes, host_ptr, op, source) -> Block from the graph's private pool.
_ALLOCATION_ROUTE = None


def set_allocation_route(route) -> object:
    """Route device allocations through `route` (None: straight to the allocator); returns the
    previous route."""
    global _ALLOCATION_ROUTE
    previous, _ALLOCATION_ROUTE = _ALLOCATION_ROUTE, route
    return previous


# PyTorch's words (StorageSharing.cpp) when a received device tensor is sent on.
RESHARE_MESSAGE = (f"Attempted to send {DEVICE_NAME} tensor received from another process; this "
                   "is not currently supported. Consider cloning before sending.")


class DeviceStorage:
    """One simulated allocation: the allocator block and the host bytes behind it."""

    __slots__ = ("device_index", "block", "owner_ref", "nbytes", "host_ptr", "python_storage",
                 "received_from_process", "__weakref__")

    def __init__(self, device_index: int, nbytes: int, host_ptr: int, op: str) -> None:
        self.device_index = device_index
        self.nbytes = nbytes
        self.host_ptr = host_ptr
        self.block: Block | None = None
        self.owner_ref = None  # the allocator's weak reference to us, set with `block`
        # The storage object `untyped_storage()` hands out, made on first use.
        self.python_storage: torch.UntypedStorage | None = None
        # Rebuilt from a tensor another process sent (ipc.py): CUDA refuses to send it on.
        self.received_from_process = False
        if nbytes:
            self._allocate(op)

    def _allocate(self, op: str) -> None:
        source = user_source() if RUNTIME.record_alloc_source else ""
        if _ALLOCATION_ROUTE is None:  # the allocator sets self.block (interrupt-safe)
            allocator = RUNTIME.devices[self.device_index].allocator
            allocator.malloc(self.nbytes, op, source, owner=self)
        else:
            self.block = _ALLOCATION_ROUTE(self.device_index, self.nbytes, self.host_ptr, op,
                                           source)
        _LIVE_STORAGES[self.host_ptr] = weakref.ref(self)

    def resized(self, nbytes: int, host_ptr: int, op: str) -> None:
        """The host bytes were resized (storage.resize_, FSDP2 frees parameters so): give the
        old block back and take one of the new size, as CUDA's storage resize reallocates. The
        new block is taken first: if the device is full, the old memory stays as it was."""
        old_block, old_ptr = self.block, self.host_ptr
        self.nbytes, self.host_ptr, self.block = nbytes, host_ptr, None
        if nbytes:
            self._allocate(op)
        if old_block is not None:
            entry = _LIVE_STORAGES.get(old_ptr)
            if entry is not None and entry() is self and old_ptr != host_ptr:
                del _LIVE_STORAGES[old_ptr]
            RUNTIME.devices[self.device_index].allocator.free(old_block)
        self.python_storage = None  # the next untyped_storage() aliases the new bytes

    @property
    def address(self) -> int:
        return self.block.address if self.block is not None else 0

    def __del__(self) -> None:
        block = getattr(self, "block", None)  # unset if an interrupt stopped __init__ early
        if block is None:
            return
        self.block = None
        try:
            entry = _LIVE_STORAGES.get(self.host_ptr)
            if entry is not None and entry() in (self, None):  # not a newer storage's entry
                del _LIVE_STORAGES[self.host_ptr]
            if block.owner is not getattr(self, "owner_ref", None):
                return  # the allocator's weak reference to us freed it already (a GC'd cycle)
            RUNTIME.devices[self.device_index].allocator.free(block)
        except (IndexError, AttributeError, TypeError, BadForkError):
            # interpreter shutdown (module globals already None), the device was removed, or
            # a bad fork's child dropping a tensor inherited from its parent
            pass

    def __repr__(self) -> str:
        where = f"mtia_sim:{self.device_index}"
        return f"DeviceStorage({where}, {self.nbytes} bytes at {self.address:#x})"


class DeviceUntypedStorage(torch.UntypedStorage):
    """A device tensor's storage as Python code sees it (`t.untyped_storage()`, `t.storage()`).

    Its bytes are the device memory itself (the inner CPU storage, aliased), so reading it on
    the host works; its `data_ptr()` is the simulated address, as a CUDA storage reports its
    device address. The allocation keeps this object (one per allocation, so views and base
    give the same object, as PyTorch's do); the object refers back weakly, which avoids a
    cycle that would hold device memory until the garbage collector runs.
    """

    _mtia_host: torch.UntypedStorage
    _mtia_owner: weakref.ref[DeviceStorage]

    @property
    def _mtia_memory(self) -> DeviceStorage:
        memory = self._mtia_owner()
        if memory is None:
            raise RuntimeError(
                f"this {DEVICE_NAME} storage outlived every tensor that used its memory, so the "
                "memory went back to the allocator; keep a tensor that uses it alive instead"
            )
        return memory

    def data_ptr(self) -> int:
        memory = self._mtia_owner()
        return memory.address if memory is not None else 0

    def _share_device_(self, *args, **kwargs):
        """CUDA's IPC export of device memory: the simulator's cannot be shared that way. Memory
        received from another process is refused first, in CUDA's words, as CUDA checks it."""
        memory = self._mtia_owner()
        if memory is not None and memory.received_from_process:
            raise RuntimeError(RESHARE_MESSAGE)
        raise RuntimeError(
            f"_share_device_: {DEVICE_NAME} memory cannot be mapped into another process (there "
            f"is no IPC handle to give). Send the tensor through a torch.multiprocessing queue: "
            f"it arrives on the same device as a copy (backend/aten/ipc.py)."
        )

    def nbytes(self) -> int:
        return self._mtia_host.nbytes()

    def size(self) -> int:
        return self._mtia_host.nbytes()

    def __len__(self) -> int:
        return self._mtia_host.nbytes()

    def resize_(self, size: int) -> DeviceUntypedStorage:
        """Resize the device memory in place (CUDA does; FSDP2 frees unsharded parameters
        so): every tensor that uses it sees the new bytes, and its allocation is replaced."""
        memory = self._mtia_memory
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise TypeError(f"resize_(size): size must be a non-negative int, got {size!r}")
        host = self._mtia_host
        old_nbytes = host.nbytes()
        host.resize_(size)
        try:
            memory.resized(size, host.data_ptr(), "storage.resize_")
        except BaseException:
            host.resize_(old_nbytes)  # the device is full: leave the memory as it was
            raise
        return self


def device_untyped_storage(tensor: MTIATensor) -> torch.UntypedStorage:
    """The one storage object of a device tensor's allocation (views get the same object).
    While torch.compile traces (a fake inner tensor) there is no memory: PyTorch's own."""
    memory = tensor._storage
    if memory.python_storage is not None:
        return memory.python_storage
    inner = tensor._inner
    if _compat_is_fake(inner):
        return _compat.tensor_base_untyped_storage(tensor)
    host = inner.untyped_storage()
    storage = _compat.storage_alias(host, _DEVICES[memory.device_index])
    storage.__class__ = DeviceUntypedStorage
    storage._mtia_host, storage._mtia_owner = host, weakref.ref(memory)
    memory.python_storage = storage
    return storage


class MTIATensor(torch.Tensor):
    """A tensor on `mtia_sim:N`. Ops on it reach `__torch_dispatch__` (see dispatch.py)."""

    _inner: torch.Tensor
    _storage: DeviceStorage
    # Results of ops are made by __torch_dispatch__; do not let __torch_function__ turn host
    # results (like `.cpu()`) into this class.
    __torch_function__ = _compat.disabled_torch_function

    @staticmethod
    def __new__(cls, inner: torch.Tensor, storage: DeviceStorage) -> MTIATensor:
        tensor = _compat.make_wrapper_subclass(
            cls,
            inner.size(),
            strides=inner.stride(),
            storage_offset=inner.storage_offset(),
            dtype=inner.dtype,
            device=_DEVICES[storage.device_index],  # filled by registration.register_backend
            requires_grad=False,
            storage_size=storage.nbytes,
        )
        tensor._inner = inner
        tensor._storage = storage
        return tensor

    @property
    def data(self) -> torch.Tensor:
        return _DATA.__get__(self)

    @data.setter
    def data(self, new: torch.Tensor) -> None:
        """`t.data = other` (`m.weight.data = ...`, `vector_to_parameters`): PyTorch swaps the
        wrapper's metadata in C++, but its bytes are `_inner`, a Python attribute: take
        `other`'s inner tensor and storage too, or the shape changes and the values do not."""
        _DATA.__set__(self, new)
        if isinstance(new, MTIATensor):
            self._inner, self._storage = new._inner, new._storage

    @property
    def _backward_hooks(self):
        return _BACKWARD_HOOKS.__get__(self)

    @_backward_hooks.setter
    def _backward_hooks(self, hooks) -> None:
        """torch.load's rebuild (`torch._utils._rebuild_tensor_v2`) gives the wrapper the lazy
        conj / neg bits saved with it (`_set_tensor_metadata`, not an op, so the dispatcher never
        sees it) and then sets this attribute: the moment for the inner tensor, which the
        kernels read, to take the same bits."""
        _BACKWARD_HOOKS.__set__(self, hooks)
        inner = self._inner
        if inner.is_conj() != self.is_conj():
            inner = inner.conj()
        if inner.is_neg() != self.is_neg():
            inner = inner._neg_view()
        self._inner = inner

    def data_ptr(self) -> int:
        """The simulated address of the first element, as CUDA reports a device address:
        the allocation's address plus the offset in bytes, so views share their base's."""
        address = self._storage.address
        return address + self.storage_offset() * self.element_size() if address else 0

    def untyped_storage(self) -> DeviceUntypedStorage:
        return device_untyped_storage(self)

    def tolist(self) -> list:
        """As on CUDA: the values, read back to the host (a host sync)."""
        return self.detach().cpu().tolist()

    # torch.compile (AOTAutograd) sees through the wrapper to the inner tensor.
    def __tensor_flatten__(self):
        return ["_inner"], self._storage.device_index

    @staticmethod
    def __tensor_unflatten__(inner_tensors, device_index, outer_size, outer_stride):
        return wrap(inner_tensors["_inner"], device_index, "compiled")

    def __repr__(self, *, tensor_contents=None) -> str:
        return repr_on_device(self, _compat.tensor_str(self._inner.detach()))

    def __deepcopy__(self, memo):
        """A copy in a fresh device block. torch.Tensor.__deepcopy__ clones a wrapper subclass
        but then overwrites the clone's `__dict__` with a deepcopy of ours, `_storage` included:
        a second DeviceStorage over a copy of our allocator Block (same address), which the
        allocator would later free as if it were its own. So copy every attribute but those."""
        if id(self) in memo:
            return memo[id(self)]
        if not self.is_leaf:
            raise RuntimeError("only tensors created by the user (graph leaves) can be deep-"
                               "copied; detach() it first, or deepcopy the module before use")
        with torch.no_grad():
            new = self.clone()
        new.requires_grad_(self.requires_grad)
        if self.grad is not None:
            new.grad = copy.deepcopy(self.grad, memo)
        rest = {k: v for k, v in self.__dict__.items() if k not in ("_inner", "_storage")}
        new.__dict__.update(copy.deepcopy(rest, memo))
        memo[id(self)] = new
        return new

    # __reduce_ex__ (torch.save / pickle) is installed by serialization.register(): saving
    # needs the rebuild functions and storage tags that module defines on top of this one.


def _rebuild_on_device(host: torch.Tensor, device_index: int, requires_grad: bool) -> torch.Tensor:
    """Rebuild for files saved before serialization.py (they pickled `.cpu()` copies). The
    device index comes from the file: one that does not exist is refused before anything is
    made for it (device_of would make a torch.device for every index up to it)."""
    count = len(RUNTIME.devices)
    if isinstance(device_index, bool) or not isinstance(device_index, int) or not (
        0 <= device_index < count
    ):
        raise RuntimeError(
            f"torch.load: the file puts a tensor on {DEVICE_NAME}:{device_index!r}, but this "
            f"process has {count} {DEVICE_NAME} device(s) (valid indices 0..{count - 1}). Load "
            f"with map_location='cpu', or ask for more devices with "
            "mtia_lab.configure(device_count=N)."
        )
    if not isinstance(host, torch.Tensor) or not isinstance(requires_grad, bool):
        raise RuntimeError("torch.load: a device tensor in the file is malformed")
    return host.to(device_of(device_index)).requires_grad_(requires_grad)


def _compat_is_fake(inner: torch.Tensor) -> bool:
    # Only FakeTensor subclasses can be fake: a plain CPU tensor (every op result) costs one
    # type check, not a call into torch._subclasses.
    return type(inner) is not torch.Tensor and is_fake(inner)


def repr_on_device(tensor: torch.Tensor, inner_text: str) -> str:
    """The inner host tensor's repr, told as the device's: its device and autograd state in
    place of the host's (what a CUDA tensor's repr shows)."""
    suffix = f", device='{tensor.device}'"
    if tensor.grad_fn is not None:
        suffix += f", grad_fn=<{type(tensor.grad_fn).__name__}>"
    elif tensor.requires_grad:
        suffix += ", requires_grad=True"
    return inner_text[:-1] + suffix + ")"


def wrap(inner: torch.Tensor, device_index: int, op: str) -> MTIATensor:
    """Put a CPU tensor on the device: share the DeviceStorage of its CPU storage if one
    exists (a view or an in-place result), otherwise allocate a block for it (a fresh result)."""
    try:
        untyped = inner.untyped_storage()
    except NotImplementedError as error:  # a sparse COO result has no one storage (sparse.py)
        if inner.layout == torch.strided:
            raise _no_storage(inner, op, error) from error
        return _WRAP_SPARSE(inner, device_index, op)
    # A FakeTensor while torch.compile traces has no memory (every plain result passes the
    # type check without a call: this runs once per op).
    if type(inner) is not torch.Tensor and _compat_is_fake(inner):
        return MTIATensor(inner, DeviceStorage(device_index, 0, 0, op))
    try:
        ptr = untyped.data_ptr()
    except RuntimeError:  # metadata only, no memory
        return MTIATensor(inner, DeviceStorage(device_index, 0, 0, op))
    # _storage_at, inlined: the per-op path (benchmarks/bench_ops.py counts its calls)
    entry = _LIVE_STORAGES.get(ptr) if ptr else None
    storage = entry() if entry is not None else None
    if storage is None or storage.device_index != device_index:
        storage = DeviceStorage(device_index, untyped.nbytes(), ptr, op)
    tensor = MTIATensor(inner, storage)
    if inner.is_conj() or inner.is_neg():
        # A lazy `x.conj()` view: the wrapper must carry the bit too. Kernels run below the
        # Conjugate key and ignore the inner's bit; with it on the wrapper, PyTorch resolves
        # the conjugate (a copy) before an op that needs the values, as it does on the CPU.
        copy_math_bits(tensor, inner)
    return tensor


def _no_storage(inner: torch.Tensor, op: str, error: Exception) -> NotImplementedError:
    """The error for a dense tensor with no storage: a wrapper of another tensor (functorch's
    TensorWrapper or BatchedTensor, a subclass without storage), whose bytes are not its own."""
    return NotImplementedError(
        f"{op} returns a dense {type(inner).__name__} with no storage of its own ({error}), "
        f"so {DEVICE_NAME} has no host bytes to hold for it. Put the tensor it wraps on the "
        "device instead (torch.func's wrappers: torch._C._functorch.get_unwrapped), then wrap "
        "the result again."
    )


def _storage_at(ptr: int, untyped: torch.UntypedStorage, device_index: int,
                op: str) -> DeviceStorage:
    """The DeviceStorage that owns the host bytes at `ptr`, or a fresh allocation for them."""
    entry = _LIVE_STORAGES.get(ptr) if ptr else None
    storage = entry() if entry is not None else None
    if storage is None or storage.device_index != device_index:
        storage = DeviceStorage(device_index, untyped.nbytes(), ptr, op)
    return storage


def storage_for(dense: torch.Tensor, device_index: int, op: str) -> DeviceStorage:
    """The DeviceStorage behind a dense CPU tensor that is device memory (the indices or values
    of a sparse device tensor): the one that owns its bytes, or a fresh allocation."""
    untyped = dense.untyped_storage()
    return _storage_at(untyped.data_ptr(), untyped, device_index, op)


def _no_sparse(inner: torch.Tensor, device_index: int, op: str):
    raise NotImplementedError(f"{op} returns a {inner.layout} tensor: import mtia_lab.backend")


# How a sparse COO result is put on the device: sparse.py installs it (it builds on this module).
_WRAP_SPARSE = _no_sparse


def set_sparse_wrap(wrap_sparse) -> None:
    """Install the function that puts a CPU sparse COO tensor on the device (sparse.py)."""
    global _WRAP_SPARSE
    _WRAP_SPARSE = wrap_sparse


def storage_of(tensor: torch.Tensor) -> DeviceStorage:
    """The DeviceStorage behind a device tensor (views share it)."""
    if not isinstance(tensor, MTIATensor):
        where = (f"one on {tensor.device}" if isinstance(tensor, torch.Tensor)
                 else f"{tensor!r} ({type(tensor).__name__})")
        raise TypeError(f"storage_of expects a tensor on {DEVICE_NAME}, got {where}")
    return tensor._storage


def device_of(index: int) -> torch.device:
    while len(_DEVICES) <= index:
        _DEVICES.append(torch.device(DEVICE_NAME, len(_DEVICES)))
    return _DEVICES[index]
