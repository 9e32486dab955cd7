"""A caching allocator for one simulated device, in the spirit of PyTorch's CUDA allocator.

Addresses here are simulated device addresses; the bytes of a tensor live in host memory owned by
the tensor (aten/tensor.py). The allocator only decides *where on the device* they would live,
which is what the memory statistics and snapshots report. Reading order, one job a file:

- blocks.py   the data structures (blocks, segments, private pools) and the size rules;
- caching.py  `CachingAllocator`: the caching policy (best fit, split, merge, pools, empty_cache);
- stats.py    the statistics and what is read from them (memory_stats, snapshot, OOM message);
- safety.py   threads, frees arriving during an operation, repair after an interrupted one.
"""

from .blocks import (
    DEFAULT_POOL,
    LARGE_SEGMENT,
    MIN_BLOCK,
    SMALL_SEGMENT,
    SMALL_SIZE,
    Block,
    PoolId,
    PrivatePool,
    Segment,
    format_bytes,
    round_size,
    segment_size_for,
)
from .caching import CachingAllocator

__all__ = [
    "DEFAULT_POOL", "LARGE_SEGMENT", "MIN_BLOCK", "SMALL_SEGMENT", "SMALL_SIZE", "Block",
    "CachingAllocator", "PoolId", "PrivatePool", "Segment", "format_bytes", "round_size",
    "segment_size_for",
]
