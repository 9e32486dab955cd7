"""The caching allocator under what a notebook throws at it: garbage collections that free
device tensors in the middle of a split or a merge (reference cycles), several threads, and
KeyboardInterrupts at any line. After each, the bookkeeping must agree with the blocks
(`consistency_errors`), `memory_allocated` must count exactly the live blocks, and no two live
blocks may overlap. Property tests (hypothesis) drive random sequences."""

from __future__ import annotations

import gc
import sys
import threading

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mtia_lab.backend.runtime import allocator as allocator_module
from mtia_lab.backend.runtime.allocator import CachingAllocator, caching, stats

MiB = 1 << 20
SIZES = st.sampled_from([1, 512, 3000, 200_000, MiB, MiB + 1, 3 * MiB, 4 * MiB, 9 * MiB,
                         12 * MiB, 30 * MiB])


def _assert_sound(alloc: CachingAllocator, live) -> None:
    assert alloc.consistency_errors() == []
    assert alloc.allocated_bytes == sum(block.size for block in live)
    spans = sorted((b.address, b.address + b.size) for b in live)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:], strict=False))
    assert all(block.allocated for block in live)
    stats = alloc.memory_stats()
    assert stats["allocated_bytes.all.current"] == (
        stats["allocated_bytes.small_pool.current"] + stats["allocated_bytes.large_pool.current"])
    snapshot_allocated = sum(s["allocated_size"] for s in alloc.snapshot())
    assert snapshot_allocated == alloc.allocated_bytes


class _Owner:
    """What a DeviceStorage is to the allocator: frees its block when it dies."""

    def __init__(self, alloc: CachingAllocator, block) -> None:
        self.alloc, self.block, self.cycle = alloc, block, None

    def __del__(self) -> None:
        self.alloc.free(self.block)


@pytest.fixture
def frequent_gc():
    """A generation-0 collection at nearly every allocation of a Python object: collections
    run inside the allocator's own code (each Block it creates), as they can in a notebook."""
    thresholds = gc.get_threshold()
    gc.set_threshold(1, 2, 100_000)  # young generations only: the old heap is torch's
    yield
    gc.set_threshold(*thresholds)
    gc.collect()


