"""The allocator's statistics, and what is read from them: `memory_stats`, the snapshot, the
out-of-memory message.

The counters are those of `torch.cuda.memory_stats` (current, peak, allocated and freed, per
pool: "all", "small_pool", "large_pool"). `AllocatorStatistics` is mixed into CachingAllocator
(caching.py): the caching policy counts every block it hands out or takes back here, and the
readers settle queued frees and interrupted operations first (safety.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ....source import short_source
from .blocks import DEFAULT_POOL, format_bytes


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


class AllocatorStatistics:
    """The statistics half of CachingAllocator: counting, and the reports read from the counts.
    Uses the allocator's `_stats`, `segments`, `capacity` and `_settle` (safety.py)."""

    # -- statistics ----------------------------------------------------------------------
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

    # -- counting (the caching policy calls these on every block) ----------------------
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
