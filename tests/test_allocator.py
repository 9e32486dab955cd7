"""The caching allocator: rounding, pools, split/merge, reuse, stats, snapshot, OOM."""

import gc

import pytest
import torch

import mtia_lab
from mtia_lab.backend.runtime.allocator import (
    LARGE_SEGMENT,
    MIN_BLOCK,
    SMALL_SEGMENT,
    CachingAllocator,
    round_size,
)

MiB = 1 << 20


def test_sizes_round_up_to_512_bytes():
    assert round_size(1) == MIN_BLOCK
    assert round_size(512) == 512
    assert round_size(513) == 1024


def test_small_requests_share_a_2mib_segment_and_split():
    alloc = CachingAllocator(0, 64 * MiB)
    a, b = alloc.malloc(100), alloc.malloc(1000)
    assert a.segment is b.segment and a.segment.size == SMALL_SEGMENT
    assert b.address == a.address + 512
    assert alloc.allocated_bytes == 512 + 1024
    assert alloc.reserved_bytes == SMALL_SEGMENT


def test_large_requests_use_20mib_segments_and_big_ones_their_own():
    alloc = CachingAllocator(0, 256 * MiB)
    medium = alloc.malloc(3 * MiB)
    assert medium.segment.size == LARGE_SEGMENT and not medium.segment.is_small
    huge = alloc.malloc(33 * MiB)
    assert huge.segment.size == 34 * MiB  # rounded to 2 MiB


def test_free_blocks_are_reused_and_merged():
    alloc = CachingAllocator(0, 64 * MiB)
    a, b, c = alloc.malloc(512), alloc.malloc(512), alloc.malloc(512)
    address = b.address
    alloc.free(b)
    again = alloc.malloc(400)
    assert again.address == address  # best fit reuses the hole
    alloc.free(a)
    alloc.free(again)
    alloc.free(c)
    (segment,) = alloc.snapshot()
    assert len(segment["blocks"]) == 1  # everything merged back into one free block
    assert segment["blocks"][0]["state"] == "inactive"
    assert alloc.reserved_bytes == SMALL_SEGMENT  # still cached
    assert alloc.empty_cache() == SMALL_SEGMENT
    assert alloc.reserved_bytes == 0


def test_double_free_is_an_error():
    alloc = CachingAllocator(0, 64 * MiB)
    block = alloc.malloc(10)
    alloc.free(block)
    with pytest.raises(RuntimeError, match="double free"):
        alloc.free(block)


def test_stats_track_current_and_peak():
    alloc = CachingAllocator(0, 64 * MiB)
    blocks = [alloc.malloc(1024) for _ in range(4)]
    for block in blocks:
        alloc.free(block)
    stats = alloc.memory_stats()
    assert stats["allocated_bytes.all.current"] == 0
    assert stats["allocated_bytes.all.peak"] == 4 * 1024
    assert stats["allocation.all.allocated"] == 4
    assert stats["allocated_bytes.small_pool.peak"] == 4 * 1024
    alloc.reset_peak_stats()
    assert alloc.memory_stats()["allocated_bytes.all.peak"] == 0


def test_tensor_lifetime_drives_device_memory(clean_memory):
    before = torch.mtia_sim.memory_allocated()
    x = torch.empty(1000, device="mtia_sim")  # 4000 bytes -> one 4096-byte block
    assert torch.mtia_sim.memory_allocated() - before == 4096
    view = x[10:20]
    assert torch.mtia_sim.memory_allocated() - before == 4096  # views alias, no new memory
    assert mtia_lab.storage_of(view) is mtia_lab.storage_of(x)
    del x
    gc.collect()
    assert torch.mtia_sim.memory_allocated() - before == 4096  # the view keeps it alive
    del view
    gc.collect()
    assert torch.mtia_sim.memory_allocated() == before


def test_results_of_ops_are_allocated_on_their_device(clean_memory):
    a = torch.randn(256, device="mtia_sim:1")
    before0 = torch.mtia_sim.memory_allocated(0)
    before1 = torch.mtia_sim.memory_allocated(1)
    b = a * 2
    assert torch.mtia_sim.memory_allocated(1) - before1 == 1024
    assert torch.mtia_sim.memory_allocated(0) == before0
    del a, b


def test_snapshot_names_the_op_and_user_line(clean_memory):
    x = torch.ones(3000, device="mtia_sim")  # noqa: F841  (the line the snapshot must name)
    line = x  # keep
    blocks = [
        b for seg in torch.mtia_sim.memory_snapshot(0) for b in seg["blocks"]
        if b["state"] == "active_allocated" and b["requested_size"] == 12000
    ]
    assert blocks, "the 12000-byte block should be in the snapshot"
    assert blocks[-1]["op"].startswith("aten::empty")
    assert blocks[-1]["source"].endswith("test_allocator.py:" + str(_line_of("torch.ones(3000")))
    del line


def _line_of(text: str) -> int:
    with open(__file__) as f:
        for number, line in enumerate(f, 1):
            if text in line and "_line_of" not in line:
                return number
    raise AssertionError(text)


