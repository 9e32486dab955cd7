"""Device graphs: capture a region of device work once, replay it without Python dispatch.

Shaped like `torch.mtia.MTIAGraph` and `torch.cuda.CUDAGraph`:

    g = torch.mtia_sim.MTIAGraph()
    static_x = torch.randn(8, 16, device="mtia_sim")
    with torch.mtia_sim.graph(g):          # capture: record, do not run the clock
        static_y = model(static_x)
    static_x.copy_(new_batch)              # new values go INTO the static input...
    g.replay()                             # ...the recorded kernels run again...
    static_y                               # ...and write the static output

Why graphs exist: an eager op costs the host a Python round trip (here, `__torch_dispatch__`
with unwrap, kernel choice, pricing, rewrap: tens of microseconds) and the device one kernel
launch. A replay costs the host one loop over prepared kernel calls and the device one launch.

Capture itself (the hooks into the dispatcher and the allocator, and what they refuse) is
graph_capture.py. Unlike CUDA, the recorded kernels also run once during capture (the simulator
needs their results' shapes): static outputs hold the capture-time values, and in-place updates of
tensors made before the capture (an optimizer step) happen once more than on CUDA. The simulated
clock only advances at replay: one launch for the graph plus every recorded kernel's device time.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from ..._compat import DEVICE_NAME
from ..runtime.allocator import PoolId
from ..runtime.device_state import RUNTIME, DeviceState
from ..runtime.streams import Stream, charge, current_stream, require_stream, stream, synchronize
from . import graph_capture
from .graph_replay_nodes import GraphNode, share_dead_buffers

_graph_ids = itertools.count(1)
_handle_ids = itertools.count(1)


def graph_pool_handle() -> PoolId:
    """An opaque id for a private memory pool that several graphs can share (pass it as `pool`)."""
    return (0, next(_handle_ids))


def _check_pool(pool) -> None:
    """A pool id is two ints (`graph_pool_handle()`, `g.pool()`), as CUDA's MempoolId_t."""
    if pool is None:
        return
    if not (isinstance(pool, (tuple, list)) and len(pool) == 2 and all(
            isinstance(part, int) and not isinstance(part, bool) for part in pool)):
        raise TypeError(
            f"pool must be a pool id from torch.{DEVICE_NAME}.graph_pool_handle() or another "
            f"graph's pool() (a pair of ints), got {pool!r} ({type(pool).__name__})"
        )


