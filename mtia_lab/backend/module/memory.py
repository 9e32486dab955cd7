"""`torch.mtia_sim.memory`: the memory tools of `torch.cuda.memory`, on the simulated allocator.

- `_snapshot()` returns the dict `torch.cuda.memory._snapshot()` returns (segments with
  `stream` and `frames`, `device_traces`), so PyTorch's own viewers read it:
  `torch.cuda._memory_viz.segments / memory / trace / segsum / trace_plot / segment_plot` and
  https://pytorch.org/memory_viz (the file `_dump_snapshot()` writes).
- `_record_memory_history()` records every allocator action of every device (alloc,
  free_requested, free_completed, segment_alloc, segment_free, oom) with the Python stack, as
  CUDA's does; `enabled=None` stops.
- `attach_out_of_memory_observer(fn)`: `fn(device, requested, device_allocated, device_free)` on
  every OOM, before the OutOfMemoryError propagates.
- `MemPool` / `use_mem_pool`: a private pool of the caching allocator that allocations in the
  block come from (the pools graph captures use, runtime/allocator/).
- `memory_stats_as_nested_dict`.

History and observers watch the allocator by wrapping the `malloc`, `free` and `empty_cache` of
each device's CachingAllocator *instance* while they are on: the allocator itself stays
unaware of them, and costs nothing more when they are off. Devices added later by
`configure(device_count=...)` are watched from the next `_record_memory_history` /
`attach_out_of_memory_observer` call.
"""

from __future__ import annotations

import contextlib
import itertools
import pickle
import sys
import time
from collections import deque

import torch

from ..aten import tensor as device_tensor
from ..runtime.device_state import RUNTIME
from ..runtime.streams import _device_index, current_stream

_HISTORY: dict = {"enabled": None, "context": None, "stacks": "python", "max_entries": 0}
_TRACES: dict[int, deque] = {}  # device index -> trace entries (dicts, as CUDA's TraceEntry)
_FRAMES: dict[tuple[int, int], list[dict]] = {}  # (device, block address) -> allocation stack
_OOM_OBSERVERS: list = []
_MAX_FRAMES = 64


# -- snapshots -----------------------------------------------------------------------------------
def _frames_of(block: dict, device: int) -> list[dict]:
    recorded = _FRAMES.get((device, block["address"]))
    if recorded is not None:
        return recorded
    source = block.get("source") or ""
    filename, _, line = source.rpartition(":")
    if not filename or not line.isdigit():
        return []
    return [{"filename": filename, "line": int(line), "name": block.get("op") or "<unknown>"}]


def segments(device=None) -> list[dict]:
    """The allocator's segments as torch.cuda.memory_snapshot() gives them: with `stream`,
    `is_expandable` and each block's `frames` (from the recorded history, else from the source
    line the allocation was attributed to)."""
    states = RUNTIME.devices if device is None else [RUNTIME.device(_device_index(device))]
    out = []
    for state in states:
        for segment in state.allocator.snapshot():
            segment = dict(segment, stream=0, is_expandable=False)  # default stream: id 0
            segment["blocks"] = [
                dict(block, frames=_frames_of(block, state.index)) for block in segment["blocks"]
            ]
            out.append(segment)
    return out


def _snapshot(device=None, augment_with_fx_traces: bool = False) -> dict:
    """What torch.cuda.memory._snapshot() returns, for the simulated devices."""
    traces = [list(_TRACES.get(state.index, ())) for state in RUNTIME.devices]
    return {
        "segments": segments(device),
        "device_traces": traces,
        "allocator_settings": {"PYTORCH_MTIA_SIM_ALLOC_CONF": "simulated caching allocator"},
    }


