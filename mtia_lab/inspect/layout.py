"""A tensor's logical elements laid over its storage: the data behind every stride picture.

A tensor is a window onto a flat *storage* of cells (one cell per element of its dtype). Its
size, stride and storage offset say which cell each logical element reads:

    cell(i0, i1, ..., ik) = storage_offset + i0 * stride[0] + i1 * stride[1] + ... + ik * stride[k]

That one formula explains transposes (strides swapped), slices (an offset, larger strides),
`expand` (stride 0: many elements read one cell), `as_strided` overlaps and channels_last (the
channel stride is 1). `StridedLayout` evaluates it for every element and records the results:
which cell each element reads, how many elements read each cell, the cells nobody reads, and
which other given views read the same storage. Renderers (mtia_lab/viz/layout.py) only read it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import torch

from ..backend import storage_of

MAX_ELEMENTS = 1 << 25  # past this, describe a slice: the per-element tables would not fit


class LayoutError(ValueError):
    """Size, stride, offset and storage length that do not describe a valid view."""


@dataclass(frozen=True, eq=False)
class StridedLayout:
    """Which storage cell each logical element of a (possibly strided) tensor reads."""

    size: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    storage_len: int  # cells in the whole storage (bytes // itemsize)
    name: str = "t"
    dtype: str = "float32"
    device: str = "cpu"
    # identity of the storage (None when made from numbers); out of repr: it is an address
    storage_id: object = field(default=None, repr=False)
    others: tuple[StridedLayout, ...] = field(default=(), repr=False)  # views sharing storage
    cells: torch.Tensor = field(init=False, repr=False)  # [numel] int64, row-major order
    reads: torch.Tensor = field(init=False, repr=False)  # [storage_len] int64

    def __post_init__(self) -> None:
        _check(self.size, self.stride, self.storage_offset, self.storage_len, self.name)
        object.__setattr__(self, "cells", _cells(self.size, self.stride, self.storage_offset))
        reads = torch.bincount(self.cells, minlength=self.storage_len)
        object.__setattr__(self, "reads", reads)

    # -- shape ---------------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.size)

    @property
    def numel(self) -> int:
        return math.prod(self.size)

    def index_of(self, flat: int) -> tuple[int, ...]:
        """The logical index (i0, ..., ik) of the `flat`-th element in row-major order."""
        index = []
        for n in reversed(self.size):
            flat, i = divmod(flat, n)
            index.append(i)
        return tuple(reversed(index))

    def cell_of(self, index: Sequence[int]) -> int:
        """The storage cell the element at `index` reads (the formula above)."""
        inside = len(index) == self.ndim and all(
            0 <= i < n for i, n in zip(index, self.size, strict=True)
        )
        if not inside:
            raise IndexError(f"index {tuple(index)} is outside size {self.size}")
        return self.storage_offset + sum(i * s for i, s in zip(index, self.stride, strict=True))

    def readers(self, cell: int) -> list[tuple[int, ...]]:
        """Logical indices of every element that reads `cell` (several: an overlap)."""
        flats = (self.cells == cell).nonzero().flatten().tolist()
        return [self.index_of(f) for f in flats]

    # -- how the elements cover the storage ----------------------------------------------------
    @cached_property
    def span(self) -> tuple[int, int] | None:
        """(first, last) cell read, or None for a tensor with no elements."""
        if self.numel == 0:
            return None
        return int(self.cells.min()), int(self.cells.max())

    @cached_property
    def unread(self) -> list[int]:
        """Every storage cell no element reads (before the offset, holes, past the end)."""
        return (self.reads == 0).nonzero().flatten().tolist()

    @cached_property
    def gaps(self) -> list[int]:
        """Unread cells between the first and last cell read: holes a strided view skips."""
        if self.span is None:
            return []
        first, last = self.span
        return ((self.reads[first : last + 1] == 0).nonzero().flatten() + first).tolist()

    @cached_property
    def read_counts(self) -> tuple[int, int, int]:
        """(cells read once, cells read by several elements, cells never read)."""
        once = int((self.reads == 1).sum())
        never = int((self.reads == 0).sum())
        return once, self.storage_len - once - never, never

    @cached_property
    def overlaps(self) -> list[int]:
        """Cells read by more than one element (stride 0, or an overlapping as_strided)."""
        return (self.reads > 1).nonzero().flatten().tolist()

    @property
    def broadcast_dims(self) -> list[int]:
        """Dimensions with stride 0 and more than one element: expand()'s free copies."""
        pairs = enumerate(zip(self.size, self.stride, strict=True))
        return [d for d, (n, s) in pairs if s == 0 and n > 1]

    # -- contiguity (PyTorch's rules, re-derived) ----------------------------------------------
    @property
    def is_contiguous(self) -> bool:
        """Row-major dense: walking the last dim first, each stride is the product of the sizes
        after it. Dims of size 1 do not count (their stride is never used)."""
        if self.numel < 2:
            return True  # PyTorch: 0 or 1 element is contiguous whatever the strides
        return _dense_in_order(self.size, self.stride, list(reversed(range(self.ndim))))

    @property
    def is_channels_last(self) -> bool:
        """4-D (N, C, H, W) dense in the order C, W, H, N: channels are adjacent in memory."""
        return self.ndim == 4 and _dense_in_order(self.size, self.stride, [1, 3, 2, 0])

    @property
    def is_channels_last_3d(self) -> bool:
        """5-D (N, C, D, H, W) dense in the order C, W, H, D, N."""
        return self.ndim == 5 and _dense_in_order(self.size, self.stride, [1, 4, 3, 2, 0])

    @property
    def is_non_overlapping_and_dense(self) -> bool:
        """Every element has its own cell and the cells read form one unbroken run."""
        span = self.span
        return span is None or (not self.overlaps and span[1] - span[0] + 1 == self.numel)

    @property
    def memory_format(self) -> str:
        """"contiguous", "channels_last", "channels_last_3d", both, or "strided" (neither)."""
        formats = [
            name
            for name, yes in (
                ("contiguous", self.is_contiguous),
                ("channels_last", self.is_channels_last),
                ("channels_last_3d", self.is_channels_last_3d),
            )
            if yes
        ]
        return " and ".join(formats) if formats else "strided"

    # -- sharing -------------------------------------------------------------------------------
    @property
    def shares_with(self) -> list[str]:
        return [other.name for other in self.others]

    def shared_cells(self, other: StridedLayout) -> int:
        """How many storage cells both this view and `other` read."""
        n = min(self.storage_len, other.storage_len)
        return int(((self.reads[:n] > 0) & (other.reads[:n] > 0)).sum())


