"""`torch.mtia_sim`: the device module, shaped like `torch.mtia` and `torch.cuda`.

Code written for `torch.mtia` or `torch.cuda` should read the same with `torch.mtia_sim`.
Everything here is a thin layer over the runtime state (device_state.py), the allocator
(allocator/) and the streams (streams.py).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from ..._compat import DEVICE_NAME
from ..aten.graph_capture import (
    GraphCaptureError,
    is_current_stream_capturing,
    refuse_if_capturing,
)
from ..aten.mtia_graph import MTIAGraph, graph, graph_pool_handle
from ..runtime import streams
from ..runtime.allocator import format_bytes
from ..runtime.device_state import RUNTIME
from ..runtime.streams import (
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)
from ..runtime.streams import _device_index as _stream_device_index
from . import memory  # torch.mtia_sim.memory
from .graphed_callables import make_graphed_callables
from .memory import (
    MemPool,
    attach_out_of_memory_observer,
    memory_stats_as_nested_dict,
    use_mem_pool,
)

__all__ = [
    "Event", "Stream", "current_stream", "default_stream", "set_stream", "stream", "synchronize",
    "is_available", "is_initialized", "device_count", "current_device", "set_device", "device",
    "get_device_name", "get_device_properties", "get_device_capability", "manual_seed",
    "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state", "set_rng_state",
    "get_rng_state_all", "set_rng_state_all", "is_bf16_supported", "get_amp_supported_dtype",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "memory_stats", "memory_snapshot", "memory_summary", "reset_peak_memory_stats",
    "reset_accumulated_memory_stats", "empty_cache", "set_per_process_memory_fraction",
    "mem_get_info", "MTIAGraph", "graph", "graph_pool_handle", "is_current_stream_capturing",
    "GraphCaptureError",
    # CUDA parity (issue 9)
    "init", "device_of", "StreamContext", "memory", "MemPool", "use_mem_pool",
    "attach_out_of_memory_observer", "memory_stats_as_nested_dict", "make_graphed_callables",
]


def synchronize(device=None) -> None:
    """Wait (in simulated time) until every stream of the device is idle. Refused while a graph
    captures, as on CUDA: a replay has no host waiting in it."""
    refuse_if_capturing(
        "torch.mtia_sim.synchronize()",
        "it makes the host wait for the device (a host sync), and a replay has no host in the loop",
        "Synchronize before capture_begin or after replay().",
    )
    streams.synchronize(device)


def _index(device=None) -> int:
    """The device index an argument names (None: the current device); a clear error for anything
    else, a negative index (torch.cuda's queries raise too: only set_device, device and Stream
    take one, as "no device" or "the current one") or an index that does not exist."""
    if _is_negative(device):
        raise ValueError(
            f"device index must be >= 0 (got {device}); pass None for the current device"
        )
    return RUNTIME.device(_stream_device_index(device)).index


def _is_negative(device) -> bool:
    return isinstance(device, int) and not isinstance(device, bool) and device < 0


# -- devices -------------------------------------------------------------------------------------
def is_available() -> bool:
    return True


def is_initialized() -> bool:
    """Whether the device was used in this process (as torch.cuda: not in a bad fork)."""
    return RUNTIME.initialized and not RUNTIME.in_bad_fork


def _is_in_bad_fork() -> bool:
    """True in a child forked after this process used the device: the device cannot be used
    there (torch.manual_seed and DataLoader workers ask this before seeding the device)."""
    return RUNTIME.in_bad_fork


def _lazy_init() -> None:
    """Called by PyTorch at the first device tensor; raises in a bad fork, as torch.cuda's."""
    RUNTIME.lazy_init()


def init() -> None:
    """Initialize the device (as torch.cuda.init): the simulator is ready at import, so this
    only marks the device used (a child forked afterwards cannot use it)."""
    RUNTIME.lazy_init()


def device_count() -> int:
    return len(RUNTIME.devices)


def current_device() -> int:
    return RUNTIME.current_index


def set_device(device) -> None:
    """Make `device` current; a no-op for a negative index, as torch.cuda.set_device."""
    if _is_negative(device):
        return
    RUNTIME.current_index = _index(device)


class device(contextlib.ContextDecorator):
    """Context manager that changes the current device (shaped like torch.cuda.device): a no-op
    for None or a negative index."""

    def __init__(self, device) -> None:
        self.index = None if device is None or _is_negative(device) else _index(device)

    def __enter__(self):
        self.previous = RUNTIME.current_index
        if self.index is not None:
            RUNTIME.current_index = self.index

    def __exit__(self, *exc) -> bool:
        RUNTIME.current_index = self.previous
        return False


class device_of(device):
    """Context manager that makes the device of `obj` (a tensor or storage) current; a no-op for
    an object that is not on mtia_sim (as torch.cuda.device_of)."""

    def __init__(self, obj) -> None:
        super().__init__(obj.get_device() if obj.device.type == DEVICE_NAME else -1)


@dataclass(frozen=True)
class DeviceProperties:
    """What `get_device_properties` reports: the chip profile plus the simulator's capacity."""

    name: str
    major: int
    minor: int
    total_memory: int  # the simulated device's capacity (configurable)
    chip_memory: int  # the real chip's DRAM, as published
    multi_processor_count: int  # processing elements (PEs)
    clock_rate_mhz: int
    sram_bytes: int
    gemm_tflops_bf16: float
    vector_tflops_fp32: float
    dram_bandwidth_gbps: float

    def __repr__(self) -> str:
        return (
            f"_MtiaSimDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // 2**20}MB, multi_processor_count="
            f"{self.multi_processor_count})"
        )


