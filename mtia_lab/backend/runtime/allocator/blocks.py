"""The allocator's data structures: blocks, segments, private pools, and the size rules.

A *segment* is one reservation from the (simulated) device: a run of contiguous addresses,
carved into a linked chain of *blocks*, each free (cached) or handed to a tensor's storage.
A segment belongs to the shared cache or to one *private pool* (graph captures). The size
rules say how a request is rounded and how large a segment it needs; caching.py decides which
block serves it.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

MIN_BLOCK = 512  # every size is rounded up to this
SMALL_SIZE = 1 << 20  # requests up to 1 MiB use the small pool
SMALL_SEGMENT = 2 << 20  # the small pool grows 2 MiB at a time
LARGE_SEGMENT = 20 << 20  # requests under 10 MiB share 20 MiB segments
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20  # larger requests are rounded to 2 MiB
# CUDA's `max_split_size_mb` (PYTORCH_CUDA_ALLOC_CONF): blocks of this size or more are never
# split and serve only requests within LARGE_SEGMENT of their size. CUDA's default is unlimited,
# and so is ours (None): a 4 MiB request may take a piece of any larger cached block.
MAX_SPLIT_SIZE: int | None = None
DEVICE_BASE_ADDRESS = 0x7F00_0000_0000
DEFAULT_POOL = (0, 0)  # the id the snapshot reports for the shared cache, as CUDA does

PoolId = tuple[int, int]


def round_size(nbytes: int) -> int:
    """The block size a request of `nbytes` uses (512-byte granularity, at least one granule)."""
    return max(MIN_BLOCK, (nbytes + MIN_BLOCK - 1) // MIN_BLOCK * MIN_BLOCK)


def segment_size_for(rounded: int) -> int:
    if rounded <= SMALL_SIZE:
        return SMALL_SEGMENT
    if rounded < MIN_LARGE_ALLOC:
        return LARGE_SEGMENT
    return (rounded + ROUND_LARGE - 1) // ROUND_LARGE * ROUND_LARGE


def format_bytes(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes} B"


class _OwnerRef(weakref.ref):
    """A weak reference from a block to the storage that holds it. If the storage dies without
    freeing it (an interrupt inside its `__del__`), the callback frees it: no bytes stay
    allocated that nothing holds. A normal free clears `block.owner`, so then it does nothing.
    When the garbage collector frees a cycle, it runs this callback before `__del__`: the
    storage's `__del__` sees `block.owner` is no longer its reference and frees nothing."""

    __slots__ = ("block", "allocator")


def _reclaim_orphan(ref: _OwnerRef) -> None:
    block = ref.block
    if block is not None and block.owner is ref and block.allocated:
        ref.allocator.free(block)


@dataclass(eq=False)
class Block:
    """A piece of a segment: free (cached) or handed to a tensor's storage."""

    segment: Segment
    address: int
    size: int
    allocated: bool = False
    requested: int = 0  # bytes the user asked for (size is rounded up)
    op: str = ""  # the op that allocated it
    source: str = ""  # the user's file:line, when recorded
    prev: Block | None = None
    next: Block | None = None
    owner: _OwnerRef | None = None  # the storage it was handed to (malloc with an owner)

    def sort_key(self) -> tuple[int, int]:
        return (self.size, self.address)

    @property
    def pool(self) -> PoolId:
        """The pool this block belongs to: DEFAULT_POOL or a private pool's id."""
        pool = self.segment.pool
        return DEFAULT_POOL if pool is None else pool.id


@dataclass(eq=False)
class PrivatePool:
    """Segments set aside for graph captures: they serve only requests made to this pool."""

    id: PoolId
    use_count: int = 1  # graphs that use the pool; at 0 its memory goes back to the device
    free: dict[bool, list] = field(default_factory=lambda: {True: [], False: []})


@dataclass(eq=False)
class Segment:
    """One reservation from the (simulated) device: a run of contiguous addresses."""

    address: int
    size: int
    is_small: bool
    first: Block | None = None
    pool: PrivatePool | None = None  # None: the shared cache

    def blocks(self) -> list[Block]:
        out, block = [], self.first
        while block is not None:
            out.append(block)
            block = block.next
        return out

    def is_free(self) -> bool:
        return self.first is not None and self.first.next is None and not self.first.allocated