def strided_layout(
    size: Sequence[int],
    stride: Sequence[int],
    storage_offset: int = 0,
    storage_len: int | None = None,
    *,
    name: str = "t",
    dtype: str = "float32",
) -> StridedLayout:
    """A layout from plain numbers, to explore without a tensor. `storage_len` defaults to just
    enough cells for the last element; a smaller one that the view would read past raises
    LayoutError naming the element, the cell and the fix."""
    size, stride = tuple(int(n) for n in size), tuple(int(s) for s in stride)
    if storage_len is None:
        _check(size, stride, storage_offset, 0, name, bounds=False)
        storage_len = _needed(size, stride, storage_offset)
    return StridedLayout(size, stride, int(storage_offset), int(storage_len), name, dtype)


def layout_of(
    tensor: torch.Tensor, name: str = "t", others: Mapping[str, torch.Tensor] | None = None
) -> StridedLayout:
    """The layout of a CPU or mtia_sim tensor; `others` (name -> tensor) are candidate views,
    of which those on the same storage are kept (the others are not mentioned)."""
    shared = []
    for other_name, other in (others or {}).items():
        layout = _from_tensor(other, other_name, ())
        if layout.storage_id == _storage_id(tensor):
            shared.append(layout)
    return _from_tensor(tensor, name, tuple(shared))


def layout_from_record(record, name: str = "t") -> StridedLayout:
    """The layout of a recorded tensor (anything with shape, strides, storage_offset,
    storage_nbytes, dtype, device and storage, like mtia_lab.trace's TensorRecord)."""
    itemsize = getattr(torch, record.dtype).itemsize
    return StridedLayout(
        tuple(record.shape), tuple(record.strides), record.storage_offset,
        record.storage_nbytes // itemsize, name, record.dtype, record.device,
        (record.device, record.storage),
    )