def _dump_snapshot(filename: str = "dump_snapshot.pickle",
                   augment_with_fx_traces: bool = False) -> None:
    """Pickle `_snapshot()` to `filename`: the file https://pytorch.org/memory_viz opens."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(augment_with_fx_traces=augment_with_fx_traces), f)


def memory_stats_as_nested_dict(device=None) -> dict:
    """memory_stats() as nested dicts: {"allocated_bytes": {"all": {"current": ...}}}."""
    flat = RUNTIME.device(_device_index(device)).allocator.memory_stats()
    nested: dict = {}
    for key, value in flat.items():
        *path, last = key.split(".")
        node = nested
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return nested


# -- history and observers ----------------------------------------------------------------------
def _stack() -> list[dict]:
    """The Python stack of the allocation, innermost first (CUDA's `frames`)."""
    frames, frame = [], sys._getframe(2)
    while frame is not None and len(frames) < _MAX_FRAMES:
        code = frame.f_code
        frames.append({"filename": code.co_filename, "line": frame.f_lineno, "name": code.co_name})
        frame = frame.f_back
    return frames


def _record(device: int, action: str, **fields) -> None:
    if _HISTORY["enabled"] != "all":
        return
    trace = _TRACES.setdefault(device, deque(maxlen=_HISTORY["max_entries"] or None))
    entry = {"action": action, "stream": current_stream(device).stream_id,
             "time_us": int(time.time() * 1e6), **fields}
    entry.setdefault("frames", [])
    trace.append(entry)


def _segment_changes(allocator, before: dict[int, int]) -> None:
    """Trace segment_alloc / segment_free from the segments before and after an action."""
    after = {s.address: s.size for s in allocator.segments}
    index = allocator.device_index
    for address, size in before.items():
        if address not in after:
            _record(index, "segment_free", addr=address, size=size)
    for address, size in after.items():
        if address not in before:
            _record(index, "segment_alloc", addr=address, size=size)


def _watch(allocator) -> None:
    if "malloc" in vars(allocator):
        return
    cls = type(allocator)

    def malloc(nbytes, op="", source="", pool=None, owner=None):
        before = {s.address: s.size for s in allocator.segments}
        try:
            block = cls.malloc(allocator, nbytes, op, source, pool, owner)
        except torch.OutOfMemoryError:
            free = allocator.capacity - allocator.reserved_bytes
            _record(allocator.device_index, "oom", size=nbytes, device_free=free,
                    frames=_stack() if _HISTORY["context"] else [])
            for observer in list(_OOM_OBSERVERS):
                observer(allocator.device_index, nbytes, allocator.allocated_bytes, free)
            raise
        _segment_changes(allocator, before)
        if _HISTORY["enabled"]:
            frames = _stack() if _HISTORY["context"] else []
            _FRAMES[(allocator.device_index, block.address)] = frames
            _record(allocator.device_index, "alloc", addr=block.address, size=block.size,
                    frames=frames)
        return block

    def free(block):
        address, size = block.address, block.size
        before = {s.address: s.size for s in allocator.segments}
        frames = _FRAMES.pop((allocator.device_index, address), [])
        _record(allocator.device_index, "free_requested", addr=address, size=size, frames=frames)
        cls.free(allocator, block)
        _record(allocator.device_index, "free_completed", addr=address, size=size, frames=frames)
        _segment_changes(allocator, before)

    def empty_cache():
        before = {s.address: s.size for s in allocator.segments}
        released = cls.empty_cache(allocator)
        _segment_changes(allocator, before)
        return released

    allocator.malloc, allocator.free, allocator.empty_cache = malloc, free, empty_cache


def _unwatch_if_idle() -> None:
    if _HISTORY["enabled"] or _OOM_OBSERVERS:
        return
    for state in RUNTIME.devices:
        for name in ("malloc", "free", "empty_cache"):
            vars(state.allocator).pop(name, None)


def _record_memory_history(enabled="all", context="all", stacks="python",
                           max_entries: int = sys.maxsize, device=None, **_ignored) -> None:
    """Start (enabled="all": every action; "state": only the stacks of live blocks) or stop
    (None) recording, for every simulated device, as torch.cuda.memory._record_memory_history.
    `device` is accepted for CUDA code; the history covers all devices, as CUDA's does."""
    if isinstance(enabled, bool):  # the legacy signature: _record_memory_history(True)
        enabled = "all" if enabled else None
    if enabled not in (None, "state", "all"):
        raise ValueError(f'enabled must be None, "state" or "all", got {enabled!r}')
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f'context must be None, "state", "alloc" or "all", got {context!r}')
    if stacks not in ("python", "all"):
        raise ValueError(f'stacks must be "python" or "all", got {stacks!r}')
    if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
        raise ValueError(f"max_entries must be a positive int, got {max_entries!r}")
    _HISTORY.update(enabled=enabled, context=context, stacks=stacks,
                    max_entries=min(max_entries, 1 << 40))
    if enabled is None:
        _TRACES.clear()
        _FRAMES.clear()
        _unwatch_if_idle()
        return
    for state in RUNTIME.devices:
        _watch(state.allocator)