class MTIAGraph:
    """A captured region of device work (shaped like torch.mtia.MTIAGraph / torch.cuda.CUDAGraph).

    `keep_graph=False` instantiates at `capture_end`; `keep_graph=True` waits for `instantiate()`
    or the first `replay()`. `reset()` drops the recording (the pool stays, for a new capture);
    `destroy()` also gives the private pool back (memory_reserved drops once no graph uses it)."""

    def __init__(self, keep_graph: bool = False) -> None:
        self.keep_graph = keep_graph
        self.id = next(_graph_ids)
        self.device_index: int | None = None
        self._pool: PoolId | None = None  # the pool this graph retains in the allocator
        self._nodes: list[GraphNode] = []
        self._runs: list[Callable[[], object]] | None = None  # the instantiated graph
        self._device_us = 0.0  # the recorded kernels' device time, summed at instantiate
        self._capturing = False
        self._captured = False
        self._abandoned: str | None = None  # why the last capture failed

    # -- capture ------------------------------------------------------------------------------
    def capture_begin(self, pool: PoolId | None = None, capture_error_mode: str = "global") -> None:
        """Start recording the current device's work; memory comes from `pool` (another graph's
        `pool()` or a `graph_pool_handle()`) or from this graph's own private pool.
        `capture_error_mode` is accepted for CUDA code; every capture here is "global": work
        from any thread or stream of the device is recorded or refused."""
        if capture_error_mode not in ("global", "thread_local", "relaxed"):
            raise ValueError(
                f"capture_error_mode must be 'global', 'thread_local' or 'relaxed', "
                f"got {capture_error_mode!r}"
            )
        underway = graph_capture.active()
        if underway is not None:
            raise RuntimeError(
                f"capture_begin: graph {underway.graph.id} is already capturing; only one capture "
                "may be underway at a time. End it (capture_end) before starting another."
            )
        if self._captured:
            raise RuntimeError(
                "capture_begin: this graph already holds a capture. Call reset() first, or use "
                "a new MTIAGraph."
            )
        _check_pool(pool)
        index = RUNTIME.current_index
        wanted = None if pool is None or tuple(pool) == (0, 0) else tuple(pool)
        allocator = RUNTIME.device(index).allocator
        if wanted is None:
            wanted = self._pool if self._pool is not None else (self.id, 0)
        if self._pool != wanted or self.device_index != index:
            self._release_pool()
            allocator.retain_pool(wanted)
            self._pool, self.device_index = wanted, index
        self._nodes, self._runs, self._abandoned = [], None, None
        self._capturing = True
        graph_capture.begin(self, RUNTIME.device(index), wanted, current_stream(index))

    def capture_end(self) -> None:
        """Stop recording; with keep_graph=False the graph is instantiated now."""
        capture = graph_capture.active()
        if capture is None or capture.graph is not self:
            why = f" (the capture was abandoned: {self._abandoned})" if self._abandoned else ""
            raise RuntimeError(f"capture_end: graph {self.id} is not capturing{why}")
        capture.uninstall()
        self._nodes = share_dead_buffers(self._nodes, capture.made, graph_capture.storage_alive)
        self._capturing, self._captured = False, True
        if not self.keep_graph:
            self.instantiate()

    def _abandon(self, reason: str) -> None:
        """Clear the capture state after a failure; the device is usable again at once."""
        capture = graph_capture.active()
        if capture is not None and capture.graph is self:
            capture.uninstall()
        self._capturing = False
        self._nodes, self._runs, self._abandoned = [], None, reason

    # -- replay -------------------------------------------------------------------------------
    def instantiate(self) -> None:
        """Turn the recording into the flat list of calls a replay runs."""
        if not self._captured:
            raise RuntimeError("instantiate: nothing captured yet (capture_begin/capture_end)")
        self._runs = [node.prepared() for node in self._nodes]
        self._device_us = sum(node.device_us for node in self._nodes)

    def replay(self) -> None:
        """Run the recorded kernels again on the static buffers; charge the simulated clock
        one launch plus the kernels' device time, on the current stream."""
        capture = graph_capture.active()
        if capture is not None:  # a replay bypasses the dispatcher: a capture would miss it
            capture.fail(
                f"replay() of graph {self.id}",
                "a replay runs its kernels without the dispatcher, so the capture underway "
                "would not record them",
                "Replay before capture_begin or after capture_end.",
            )
        runs = self._runs
        if runs is None:
            if not self._captured:
                raise RuntimeError(
                    "replay: this graph holds no capture. Capture a region first: "
                    "`with torch.mtia_sim.graph(g): ...`"
                )
            self.instantiate()
            runs = self._runs
        for run in runs:
            run()
        state = RUNTIME.devices[self.device_index]
        charge(state, self.replay_duration_us(state))

    def replay_duration_us(self, state: DeviceState | None = None) -> float:
        """Simulated time of one replay: one launch, then the recorded kernels back to back."""
        state = state or RUNTIME.device(self.device_index)
        if self._runs is None:
            return state.profile.kernel_launch_us + sum(n.device_us for n in self._nodes)
        return state.profile.kernel_launch_us + self._device_us

    # -- lifetime -----------------------------------------------------------------------------
    def reset(self) -> None:
        """Drop the recording (and the buffers it held). The private pool stays with the graph."""
        if self._capturing:
            self._abandon("reset() during capture")
        self._nodes, self._runs, self._captured = [], None, False

    def destroy(self) -> None:
        """reset(), then give the private pool back: its memory returns to the device once no
        graph uses the pool and no tensor lives in it."""
        self.reset()
        self._release_pool()

    def pool(self) -> PoolId:
        """The id of this graph's memory pool, to share it: `other.capture_begin(pool=g.pool())`."""
        if self._pool is None:
            raise RuntimeError("pool(): this graph has no pool before its capture_begin")
        return self._pool

    def _release_pool(self) -> None:
        if self._pool is not None:
            try:
                RUNTIME.device(self.device_index).allocator.release_pool(self._pool)
            except (RuntimeError, ValueError):  # device removed, or pool already gone
                pass
            self._pool = None

    def __del__(self) -> None:
        try:
            if self._capturing:
                self._abandon("the graph was deleted")
            self._release_pool()
        except Exception:  # never raise under garbage collection
            pass

    # -- inspection ---------------------------------------------------------------------------
    @property
    def nodes(self) -> tuple[GraphNode, ...]:
        return tuple(self._nodes)

    def __repr__(self) -> str:
        if self._capturing:
            state = "capturing"
        elif self._captured:
            state = f"{len(self._nodes)} kernels, {self.replay_duration_us():.3f} us per replay"
        else:
            state = "empty"
        where = f"{DEVICE_NAME}:{self.device_index}" if self.device_index is not None else "-"
        return f"MTIAGraph({self.id} on {where}, {state}, pool={self._pool})"


class graph:
    """Context manager: capture the block's device work into `mtia_graph` (as torch.cuda.graph).

    On entry it synchronizes, empties the cache and makes `stream` (by default a side stream of
    the current device, shared by its captures) current; on exit it ends the capture, or
    abandons it if the block raised, so the device is usable either way."""

    default_capture_stream: Stream | None = None  # the last one used (as torch.cuda.graph)
    _side_streams: dict[int, Stream] = {}  # device index -> its default capture stream

    def __init__(
        self,
        mtia_graph: MTIAGraph,
        pool: PoolId | None = None,
        stream: Stream | None = None,
        capture_error_mode: str = "global",
    ) -> None:
        _check_pool(pool)
        if stream is not None:
            require_stream(stream, f"torch.{DEVICE_NAME}.graph(stream=...)")
        if stream is None:
            index = RUNTIME.current_index
            stream = graph._side_streams.get(index) or graph._side_streams.setdefault(
                index, Stream(index)
            )
            graph.default_capture_stream = stream
        self.mtia_graph = mtia_graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode
        self.capture_stream = stream
        self._stream_ctx = None

    def __enter__(self) -> None:
        synchronize()  # free what finished, so the graph's pool starts from a clean device
        for state in RUNTIME.devices:
            state.allocator.empty_cache()
        self._stream_ctx = stream(self.capture_stream)
        self._stream_ctx.__enter__()
        try:
            self.mtia_graph.capture_begin(self.pool, self.capture_error_mode)
        except BaseException:
            self._stream_ctx.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type, exc, traceback) -> bool:
        try:
            if exc_type is None:
                self.mtia_graph.capture_end()
            elif self.mtia_graph._capturing:
                self.mtia_graph._abandon(f"{exc_type.__name__} raised in the captured block")
        finally:
            self._stream_ctx.__exit__(None, None, None)
        return False