@pytest.fixture(scope="module", autouse=True)
def _old_heap_frozen():
    """Leave torch's own objects out of every collection (gc.freeze): collections stay cheap
    while the tests below force many of them."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["malloc", "free", "cycle"]), SIZES, st.integers(0, 99)),
                min_size=1, max_size=80))
def test_frees_from_garbage_collection_inside_the_allocator(steps):
    alloc = CachingAllocator(0, 256 * MiB)
    owners: list[_Owner] = []
    thresholds = gc.get_threshold()
    gc.set_threshold(1, 2, 100_000)  # see frequent_gc
    try:
        for action, size, pick in steps:
            if action == "malloc":
                try:
                    owners.append(_Owner(alloc, alloc.malloc(size)))
                except torch.OutOfMemoryError:
                    pass
            elif owners:
                owner = owners.pop(pick % len(owners))
                if action == "cycle":  # only the garbage collector can free it now
                    owner.cycle = owner
                del owner
    finally:
        gc.set_threshold(*thresholds)
    gc.collect()
    _assert_sound(alloc, [owner.block for owner in owners])
    owners.clear()
    gc.collect()
    _assert_sound(alloc, [])
    alloc.empty_cache()
    assert alloc.reserved_bytes == 0


def test_a_free_that_arrives_during_a_split_is_deferred_and_done():
    """White box: what a collection inside `_split` does, at that exact moment."""
    alloc = CachingAllocator(0, 64 * MiB)
    victim = alloc.malloc(4096)
    insert_free = alloc._insert_free
    arrived = []

    def insert_free_with_a_collection(block):
        if not arrived:
            arrived.append(True)
            alloc.free(victim)  # re-entrant: must not touch the free lists now
            assert victim.allocated  # deferred
        insert_free(block)

    alloc._insert_free = insert_free_with_a_collection
    kept = alloc.malloc(MiB // 2)
    assert arrived and not victim.allocated  # done when malloc left
    del alloc._insert_free
    _assert_sound(alloc, [kept])


def test_device_tensors_in_reference_cycles_under_frequent_gc(frequent_gc):
    gc.collect()
    device = "mtia_sim"
    allocator = torch.mtia_sim  # the device module
    before = allocator.memory_allocated()
    kept = []
    for i in range(200):
        x = torch.empty(1 + (i * 7919) % 5000, device=device)
        holder = [x]
        holder.append(holder)  # a cycle: freed by a collection, at any allocation
        if i % 5 == 0:
            kept.append(x)
        del x, holder
    gc.collect()
    from mtia_lab.backend.runtime.device_state import RUNTIME

    alloc = RUNTIME.devices[0].allocator
    assert alloc.consistency_errors() == []
    expected = sum(t.untyped_storage().nbytes() for t in kept)
    rounded = sum(allocator_module.round_size(t._storage.nbytes) for t in kept)
    assert expected <= allocator.memory_allocated() - before <= rounded + 4 * MiB
    kept.clear()
    gc.collect()
    assert allocator.memory_allocated() == before


def test_threads_share_the_allocator():
    alloc = CachingAllocator(0, 16 << 30)
    errors: list[BaseException] = []
    live = []
    lock = threading.Lock()

    def work(seed: int) -> None:
        try:
            mine = []
            for i in range(300):
                size = [512, 3000, MiB + 1, 4 * MiB, 12 * MiB][(seed * 31 + i * 17) % 5]
                mine.append(alloc.malloc(size))
                if (seed + i) % 3:
                    alloc.free(mine.pop((seed + i) % len(mine)))
            with lock:
                live.extend(mine)
        except BaseException as error:  # noqa: BLE001  (reported below)
            errors.append(error)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    _assert_sound(alloc, live)


def test_device_tensors_from_threads():
    gc.collect()
    before = torch.mtia_sim.memory_allocated()
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            x = torch.randn(64, device="mtia_sim")
            for i in range(100):
                x = (x * 0.5 + torch.ones(1 + (seed + i) % 300, 1, device="mtia_sim")).sum(0)
        except BaseException as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    gc.collect()
    from mtia_lab.backend.runtime.device_state import RUNTIME

    assert RUNTIME.devices[0].allocator.consistency_errors() == []
    assert torch.mtia_sim.memory_allocated() == before


# The allocator's internal steps; the entry points' own bookkeeping lines (lock, busy and dirty
# flags) are the part an interrupt is assumed not to split.
_INTERNAL = {"_malloc", "_free_block", "_split", "_merge", "_take_free", "_insert_free",
             "_remove_free", "_new_segment", "_count", "_count_block", "_release",
             "_empty_cache", "_private"}
_INTERNAL_FILES = {caching.__file__, stats.__file__}  # the policy's steps and its counting


class _InterruptAt:
    """A trace function that raises KeyboardInterrupt at the n-th line the allocator's
    internals execute: an interrupt at an arbitrary point of an operation."""

    def __init__(self, n: int) -> None:
        self.left = n
        self.fired = False

    def __call__(self, frame, event, arg):
        if frame.f_code.co_filename not in _INTERNAL_FILES:
            return None
        if frame.f_code.co_name not in _INTERNAL:
            return None
        return self._line

    def _line(self, frame, event, arg):
        if event == "line" and not self.fired:
            self.left -= 1
            if self.left <= 0:
                self.fired = True
                raise KeyboardInterrupt
        return self._line


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), SIZES, st.integers(0, 99), st.integers(1, 60)),
                min_size=1, max_size=25))
def test_keyboard_interrupt_at_any_line_leaves_a_sound_allocator(steps):
    alloc = CachingAllocator(0, 128 * MiB)
    live = []
    for do_malloc, size, pick, line in steps:
        interrupt = _InterruptAt(line)
        sys.settrace(interrupt)
        try:
            if do_malloc or not live:
                block = alloc.malloc(size)
                sys.settrace(None)
                live.append(block)
            else:
                block = live.pop(pick % len(live))  # the tensor is gone, whatever happens
                alloc.free(block)
        except (KeyboardInterrupt, torch.OutOfMemoryError):
            pass
        finally:
            sys.settrace(None)
        _assert_sound(alloc, live)
    for block in live:
        alloc.free(block)
    _assert_sound(alloc, [])
