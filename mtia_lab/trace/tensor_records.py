"""Tensor records as the recorder makes them: one `TensorRecord` per distinct tensor state,
shared between events, read once per tensor kind (see `TensorRecords._record`).

A mixin of the `Recorder` (recorder.py): its caches live on the one recorder object, so the
dispatcher hooks' hot path reads them as plain attributes.
"""

from __future__ import annotations

import functools
import weakref

import torch

from .. import _compat
from ..backend.aten.sparse import MTIASparseTensor
from ..backend.aten.tensor import MTIATensor
from ..backend.runtime.cost import tensor_bytes
from .events import TensorRecord

dispatch_key_bits = _compat.dispatch_key_bits
is_inference_mode_enabled = torch.is_inference_mode_enabled


@functools.cache
def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def tensors_in(values, out: list) -> list:
    """The tensors among `values` (lists and tuples of tensors flattened), in order."""
    for value in values:
        if isinstance(value, torch.Tensor):
            out.append(value)
        elif isinstance(value, (list, tuple)):
            tensors_in(value, out)
    return out



class TensorRecords:
    """The record caches: `records` (equal records made once), `seen` (a tensor's record from
    when it was last an op's result) and `shapes` (interned shape tuples)."""

    records: dict[tuple, tuple[TensorRecord, int]]
    seen: dict[int, tuple]
    shapes: dict[tuple, tuple]
    device_names: list[str]

    def _init_records(self) -> None:
        self.records = {}
        self.seen = {}  # id(tensor) -> (weakref, entry), see _input_record
        self.shapes = {}
        self.device_names = [f"{_compat.DEVICE_NAME}:{i}" for i in range(64)]

    def tensor_record(self, t: torch.Tensor) -> TensorRecord:
        """The record of a live tensor as an op sees it (for writers that hand the recorder
        tensors, such as Inductor's launches)."""
        return self._record(t, None, False)[0]

    # -- records -----------------------------------------------------------------------------
    def _input_record(self, t: torch.Tensor) -> tuple[TensorRecord, int]:
        """An input's entry: remembered from when the tensor was last an op's result, if it
        was. A tensor's metadata changes only through ops (in-place, out=, set_), whose results
        are recorded afresh, so the remembered entry still holds (`.data = ...` bypasses ops)."""
        hit = self.seen.get(id(t))
        if hit is not None and hit[0]() is t:
            return hit[1]
        entry = self._record(t, None, False)
        self._remember(t, entry)
        return entry

    def _output_record(self, t: torch.Tensor, is_view: bool | None, new: bool) -> TensorRecord:
        entry = self._record(t, is_view, new)
        self._remember(t, entry)
        return entry[0]

    def _remember(self, t: torch.Tensor, entry: tuple) -> None:
        seen = self.seen
        if len(seen) > 4096:  # bounded: dead tensors' entries go at once, now and then
            seen.clear()
        seen[id(t)] = (weakref.ref(t), entry)

    def _record(self, t: torch.Tensor, is_view: bool | None, new: bool
                ) -> tuple[TensorRecord, int]:
        """(TensorRecord, dispatch key bits) of a tensor; equal records are made once, shared.

        The key bits are read once per record: they follow from the tensor's kind (device,
        subclass, inference or not, conjugate/negative views), which the cache key holds.
        `is_view` None: read it off `t._base`. `new`: t was just made by the dispatcher (see
        _explain), so it is an inference tensor exactly when inference mode is on (a wrapper
        made there is, whatever its base): one tensor query saved per result."""
        if type(t) is MTIATensor:
            storage = t._storage
            block = storage.block
            address = block.address if block is not None else 0  # DeviceStorage.address
            device = storage.device_index
            inner = t._inner  # same metadata as the wrapper (dispatch keeps them in step)
        elif type(t) is MTIASparseTensor:
            return self._sparse_record(t)
        else:
            storage = None
            try:
                address = t.untyped_storage().data_ptr()
            except (RuntimeError, NotImplementedError):  # no storage (a FakeTensor while
                address = 0  # compiling, a host sparse tensor)
            device = -1
            inner = t
        if is_view is None:  # an input, or an argument the op wrote to (in place, out=)
            is_view = t._base is not None
        view_of = address if is_view else None
        dtype = inner.dtype
        if dtype.is_complex:
            flags = (t.is_inference(), t.is_conj(), t.is_neg())
        else:
            flags = is_inference_mode_enabled() if new else t.is_inference()
        key = (address, inner.shape, inner.stride(), inner.storage_offset(), dtype, view_of,
               device, flags, type(t))
        entry = self.records.get(key)
        if entry is None:
            shape, strides = self._intern(tuple(key[1])), self._intern(key[2])
            if storage is not None:
                storage_nbytes, device_name = storage.nbytes, self.device_names[device]
            else:
                storage_nbytes = t.untyped_storage().nbytes() if address else 0
                device_name = str(t.device)
            entry = self.records[key] = (TensorRecord(
                shape, _dtype_name(dtype), strides, key[3], address, storage_nbytes,
                device_name, view_of, inner.numel() * inner.element_size(),
            ), dispatch_key_bits(t))
        return entry

    def _sparse_record(self, t: MTIASparseTensor) -> tuple[TensorRecord, int]:
        """A sparse COO device tensor: its memory is its indices and values (two blocks); the
        record names the values' block and counts the bytes of both."""
        indices, values = t._memory
        nbytes = tensor_bytes(t._inner)  # its indices' and values'
        key = ("sparse", values.address, indices.address, t.shape, t.dtype, nbytes)
        entry = self.records.get(key)
        if entry is None:
            entry = self.records[key] = (TensorRecord(
                self._intern(tuple(t.shape)), _dtype_name(t.dtype), (), 0, values.address,
                nbytes, self.device_names[values.device_index], None, nbytes,
            ), dispatch_key_bits(t))
        return entry

    def _intern(self, value: tuple) -> tuple:
        return self.shapes.setdefault(value, value)