def get_device_properties(device=None) -> DeviceProperties:
    state = RUNTIME.device(_index(device))
    p = state.profile
    return DeviceProperties(
        name=p.name,
        major=p.major,
        minor=p.minor,
        total_memory=state.allocator.capacity,
        chip_memory=p.dram_bytes,
        multi_processor_count=p.num_pes,
        clock_rate_mhz=round(p.clock_ghz * 1000),
        sram_bytes=p.sram_bytes,
        gemm_tflops_bf16=p.gemm_flops_bf16 / 1e12,
        vector_tflops_fp32=p.vector_flops_fp32 / 1e12,
        dram_bandwidth_gbps=p.dram_bandwidth / 1e9,
    )


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


def get_device_capability(device=None) -> tuple[int, int]:
    p = RUNTIME.device(_index(device)).profile
    return (p.major, p.minor)


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


# -- random numbers ------------------------------------------------------------------------------
def manual_seed(seed: int) -> None:
    state = RUNTIME.device(RUNTIME.current_index)
    state.generator.manual_seed(int(seed))
    state.initial_seed = int(seed)


def manual_seed_all(seed: int) -> None:
    for state in RUNTIME.devices:
        state.generator.manual_seed(int(seed))
        state.initial_seed = int(seed)


def seed() -> int:
    """Seed the current device's generator with a random number; returns it (as torch.seed)."""
    state = RUNTIME.device(RUNTIME.current_index)
    state.initial_seed = state.generator.seed()
    return state.initial_seed


def seed_all() -> int:
    """Seed every device's generator with one random number; returns it."""
    first = RUNTIME.devices[0].generator.seed()
    manual_seed_all(first)
    return first


def initial_seed() -> int:
    return RUNTIME.device(RUNTIME.current_index).initial_seed


def get_rng_state(device=None) -> torch.Tensor:
    return RUNTIME.device(_index(device)).generator.get_state()


def set_rng_state(new_state: torch.Tensor, device=None) -> None:
    RUNTIME.device(_index(device)).generator.set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [state.generator.get_state() for state in RUNTIME.devices]


def set_rng_state_all(new_states) -> None:
    for state, new_state in zip(RUNTIME.devices, new_states, strict=True):
        state.generator.set_state(new_state)


# -- memory --------------------------------------------------------------------------------------
def _allocator(device=None):
    return RUNTIME.device(_index(device)).allocator


def memory_allocated(device=None) -> int:
    return _allocator(device).allocated_bytes


def max_memory_allocated(device=None) -> int:
    return _allocator(device).peak("allocated_bytes")


def memory_reserved(device=None) -> int:
    return _allocator(device).reserved_bytes


def max_memory_reserved(device=None) -> int:
    return _allocator(device).peak("reserved_bytes")


def memory_stats(device=None) -> dict[str, int]:
    return _allocator(device).memory_stats()


def reset_peak_memory_stats(device=None) -> None:
    _allocator(device).reset_peak_stats()


def reset_accumulated_memory_stats(device=None) -> None:
    _allocator(device).reset_accumulated_stats()


def empty_cache() -> None:
    for state in RUNTIME.devices:
        state.allocator.empty_cache()


def memory_snapshot(mempool_id=None, include_traces: bool = True, device=None) -> list[dict]:
    """Segments and blocks of every device, as torch.cuda.memory_snapshot(): with `stream` and
    each block's `frames`. `mempool_id` (a pool id tuple) keeps that pool's segments; given a
    device (index, string or torch.device) instead, as this function took before, that device's.
    `include_traces` is accepted for CUDA code (the history is in memory._snapshot())."""
    if isinstance(mempool_id, tuple):
        return [s for s in memory.segments(device) if tuple(s["segment_pool_id"]) == mempool_id]
    return memory.segments(mempool_id if mempool_id is not None else device)


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of the device, as the driver would report them."""
    allocator = _allocator(device)
    return allocator.capacity - allocator.reserved_bytes, allocator.capacity


def set_per_process_memory_fraction(fraction: float, device=None) -> None:
    if isinstance(fraction, bool) or not isinstance(fraction, (float, int)):
        raise TypeError(f"fraction must be a float in (0, 1], got {fraction!r}")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    state = RUNTIME.device(_index(device))
    state.allocator.capacity = int(RUNTIME.capacity * fraction)


def memory_summary(device=None, abbreviated: bool = False) -> str:
    allocator = _allocator(device)
    stats = allocator.memory_stats()
    rows = [
        ("allocated", "allocated_bytes"),
        ("requested", "requested_bytes"),
        ("reserved", "reserved_bytes"),
        ("inactive split", "inactive_split_bytes"),
    ]
    lines = [
        f"mtia_sim:{allocator.device_index} memory summary "
        f"(capacity {format_bytes(allocator.capacity)})",
        f"{'':16}{'current':>14}{'peak':>14}{'total alloc':>14}{'total freed':>14}",
    ]
    for label, key in rows:
        metrics = ("current", "peak", "allocated", "freed")
        cells = [format_bytes(stats[f"{key}.all.{m}"]) for m in metrics]
        lines.append(f"{label:16}" + "".join(f"{c:>14}" for c in cells))
    lines.append(
        f"segments: {stats['segment.all.current']}   blocks in use: "
        f"{stats['allocation.all.current']}   retries: {stats['num_alloc_retries']}   "
        f"OOMs: {stats['num_ooms']}"
    )
    return "\n".join(lines)


# torch.mtia_sim.memory also answers what torch.cuda.memory does about the allocator.
for _name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
              "memory_stats", "memory_snapshot", "memory_summary", "reset_peak_memory_stats",
              "reset_accumulated_memory_stats", "empty_cache", "mem_get_info",
              "set_per_process_memory_fraction"):
    setattr(memory, _name, globals()[_name])
