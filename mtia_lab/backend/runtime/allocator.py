"""A caching allocator for one simulated device, in the spirit of PyTorch's CUDA allocator.

Why cache: asking the driver for memory (cudaMalloc, or its MTIA twin) is slow and synchronises,
so PyTorch reserves *segments* from the device and carves them into *blocks* itself:

- sizes are rounded up to 512 bytes, so blocks are easy to reuse;
- requests of at most 1 MiB come from the *small pool* (2 MiB segments), larger ones from the
  *large pool* (20 MiB segments, or the rounded size itself for requests of 10 MiB and more);
- a request takes the smallest cached free block that fits (best fit); if the block is much
  larger it is *split* and the remainder stays cached;
- a freed block is *merged* with free neighbours of its segment and stays reserved, so the next
  request of that size costs nothing; `empty_cache` returns whole free segments to the device;
- when the device is full, cached free segments are released and the request retried once;
  if it still does not fit, `torch.OutOfMemoryError` says what holds the memory.

*Private pools* serve graph captures (graph_capture.py), as in CUDA: while a graph captures, its
requests are served only from segments of its own pool, and blocks freed there go back to that
pool, never to the shared cache, so the addresses a captured graph uses stay reserved for it until
the pool is released (`release_pool`, when no graph uses it any more). Graphs may share a pool.

Like CUDA's allocator (one mutex per device), it is safe to call from several threads, and from
inside itself: a garbage collection that runs in the middle of a split or a merge may free device
tensors (reference cycles), which calls `free` again. A free that finds the allocator busy is
*deferred*: queued, and done by whoever holds the allocator as it leaves. A KeyboardInterrupt
(or any exception) in the middle of an operation leaves it marked *dirty*; the next call rebuilds
the free lists and the statistics from the segments, which are the truth (`_repair`).

Addresses here are simulated device addresses; the bytes of a tensor live in host memory owned by
the tensor (see tensor.py). The allocator only decides *where on the device* they would live,
which is what the memory statistics and snapshots report.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import sys
import threading
import weakref
from dataclasses import dataclass, field

import torch

from ...source_names import short_source

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


def _frame_key(depth: int) -> tuple[int, object]:
    """Which frame set `_busy` (its id and code: the frame itself would keep its locals, a
    tensor's storage among them, alive after an interrupt)."""
    frame = sys._getframe(depth + 1)
    return id(frame), frame.f_code


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


@dataclass
class _Stat:
    current: int = 0
    peak: int = 0
    allocated: int = 0  # cumulative increments
    freed: int = 0  # cumulative decrements

    def add(self, amount: int) -> None:
        self.current += amount
        self.allocated += amount
        self.peak = max(self.peak, self.current)

    def sub(self, amount: int) -> None:
        self.current -= amount
        self.freed += amount

    def reset_peak(self) -> None:
        self.peak = self.current


@dataclass
class _PoolStats:
    allocated_bytes: _Stat = field(default_factory=_Stat)
    requested_bytes: _Stat = field(default_factory=_Stat)
    reserved_bytes: _Stat = field(default_factory=_Stat)
    active_bytes: _Stat = field(default_factory=_Stat)
    inactive_split_bytes: _Stat = field(default_factory=_Stat)
    allocation: _Stat = field(default_factory=_Stat)
    segment: _Stat = field(default_factory=_Stat)
    active: _Stat = field(default_factory=_Stat)


class CachingAllocator:
    """Hands out blocks of one device's memory; see the module docstring for the policy."""

    def __init__(self, device_index: int, capacity: int, physical_index: int | None = None) -> None:
        self.device_index = device_index
        physical_index = device_index if physical_index is None else physical_index
        self.capacity = capacity
        self.segments: list[Segment] = []
        self._free = {True: [], False: []}  # is_small -> sorted [(size, address, block)]
        self._pools: dict[PoolId, PrivatePool] = {}
        self._stats = {"all": _PoolStats(), "small_pool": _PoolStats(), "large_pool": _PoolStats()}
        self._num_alloc_retries = 0
        self._num_ooms = 0
        self._next_address = DEVICE_BASE_ADDRESS + physical_index * (1 << 40)
        self._order = itertools.count()
        self.max_split_size = MAX_SPLIT_SIZE
        # Re-entrancy and threads (see the module docstring): the lock is held by one thread at a
        # time; `_busy` says an operation is under way on it (so a free arriving now, from a
        # garbage collection inside that operation, is deferred to `_pending`); `_dirty` says an
        # operation began and did not finish (an exception), so the next one repairs first.
        self._lock = threading.RLock()
        self._busy, self._busy_frame = False, None
        self._dirty = False
        self._pending: list[Block] = []
        self._in_flight: Block | None = None  # the block a malloc was handing out
        self._in_flight_owner = None  # whose `.block` that malloc was filling

    # -- allocation -------------------------------------------------------------------------
    def malloc(
        self, nbytes: int, op: str = "", source: str = "", pool: PoolId | None = None,
        owner=None,
    ) -> Block:
        """A block of at least `nbytes`; from the private pool `pool` if given (see retain_pool).
        With `owner`, the block is stored in `owner.block` before the operation counts as done,
        so an interrupt between the allocation and the caller's assignment cannot orphan it: an
        interrupted hand-off is undone by the next operation's repair."""
        with self._lock:
            if self._really_busy():
                raise RuntimeError(
                    f"mtia_sim:{self.device_index}: device memory was requested from inside the "
                    "caching allocator (a __del__ run by a garbage collection during an "
                    "allocation). Allocate device tensors outside __del__ methods."
                )
            try:
                self._busy, self._busy_frame = True, _frame_key(0)
                if self._dirty:
                    self._repair()
                self._dirty, self._in_flight, self._in_flight_owner = True, None, owner
                block = self._malloc(nbytes, op, source, pool)
                if owner is not None:
                    ref = block.owner = _OwnerRef(owner, _reclaim_orphan)
                    ref.block, ref.allocator = block, self
                    owner.block, owner.owner_ref = block, ref
                self._dirty, self._in_flight_owner = False, None
            finally:
                self._busy, self._busy_frame = False, None
        if self._pending:
            self._drain()
        return block

    def _malloc(self, nbytes: int, op: str, source: str, pool: PoolId | None) -> Block:
        size = round_size(nbytes)
        is_small = size <= SMALL_SIZE
        private = None if pool is None else self._private(pool)
        block = self._take_free(size, is_small, self._free if private is None else private.free)
        if block is not None and (block.prev is not None or block.next is not None):
            self._count(is_small, "inactive_split_bytes", -block.size)
        if block is None:
            block = self._new_segment(size, is_small, nbytes, op, private)
        self._in_flight = block
        block = self._split(block, size)
        block.allocated, block.requested, block.op, block.source = True, nbytes, op, source
        # The whole block counts, as in CUDA: a large block keeps a remainder of up to 1 MiB
        # unsplit, and free() gives back block.size.
        self._count_block(is_small, block.size, nbytes, +1)
        return block

    def free(self, block: Block) -> None:
        """Give a block back. Called from `DeviceStorage.__del__`, so at any moment: if the
        allocator is busy (this thread is inside an operation, or another thread is), the free
        is queued and done when that operation ends."""
        block.owner = None  # given back: the orphan check (_reclaim_orphan) must not free it
        lock = self._lock
        if lock.acquire(blocking=False):  # the common case: free it now
            done = False
            try:
                if not self._really_busy():
                    try:
                        self._busy, self._busy_frame = True, _frame_key(0)
                        reclaimed = None
                        if self._dirty:
                            reclaimed = self._in_flight
                            self._repair()
                        if block is not reclaimed:  # else the repair freed it (a malloc's)
                            self._dirty, self._in_flight = True, block
                            self._in_flight_owner = None
                            self._free_block(block)
                            self._dirty = False
                        done = True
                    finally:
                        self._busy, self._busy_frame = False, None
            finally:
                lock.release()
            if done:
                if self._pending:
                    self._drain()
                return
        self._pending.append(block)  # list.append is atomic: safe from any thread
        self._drain()

    def _drain(self) -> None:
        """Do the queued frees, unless someone else holds the allocator (they will)."""
        errors = []
        while self._pending:
            if not self._lock.acquire(blocking=False):
                return  # another thread: it drains when it leaves
            try:
                if self._really_busy():
                    return  # this thread, inside an operation (a GC): it drains when it leaves
                try:
                    self._busy, self._busy_frame = True, _frame_key(0)
                    reclaimed = None
                    if self._dirty:
                        reclaimed = self._in_flight
                        self._repair()
                    while self._pending:
                        # First in, first out: other threads append while we pop.
                        self._in_flight, self._in_flight_owner = self._pending[0], None
                        self._dirty = True
                        block = self._pending.pop(0)
                        try:
                            if block is not reclaimed:  # else the repair freed it already
                                self._free_block(block)
                        except RuntimeError as error:  # a double free: report after the rest
                            errors.append(error)
                        self._dirty = False
                finally:
                    self._busy, self._busy_frame = False, None
            finally:
                self._lock.release()
        if errors:
            raise errors[0]

    def _free_block(self, block: Block) -> None:
        if not block.allocated:
            raise RuntimeError(f"double free of device block at {block.address:#x}")
        is_small = block.segment.is_small
        self._count_block(is_small, block.size, block.requested, -1)
        block.allocated, block.requested, block.op, block.source = False, 0, "", ""
        block.owner = None
        block = self._merge(block)
        self._insert_free(block)
        pool = block.segment.pool
        if pool is not None and pool.use_count == 0 and block.segment.is_free():
            self._release(block.segment)  # the last tensor of a released pool died

    def empty_cache(self) -> int:
        """Return every fully free segment of the shared cache (and of released private pools)
        to the device; the bytes released. Pools still used by a graph keep their segments."""
        with self._guarded():
            return self._empty_cache()

    def _empty_cache(self) -> int:
        released = 0
        for segment in list(self.segments):
            if segment.is_free() and (segment.pool is None or segment.pool.use_count == 0):
                released += self._release(segment)
        return released

    # -- private pools (graph captures) -----------------------------------------------------
    def retain_pool(self, pool: PoolId) -> None:
        """One more graph uses `pool`: create it on first use (like CUDA's pool use count)."""
        with self._guarded():
            self._retain_pool(pool)

    def _retain_pool(self, pool: PoolId) -> None:
        private = self._pools.get(pool)
        if private is None:
            self._pools[pool] = PrivatePool(tuple(pool))
        else:
            private.use_count += 1

    def release_pool(self, pool: PoolId) -> int:
        """One graph fewer uses `pool`. At zero its free segments go back to the device at once
        and the others as their last tensor dies; returns the bytes released now."""
        with self._guarded():
            return self._release_pool(pool)

    def _release_pool(self, pool: PoolId) -> int:
        private = self._private(pool)
        private.use_count -= 1
        if private.use_count > 0:
            return 0
        del self._pools[private.id]
        released = 0
        for segment in list(self.segments):
            if segment.pool is private and segment.is_free():
                released += self._release(segment)
        return released

    def pool_ids(self) -> list[PoolId]:
        self._settle()
        return list(self._pools)

    def pool_reserved_bytes(self, pool: PoolId) -> int:
        """Bytes of the segments that belong to a live private pool."""
        self._settle()
        private = self._pools.get(pool)
        return sum(s.size for s in self.segments if private is not None and s.pool is private)

    def _private(self, pool: PoolId) -> PrivatePool:
        private = self._pools.get(tuple(pool))
        if private is None:
            raise ValueError(
                f"mtia_sim:{self.device_index} has no memory pool {pool}: a private pool exists "
                "from a graph's capture_begin until the last graph using it is destroyed. Pass "
                "graph.pool() of a live graph or a fresh torch.mtia_sim.graph_pool_handle()."
            )
        return private

    # -- statistics --------------------------------------------------------------------------
    @property
    def allocated_bytes(self) -> int:
        self._settle()
        return self._stats["all"].allocated_bytes.current

    @property
    def reserved_bytes(self) -> int:
        self._settle()
        return self._stats["all"].reserved_bytes.current

    def peak(self, name: str) -> int:
        """Peak of a stat over both pools, as PyTorch reports `<name>.all.peak`."""
        self._settle()
        return getattr(self._stats["all"], name).peak

    def reset_peak_stats(self) -> None:
        self._settle()
        for pool in self._stats.values():
            for stat in vars(pool).values():
                stat.reset_peak()

    def reset_accumulated_stats(self) -> None:
        self._settle()
        for pool in self._stats.values():
            for stat in vars(pool).values():
                stat.allocated = stat.freed = 0
        self._num_alloc_retries = self._num_ooms = 0

    def memory_stats(self) -> dict[str, int]:
        """The flat dict of `torch.cuda.memory_stats`: `<stat>.<pool>.<current|peak|...>`."""
        self._settle()
        out: dict[str, int] = {}
        for name in vars(_PoolStats()):
            for pool_name, pool in self._stats.items():
                stat = getattr(pool, name)
                for metric in ("current", "peak", "allocated", "freed"):
                    out[f"{name}.{pool_name}.{metric}"] = getattr(stat, metric)
        out["num_alloc_retries"] = self._num_alloc_retries
        out["num_ooms"] = self._num_ooms
        out["capacity"] = self.capacity
        return dict(sorted(out.items()))

    def snapshot(self) -> list[dict]:
        """Segments and their blocks, shaped like `torch.cuda.memory_snapshot()`."""
        self._settle()
        out = []
        for segment in sorted(self.segments, key=lambda s: s.address):
            blocks = segment.blocks()
            out.append(
                {
                    "device": self.device_index,
                    "address": segment.address,
                    "total_size": segment.size,
                    "allocated_size": sum(b.size for b in blocks if b.allocated),
                    "active_size": sum(b.size for b in blocks if b.allocated),
                    "requested_size": sum(b.requested for b in blocks if b.allocated),
                    "segment_type": "small" if segment.is_small else "large",
                    "segment_pool_id": DEFAULT_POOL if segment.pool is None else segment.pool.id,
                    "blocks": [
                        {
                            "address": b.address,
                            "size": b.size,
                            "requested_size": b.requested,
                            "state": "active_allocated" if b.allocated else "inactive",
                            "op": b.op,
                            "source": b.source,
                        }
                        for b in blocks
                    ],
                }
            )
        return out

    # -- safety: threads, re-entrant frees, interrupted operations ---------------------------
    @contextlib.contextmanager
    def _guarded(self):
        """One whole operation: under the lock, repaired first if the last one was interrupted,
        marked dirty until it finishes; queued frees are done as it leaves."""
        with self._lock:
            if self._really_busy():
                raise RuntimeError(
                    f"mtia_sim:{self.device_index}: the caching allocator was called from inside "
                    "itself (a __del__ run by a garbage collection during an allocator operation)"
                )
            try:
                self._busy, self._busy_frame = True, _frame_key(2)
                if self._dirty:
                    self._repair()
                self._dirty, self._in_flight, self._in_flight_owner = True, None, None
                yield
                self._dirty = False
            finally:
                self._busy, self._busy_frame = False, None
        if self._pending:
            self._drain()

    def _really_busy(self) -> bool:
        """`_busy` says an operation of this allocator is under way in this thread (checked
        with the lock held, so no other thread's). An interrupt can land after an operation's
        work but before its `finally` resets the flag: then no allocator frame of ours is on the
        stack, and the flag is stale. It is cleared, and the books repaired before the next
        operation, so that frees are not queued forever."""
        if not self._busy:
            return False
        frame, busy_frame = sys._getframe(1), self._busy_frame
        while frame is not None:
            if (id(frame), frame.f_code) == busy_frame:
                return True
            frame = frame.f_back
        self._busy, self._busy_frame, self._dirty = False, None, True
        return False

    def _settle(self) -> None:
        """Before reading statistics: do queued frees, repair after an interrupted operation
        (unless this thread is inside an operation, whose figures are the live ones)."""
        if self._pending:
            self._drain()
        if self._dirty:
            with self._lock:
                if self._dirty and not self._really_busy():
                    try:
                        self._busy, self._busy_frame = True, _frame_key(0)
                        self._repair()
                    finally:
                        self._busy, self._busy_frame = False, None

    def _repair(self) -> None:
        """Rebuild everything derived from the segments after an operation was interrupted
        (a KeyboardInterrupt, an exception): each segment's chain of blocks, walked by `next`
        and by address, is the truth; sizes, `prev` links, merges of free neighbours, the free
        lists and the current statistics follow from it. The block an interrupted malloc was
        handing out (or an interrupted free giving back) reached no tensor: it is free."""
        if self._in_flight is not None:
            block = self._in_flight
            owner = self._in_flight_owner
            if owner is not None and getattr(owner, "block", None) is block:
                owner.block = owner.owner_ref = None  # the hand-off did not finish
            self._in_flight_owner = None
            block.allocated, block.requested, block.op, block.source = False, 0, "", ""
            block.owner = None
            if any(queued is block for queued in self._pending):
                self._pending.remove(block)  # its free was under way: done now
            self._in_flight = None
        lists = [self._free] + [pool.free for pool in self._pools.values()]
        lists += [s.pool.free for s in self.segments if s.pool is not None]
        for free in lists:
            free[True].clear()
            free[False].clear()
        fresh = {"small_pool": _PoolStats(), "large_pool": _PoolStats()}
        for segment in self.segments:
            stats = fresh["small_pool" if segment.is_small else "large_pool"]
            stats.reserved_bytes.current += segment.size
            stats.segment.current += 1
            block, end, previous = segment.first, segment.address + segment.size, None
            while block is not None:
                following = block.next
                while following is not None and not following.allocated and not block.allocated:
                    following = following.next  # merge free neighbours
                if following is not None and not (block.address < following.address < end):
                    following = None  # a link an interrupted split left half made
                block.prev, block.next = previous, following
                block.size = (following.address if following is not None else end) - block.address
                previous, block = block, following
            for block in segment.blocks():
                if block.allocated:
                    for stat, amount in (
                        (stats.allocated_bytes, block.size), (stats.requested_bytes,
                                                              block.requested),
                        (stats.active_bytes, block.size), (stats.allocation, 1),
                        (stats.active, 1),
                    ):
                        stat.current += amount
                else:
                    bisect.insort(self._free_lists(segment)[segment.is_small],
                                  (block.size, block.address, block))
                    if block.prev is not None or block.next is not None:
                        stats.inactive_split_bytes.current += block.size
        for name in vars(_PoolStats()):
            small = getattr(fresh["small_pool"], name).current
            large = getattr(fresh["large_pool"], name).current
            for pool_name, current in (("small_pool", small), ("large_pool", large),
                                       ("all", small + large)):
                stat = getattr(self._stats[pool_name], name)
                stat.current, stat.peak = current, max(stat.peak, current)
                stat.freed = max(0, stat.allocated - current)
                stat.allocated = stat.freed + current
        self._dirty = False

    def consistency_errors(self) -> list[str]:
        """What is wrong with the allocator's bookkeeping (empty when sound): the free lists
        and the statistics against the segments' blocks. For tests."""
        self._settle()
        errors = []
        with self._lock:
            listed = {id(entry[2]) for free in [self._free] + [
                s.pool.free for s in self.segments if s.pool is not None
            ] for entry in free[True] + free[False]}
            allocated = reserved = 0
            for segment in self.segments:
                reserved += segment.size
                address = segment.address
                for block in segment.blocks():
                    if block.address != address:
                        errors.append(f"block at {block.address:#x} expected at {address:#x}")
                    address += block.size
                    if block.allocated:
                        allocated += block.size
                        if id(block) in listed:
                            errors.append(f"allocated block {block.address:#x} is listed free")
                    elif id(block) not in listed:
                        errors.append(f"free block {block.address:#x} is not in a free list")
                    if (not block.allocated and block.next is not None
                            and not block.next.allocated):
                        errors.append(f"free neighbours at {block.address:#x} not merged")
                if address != segment.address + segment.size:
                    errors.append(f"segment at {segment.address:#x} blocks do not add up")
            stats = self._stats["all"]
            if stats.allocated_bytes.current != allocated:
                errors.append(f"allocated_bytes {stats.allocated_bytes.current} != {allocated}")
            if stats.reserved_bytes.current != reserved:
                errors.append(f"reserved_bytes {stats.reserved_bytes.current} != {reserved}")
        return errors

    # -- internals ---------------------------------------------------------------------------
    def _count(self, is_small: bool, name: str, amount: int) -> None:
        """Add `amount` (negative to subtract) to a stat of one pool and of "all".

        `_Stat.add`/`sub` inlined: this runs about 14 times per tensor allocated and freed."""
        stats = self._stats
        pool = stats["small_pool" if is_small else "large_pool"]
        for stat in (getattr(stats["all"], name), getattr(pool, name)):
            stat.current += amount
            if amount >= 0:
                stat.allocated += amount
                if stat.current > stat.peak:
                    stat.peak = stat.current
            else:
                stat.freed -= amount

    def _count_block(self, is_small: bool, size: int, requested: int, sign: int) -> None:
        """A block handed out (sign +1) or given back (-1): allocated, requested and active bytes,
        and the allocation and active counts, in one pass (this runs for every op result)."""
        stats = self._stats
        for pool in (stats["all"], stats["small_pool" if is_small else "large_pool"]):
            for stat, amount in (
                (pool.allocated_bytes, size),
                (pool.requested_bytes, requested),
                (pool.active_bytes, size),
                (pool.allocation, 1),
                (pool.active, 1),
            ):
                if sign > 0:
                    stat.current += amount
                    stat.allocated += amount
                    if stat.current > stat.peak:
                        stat.peak = stat.current
                else:
                    stat.current -= amount
                    stat.freed += amount

    def _free_lists(self, segment: Segment) -> dict[bool, list]:
        return self._free if segment.pool is None else segment.pool.free

    def _take_free(self, size: int, is_small: bool, lists: dict[bool, list]) -> Block | None:
        free = lists[is_small]
        index = bisect.bisect_left(free, (size, 0))
        if index == len(free):
            return None
        _, _, block = free[index]
        limit = self.max_split_size
        if limit is not None and not is_small:  # CUDA's get_free_block, with max_split_size set
            if size < limit <= block.size:
                return None  # do not return an oversized block for a smaller request
            if size >= limit and block.size >= size + LARGE_SEGMENT:
                return None  # an oversized block serves requests within 20 MiB of its size
        del free[index]
        return block

    def _insert_free(self, block: Block) -> None:
        lists = self._free_lists(block.segment)
        bisect.insort(lists[block.segment.is_small], (block.size, block.address, block))

    def _remove_free(self, block: Block) -> None:
        free = self._free_lists(block.segment)[block.segment.is_small]
        index = bisect.bisect_left(free, (block.size, block.address))
        assert free[index][2] is block
        del free[index]

    def _new_segment(
        self, size: int, is_small: bool, requested: int, op: str, pool: PrivatePool | None = None
    ) -> Block:
        seg_size = segment_size_for(size)
        if self.reserved_bytes + seg_size > self.capacity:
            self._num_alloc_retries += 1
            self._empty_cache()
            if self.reserved_bytes + seg_size > self.capacity:
                self._num_ooms += 1
                raise torch.OutOfMemoryError(self._oom_message(requested, seg_size, op))
        segment = Segment(self._next_address, seg_size, is_small, pool=pool)
        self._next_address += seg_size
        segment.first = Block(segment, segment.address, seg_size)
        self.segments.append(segment)
        self._count(is_small, "reserved_bytes", seg_size)
        self._count(is_small, "segment", 1)
        return segment.first

    def _release(self, segment: Segment) -> int:
        self._remove_free(segment.first)
        self.segments.remove(segment)
        self._count(segment.is_small, "reserved_bytes", -segment.size)
        self._count(segment.is_small, "segment", -1)
        return segment.size

    def _split(self, block: Block, size: int) -> Block:
        remaining = block.size - size
        if block.segment.is_small:
            should_split = remaining >= MIN_BLOCK
        else:  # CUDA's should_split: blocks of max_split_size or more stay whole
            limit = self.max_split_size
            should_split = remaining > SMALL_SIZE and (limit is None or size < limit)
        if should_split:
            # Ordered so that an interruption at any point leaves a chain `_repair` can mend:
            # the `next` links and addresses are the truth, sizes and `prev` follow from them.
            rest = Block(
                block.segment, block.address + size, remaining, prev=block, next=block.next
            )
            if block.next is not None:
                block.next.prev = rest
            block.next = rest
            block.size = size
            self._insert_free(rest)
            self._count(block.segment.is_small, "inactive_split_bytes", remaining)
        return block

    def _merge(self, block: Block) -> Block:
        is_small = block.segment.is_small
        for neighbour in (block.prev, block.next):
            if neighbour is None or neighbour.allocated:
                continue
            self._remove_free(neighbour)
            self._count(is_small, "inactive_split_bytes", -neighbour.size)
            if neighbour is block.prev:
                neighbour.size += block.size
                neighbour.next = block.next
                if block.next is not None:
                    block.next.prev = neighbour
                block = neighbour
            else:
                block.size += neighbour.size
                block.next = neighbour.next
                if neighbour.next is not None:
                    neighbour.next.prev = block
        if block.prev is not None or block.next is not None:  # still a piece of a split segment
            self._count(is_small, "inactive_split_bytes", block.size)
        return block

    def _oom_message(self, requested: int, seg_size: int, op: str) -> str:
        holders: dict[str, int] = {}
        for segment in self.segments:
            for block in segment.blocks():
                if block.allocated:
                    where = f" at {short_source(block.source)}" if block.source else ""
                    key = (block.op or "unknown op") + where
                    holders[key] = holders.get(key, 0) + block.size
        top = sorted(holders.items(), key=lambda kv: -kv[1])[:5]
        lines = "\n".join(f"  {format_bytes(n):>12}  {who}" for who, n in top) or "  (nothing)"
        free = self.capacity - self.reserved_bytes
        return (
            f"mtia_sim:{self.device_index} out of memory: tried to allocate "
            f"{format_bytes(requested)} (a new {format_bytes(seg_size)} segment"
            f"{f' for {op}' if op else ''}). The device has {format_bytes(self.capacity)} in "
            f"total, {format_bytes(self.allocated_bytes)} allocated by tensors, "
            f"{format_bytes(self.reserved_bytes)} reserved by the caching allocator and "
            f"{format_bytes(free)} free.\nLargest holders of memory:\n{lines}\n"
            "Free tensors you no longer need (del them), call torch.mtia_sim.empty_cache(), "
            "use smaller batches, or raise the capacity with "
            "mtia_lab.configure(memory_capacity=...)."
        )