# -- helpers -----------------------------------------------------------------------------------
def _from_tensor(tensor: torch.Tensor, name: str, others: tuple) -> StridedLayout:
    host = getattr(tensor, "_inner", tensor)  # a device tensor's bytes live in its inner tensor
    nbytes = host.untyped_storage().nbytes()
    return StridedLayout(
        tuple(tensor.size()), tuple(tensor.stride()), tensor.storage_offset(),
        nbytes // tensor.element_size(), name, str(tensor.dtype).removeprefix("torch."),
        str(tensor.device), _storage_id(tensor), others,
    )


def _storage_id(tensor: torch.Tensor) -> object:
    """Same value for tensors that share a storage: the simulated block for device tensors
    (mtia_lab.storage_of), the data pointer for host tensors."""
    if hasattr(tensor, "_storage") and hasattr(tensor, "_inner"):
        storage = storage_of(tensor)
        return (str(tensor.device), storage.address or id(storage))
    ptr = tensor.untyped_storage().data_ptr()
    # An empty (or meta) storage has no address: say it shares with nothing but itself.
    return (str(tensor.device), ptr) if ptr else (str(tensor.device), 0, id(tensor))


def _dense_in_order(size: tuple, stride: tuple, order: list[int]) -> bool:
    expected = 1
    for d in order:
        if size[d] == 1:
            continue
        if stride[d] != expected:
            return False
        expected *= size[d]
    return True


def _needed(size: tuple, stride: tuple, offset: int) -> int:
    """Cells a storage needs for this view: one past the last cell it reads."""
    if math.prod(size) == 0:
        return offset
    return offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) + 1


def _check(size, stride, offset, storage_len, name, bounds: bool = True) -> None:
    if len(size) != len(stride):
        raise LayoutError(
            f"{name}: size {tuple(size)} has {len(size)} dims but stride {tuple(stride)} has "
            f"{len(stride)}: give one stride per dimension."
        )
    for d, n in enumerate(size):
        if n < 0:
            raise LayoutError(f"{name}: size[{d}] is {n}; sizes must be 0 or more.")
    for d, s in enumerate(stride):
        if s < 0:
            raise LayoutError(
                f"{name}: stride[{d}] is {s}; PyTorch strides are 0 or more (as_strided "
                "rejects negative strides; flip() makes a reversed copy instead)."
            )
    if offset < 0:
        raise LayoutError(f"{name}: storage offset is {offset}; it must be 0 or more.")
    if math.prod(size) > MAX_ELEMENTS:
        raise LayoutError(
            f"{name}: {math.prod(size)} elements is more than the {MAX_ELEMENTS} a layout "
            "describes; describe a slice of the tensor (t[:64, :64]) instead."
        )
    if not bounds:
        return
    if storage_len < 0:
        raise LayoutError(f"{name}: storage length is {storage_len}; it must be 0 or more.")
    needed = _needed(size, stride, offset)
    if math.prod(size) and needed > storage_len:
        last = tuple(n - 1 if s > 0 else 0 for n, s in zip(size, stride, strict=True))
        cell = needed - 1
        raise LayoutError(
            f"{name}: element {last} would read storage cell {cell}, but the storage has "
            f"{storage_len} cells (0..{storage_len - 1}). Size {tuple(size)}, stride "
            f"{tuple(stride)} and storage offset {offset} need at least {needed} cells. "
            "Fix: lower the offset, a size or a stride, or use a storage of at least "
            f"{needed} cells."
        )


def _cells(size: tuple, stride: tuple, offset: int) -> torch.Tensor:
    """offset + sum_d i_d * stride[d] for every index, in row-major order (vectorised: one
    broadcast add per dimension, no Python loop over elements)."""
    cells = torch.tensor(offset, dtype=torch.int64)
    for d, (n, s) in enumerate(zip(size, stride, strict=True)):
        shape = [1] * len(size)
        shape[d] = n
        cells = cells + (torch.arange(n, dtype=torch.int64) * s).view(shape)
    return cells.expand(size).reshape(-1)
