"""The caching policy: which block serves a request, and what happens to a freed one.

In the spirit of PyTorch's CUDA allocator. Why cache: asking the driver for memory (cudaMalloc,
or its MTIA twin) is slow and synchronises, so PyTorch reserves *segments* from the device and
carves them into *blocks* itself (blocks.py):

- sizes are rounded up to 512 bytes, so blocks are easy to reuse;
- requests of at most 1 MiB come from the *small pool* (2 MiB segments), larger ones from the
  *large pool* (20 MiB segments, or the rounded size itself for requests of 10 MiB and more);
- a request takes the smallest cached free block that fits (best fit); if the block is much
  larger it is *split* and the remainder stays cached;
- a freed block is *merged* with free neighbours of its segment and stays reserved, so the next
  request of that size costs nothing; `empty_cache` returns whole free segments to the device;
- when the device is full, cached free segments are released and the request retried once;
  if it still does not fit, `torch.OutOfMemoryError` says what holds the memory (stats.py).

*Private pools* serve graph captures (graph_capture.py), as in CUDA: while a graph captures, its
requests are served only from segments of its own pool, and blocks freed there go back to that
pool, never to the shared cache, so the addresses a captured graph uses stay reserved for it until
the pool is released (`release_pool`, when no graph uses it any more). Graphs may share a pool.

Every entry point runs as one guarded operation (safety.py: threads, frees from a garbage
collection inside the allocator, interrupts); the counters live in stats.py.
"""

from __future__ import annotations

import bisect
import itertools
import threading

import torch

from .blocks import (
    DEVICE_BASE_ADDRESS,
    LARGE_SEGMENT,
    MAX_SPLIT_SIZE,
    MIN_BLOCK,
    SMALL_SIZE,
    Block,
    PoolId,
    PrivatePool,
    Segment,
    _OwnerRef,
    _reclaim_orphan,
    round_size,
    segment_size_for,
)
from .safety import InterruptSafety, _frame_key
from .stats import AllocatorStatistics, _PoolStats


class CachingAllocator(AllocatorStatistics, InterruptSafety):
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

    # -- internals ---------------------------------------------------------------------------
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
