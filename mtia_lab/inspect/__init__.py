"""Data models of what a tensor or the device looks like: plain records the viz renderers read.

Nothing here draws; everything here can be checked against what PyTorch itself computes.
"""

from __future__ import annotations

from .layout import LayoutError, StridedLayout, layout_from_record, layout_of, strided_layout
from .memory import BlockInfo, MemorySnapshot, SegmentInfo, memory_snapshot

__all__ = [
    "BlockInfo", "LayoutError", "MemorySnapshot", "SegmentInfo", "StridedLayout",
    "layout_from_record", "layout_of", "memory_snapshot", "strided_layout",
]