def test_out_of_memory_explains_and_keeps_tensors(clean_memory):
    mtia_lab.configure(memory_capacity=64 * MiB)
    try:
        keep = torch.full((4 * MiB,), 3.0, device="mtia_sim")  # 16 MiB
        with pytest.raises(torch.OutOfMemoryError) as info:
            torch.empty(60 * MiB // 4, device="mtia_sim")
        message = str(info.value)
        assert "out of memory" in message and "16.00 MiB" in message
        assert "aten::full" in message or "aten::empty" in message
        assert "empty_cache" in message and "memory_capacity" in message
        assert torch.equal(keep.cpu(), torch.full((4 * MiB,), 3.0))
        assert torch.mtia_sim.memory_stats()["num_ooms"] >= 1
        # An op whose result does not fit leaves its input intact too.
        with pytest.raises(torch.OutOfMemoryError):
            keep.repeat(4)
        assert torch.equal(keep.cpu(), torch.full((4 * MiB,), 3.0))
        del keep
    finally:
        mtia_lab.configure(memory_capacity=mtia_lab.backend.runtime.device_state.DEFAULT_CAPACITY)


def test_empty_cache_returns_segments(clean_memory):
    x = torch.empty(5 * MiB, device="mtia_sim")
    reserved = torch.mtia_sim.memory_reserved()
    del x
    gc.collect()
    assert torch.mtia_sim.memory_reserved() == reserved  # cached
    torch.mtia_sim.empty_cache()
    assert torch.mtia_sim.memory_reserved() < reserved
    assert torch.mtia_sim.max_memory_reserved() >= reserved


def test_mem_get_info_and_summary():
    free, total = torch.mtia_sim.mem_get_info()
    assert total == torch.mtia_sim.get_device_properties().total_memory
    assert free == total - torch.mtia_sim.memory_reserved()
    assert "memory summary" in torch.mtia_sim.memory_summary()


def _fill(alloc, size: int) -> list:
    """Blocks of `size` until the allocator runs out (it must, with OutOfMemoryError)."""
    blocks = []
    with pytest.raises(torch.OutOfMemoryError):
        while True:
            blocks.append(alloc.malloc(size))
    return blocks


def test_medium_requests_reuse_the_remainder_of_a_split_segment_as_cuda_does():
    """CUDA's default max_split_size is unlimited: 4 MiB tensors share 20 MiB segments (five
    to a segment) and fill the device, instead of one segment each (OOM at 20% of capacity)."""
    alloc = CachingAllocator(0, 200 * MiB)
    blocks = _fill(alloc, 4 * MiB)
    assert len(blocks) == 50
    assert {b.segment.size for b in blocks} == {LARGE_SEGMENT}
    assert len({id(b.segment) for b in blocks}) == 10
    for block in blocks:
        alloc.free(block)
    # A cached free block much larger than the request is split too (no size cap by default).
    big = alloc.malloc(40 * MiB)
    alloc.free(big)
    piece = alloc.malloc(4 * MiB)
    assert piece.segment is big.segment


def test_max_split_size_keeps_oversized_blocks_whole_as_cuda_does():
    """With max_split_size set (CUDA's max_split_size_mb), blocks of that size or more are never
    split, and serve only requests within 20 MiB of their size (c10 get_free_block)."""
    alloc = CachingAllocator(0, 400 * MiB)
    alloc.max_split_size = 10 * MiB
    big = alloc.malloc(60 * MiB)
    alloc.free(big)
    small = alloc.malloc(4 * MiB)  # under the limit: not from the oversized block
    assert small.segment is not big.segment
    near = alloc.malloc(45 * MiB)  # 60 < 45 + 20: the oversized block serves it, whole
    assert near.segment is big.segment and near.size == 60 * MiB
    alloc.free(near)
    far = alloc.malloc(30 * MiB)  # 60 >= 30 + 20: too wasteful, a new segment
    assert far.segment is not big.segment


def test_8mib_tensors_fill_a_256mib_device_as_cudas_rules_give():
    """CUDA's rules (c10/cuda/CUDACachingAllocator.cpp: get_allocation_size, should_split,
    and no smaller segment after a failed cudaMalloc): an 8 MiB request (1 MiB < size < 10 MiB)
    opens a 20 MiB segment, which holds two and a 4 MiB tail that no 8 MiB request can use.
    So 12 segments (240 MiB reserved) hold 24 tensors (192 MiB, 75%), and the 13th segment does
    not fit the 16 MiB left: out of memory, on CUDA as here."""
    alloc = CachingAllocator(0, 256 * MiB)
    blocks = _fill(alloc, 8 * MiB)
    assert len(blocks) == 24
    assert len({id(b.segment) for b in blocks}) == 12
    assert {b.segment.size for b in blocks} == {LARGE_SEGMENT}
    tails = alloc.malloc(4 * MiB), alloc.malloc(4 * MiB)  # the tails serve smaller requests
    assert all(t.segment.size == LARGE_SEGMENT for t in tails)