def attach_out_of_memory_observer(observer) -> None:
    """Call `observer(device, requested_bytes, device_allocated, device_free)` on every OOM."""
    if not callable(observer):
        raise TypeError(f"observer must be callable, got {observer!r}")
    _OOM_OBSERVERS.append(observer)
    for state in RUNTIME.devices:
        _watch(state.allocator)


# -- memory pools --------------------------------------------------------------------------------
_pool_ids = itertools.count(1)


class MemPool:
    """A private pool of the caching allocator (shaped like torch.cuda.MemPool): allocations
    inside `use_mem_pool(pool)` come from its segments, and its cached memory is kept for it
    (not shared) until the pool object is deleted. `allocator` (a custom allocator), `use_on_oom`
    and `no_split` of CUDA's MemPool are not simulated: passing one raises."""

    def __init__(self, allocator=None, use_on_oom: bool = False, no_split: bool = False) -> None:
        if allocator is not None or use_on_oom or no_split:
            raise NotImplementedError(
                "MemPool(allocator=..., use_on_oom=..., no_split=...) is not simulated: the "
                "simulated device has one caching allocator; use MemPool() for a private pool."
            )
        self._id = (1, next(_pool_ids))  # (1, n): CUDA's user-created pool ids, apart from graphs'
        self._devices: set[int] = set()
        self._users = 0

    @property
    def id(self) -> tuple[int, int]:
        return self._id

    def use_count(self) -> int:
        """How many users hold the pool: the pool object itself, plus active use_mem_pool."""
        return 1 + self._users

    def _retain(self, index: int) -> None:
        if index not in self._devices:
            RUNTIME.device(index).allocator.retain_pool(self._id)
            self._devices.add(index)

    def snapshot(self, include_traces: bool = True) -> list[dict]:
        """The segments of this pool, on every device."""
        return [s for s in segments() if tuple(s["segment_pool_id"]) == self._id]

    def __del__(self) -> None:
        try:
            for index in self._devices:
                RUNTIME.devices[index].allocator.release_pool(self._id)
        except (AttributeError, IndexError, TypeError, KeyError):
            pass  # interpreter shutdown or the device was removed


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device=None):
    """Allocations on `device` (default: the current one) inside the block come from `pool`."""
    if not isinstance(pool, MemPool):
        raise TypeError(f"use_mem_pool expects a torch.mtia_sim.MemPool, got {pool!r}")
    index = _device_index(device)
    RUNTIME.device(index)
    pool._retain(index)
    previous = device_tensor._ALLOCATION_ROUTE

    def route(device_index, nbytes, host_ptr, op, source):
        if device_index != index:  # another device: as if no pool were active there
            if previous is not None:
                return previous(device_index, nbytes, host_ptr, op, source)
            return RUNTIME.devices[device_index].allocator.malloc(nbytes, op, source)
        return RUNTIME.devices[index].allocator.malloc(nbytes, op, source, pool=pool.id)

    device_tensor.set_allocation_route(route)
    pool._users += 1
    try:
        yield
    finally:
        pool._users -= 1
        device_tensor.set_allocation_route(previous)
