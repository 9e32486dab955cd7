"""Interrupt and re-entrancy safety of the allocator: deferred frees and repair.

Like CUDA's allocator (one mutex per device), the allocator is safe to call from several threads,
and from inside itself: a garbage collection that runs in the middle of a split or a merge may
free device tensors (reference cycles), which calls `free` again. A free that finds the allocator
busy is *deferred*: queued, and done by whoever holds the allocator as it leaves (`_drain`). A
KeyboardInterrupt (or any exception) in the middle of an operation leaves it marked *dirty*; the
next call rebuilds the free lists and the statistics from the segments, which are the truth
(`_repair`). `InterruptSafety` is mixed into CachingAllocator (caching.py), whose fields it uses.
"""

from __future__ import annotations

import bisect
import contextlib
import sys

from .stats import _PoolStats


def _frame_key(depth: int) -> tuple[int, object]:
    """Which frame set `_busy` (its id and code: the frame itself would keep its locals, a
    tensor's storage among them, alive after an interrupt)."""
    frame = sys._getframe(depth + 1)
    return id(frame), frame.f_code


class InterruptSafety:
    """The safety half of CachingAllocator: one operation at a time, frees that arrive during
    one queued, and the books rebuilt after an interrupted one."""

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
