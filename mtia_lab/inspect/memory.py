"""The device memory snapshot as typed records: segments (reservations) and their blocks.

`torch.mtia_sim.memory_snapshot()` returns what `torch.cuda.memory_snapshot()` returns: a list
of segment dicts, each with its blocks in address order. `MemorySnapshot.from_snapshot` turns
that recorded data (or the same dicts loaded back from JSON) into frozen records the memory
renderers read; nothing here asks the allocator anything, so a saved snapshot draws the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ALLOCATED = "active_allocated"
_IPYKERNEL_CELL = re.compile(r"/ipykernel_\d+/\d+\.py:(\d+)$")


@dataclass(frozen=True)
class BlockInfo:
    """A piece of a segment: handed to a tensor's storage (allocated) or cached (free)."""

    address: int
    offset: int  # bytes from the start of its segment
    size: int  # rounded size the allocator reserved for it
    requested_size: int  # bytes the op asked for (0 when free)
    state: str  # "active_allocated" or "inactive"
    op: str  # aten op that allocated it ("" when free)
    source: str  # user's file:line that allocated it, when recorded

    @property
    def allocated(self) -> bool:
        return self.state == ALLOCATED

    @property
    def short_source(self) -> str:
        """file:line without the folder; a notebook cell's file (its name changes every kernel
        start) becomes `cell:LINE`, so saved output stays the same."""
        if not self.source:
            return ""
        cell = _IPYKERNEL_CELL.search(self.source)
        if cell:
            return f"cell:{cell.group(1)}"
        return self.source.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class SegmentInfo:
    """One reservation from the device: a run of addresses the allocator carves into blocks."""

    device: int
    address: int
    total_size: int
    segment_type: str  # "small" (2 MiB segments, requests <= 1 MiB) or "large"
    pool_id: tuple[int, int]  # (0, 0): the shared cache; else a graph's private pool
    blocks: tuple[BlockInfo, ...]

    @property
    def allocated_size(self) -> int:
        return sum(b.size for b in self.blocks if b.allocated)

    @property
    def requested_size(self) -> int:
        return sum(b.requested_size for b in self.blocks if b.allocated)


@dataclass(frozen=True)
class MemorySnapshot:
    """Every segment of the snapshot, in the order recorded (device, then address)."""

    segments: tuple[SegmentInfo, ...]

    @classmethod
    def from_snapshot(cls, snapshot) -> MemorySnapshot:
        """From `torch.mtia_sim.memory_snapshot()`'s list (or `{"segments": [...]}`)."""
        if isinstance(snapshot, MemorySnapshot):
            return snapshot
        if isinstance(snapshot, dict) and "segments" in snapshot:
            snapshot = snapshot["segments"]
        if not isinstance(snapshot, (list, tuple)):
            raise TypeError(
                f"expected a memory snapshot (a list of segment dicts), got "
                f"{type(snapshot).__name__}: pass torch.mtia_sim.memory_snapshot()."
            )
        return cls(tuple(_segment(i, s) for i, s in enumerate(snapshot)))

    @property
    def blocks(self) -> list[BlockInfo]:
        return [b for s in self.segments for b in s.blocks]

    @property
    def reserved(self) -> int:
        return sum(s.total_size for s in self.segments)

    @property
    def allocated(self) -> int:
        return sum(s.allocated_size for s in self.segments)

    @property
    def requested(self) -> int:
        return sum(s.requested_size for s in self.segments)


def memory_snapshot(device=None) -> MemorySnapshot:
    """The allocator's state now, as records (all devices, or one)."""
    import torch

    return MemorySnapshot.from_snapshot(torch.mtia_sim.memory_snapshot(device))


def _segment(index: int, raw) -> SegmentInfo:
    try:
        address = int(raw["address"])
        blocks = tuple(_block(b, address) for b in raw["blocks"])
        return SegmentInfo(
            int(raw.get("device", 0)), address, int(raw["total_size"]),
            str(raw.get("segment_type", "")), tuple(raw.get("segment_pool_id", (0, 0))), blocks,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"memory snapshot segment {index} is not a segment dict ({exc!r}): each needs "
            "'address', 'total_size' and 'blocks' with 'address', 'size' and 'state', as "
            "torch.mtia_sim.memory_snapshot() gives."
        ) from exc


def _block(raw, segment_address: int) -> BlockInfo:
    source = raw.get("source", "")
    frames = raw.get("frames")  # torch.cuda snapshots record a stack instead
    if not source and frames:
        source = f"{frames[0].get('filename', '?')}:{frames[0].get('line', '?')}"
    address = int(raw["address"])
    return BlockInfo(
        address, address - segment_address, int(raw["size"]), int(raw.get("requested_size", 0)),
        str(raw["state"]), str(raw.get("op", "")), str(source),
    )
