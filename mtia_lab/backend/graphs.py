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

How capture works here. While a graph captures, the dispatcher (dispatch.py) hands every device
op to `_Capture.record`, which writes down a `GraphNode` (graph_nodes.py): the kernel, its inner
input tensors and the buffers it writes. Memory allocated meanwhile comes from the graph's
*private pool* of the caching allocator (allocator.py), so the addresses the graph uses stay
reserved for it; the tensors made in the region are the graph's static outputs and stay valid
after capture. Work that a replay could not redo raises `GraphCaptureError` naming the op:
host syncs (`.item()`, `.cpu()`, `synchronize`), the CPU fallback, data-dependent shapes,
memory made outside the recorded work or outside the pool's device, copies across devices.

A copy from a host tensor into a device tensor (`static.copy_(host)`) is recorded like any
kernel: each replay reads the host tensor's memory again, as a CUDA graph's copy from pinned
memory does.

Unlike CUDA, the recorded kernels also run once during capture (the simulator needs their
results' shapes): static outputs hold the capture-time values, and in-place updates of tensors
made before the capture (an optimizer step) happen once more than on CUDA. The simulated clock
only advances at replay: one launch for the graph plus every recorded kernel's device time.
"""

from __future__ import annotations

import dataclasses
import itertools
import weakref
from collections.abc import Callable

import torch

from .._compat import DEVICE_NAME
from . import dispatch, tensor
from .allocator import Block, PoolId
from .graph_nodes import GraphNode, node_for, share_dead_buffers
from .registry import Kernel
from .runtime import RUNTIME, DeviceState
from .schema import facts
from .streams import Stream, charge, current_stream, require_stream, stream, synchronize

aten = torch.ops.aten
_graph_ids = itertools.count(1)
_handle_ids = itertools.count(1)
_ACTIVE: _Capture | None = None  # at most one capture at a time in the process, as in PyTorch

# Ops whose result the host must read: a graph replays with no host in the loop.
_HOST_SYNC_OPS = {
    aten._local_scalar_dense.default: "tensor.item(), float(t), int(t), bool(t) or `if t:`",
    aten.equal.default: "torch.equal",
    aten.is_nonzero.default: "bool(t) or `if t:`",
}
# Ops whose output SIZE depends on the data: the host must read it before allocating.
_DATA_DEPENDENT_OPS = {
    aten.nonzero.default, aten.masked_select.default, aten._unique2.default,
    aten.unique_consecutive.default, aten.unique_dim.default,
}
# Allocations that need no recorded work: uninitialised memory.
_EMPTY_FACTORIES = ("aten::empty.memory_format", "aten::empty_strided")


class GraphCaptureError(RuntimeError):
    """Something in a captured region cannot be replayed; the capture was abandoned."""


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


def is_current_stream_capturing() -> bool:
    """True while a graph captures the current device's work (capture here spans all streams)."""
    return _ACTIVE is not None and _ACTIVE.device_index == RUNTIME.current_index


def refuse_if_capturing(what: str, why: str, fix: str) -> None:
    """Raise (and abandon the capture) when a host-side call that a graph cannot hold happens
    while capturing; used by `torch.mtia_sim.synchronize`."""
    if _ACTIVE is not None:
        _ACTIVE.fail(what, why, fix)


def record_launch(device_index: int, op: str, inputs: tuple, outputs: tuple, duration_us: float,
                  call: Callable[..., object], args: tuple, kwargs: dict) -> bool:
    """A kernel launched without the dispatcher (an Inductor-generated Triton kernel:
    inductor/triton_launch.py), which has just run `call(*args, **kwargs)` on the device memory
    (`inputs`/`outputs`: inner tensors): while a graph captures, record it so that replays
    redo it, and return True (the clock then moves at replay). False when nothing captures."""
    capture = _ACTIVE
    if capture is None:
        return False
    if device_index != capture.device_index:
        capture.fail(op, f"it runs on {DEVICE_NAME}:{device_index}, not on the captured device",
                     f"Capture work of {DEVICE_NAME}:{capture.device_index} only.")
    device_us = max(0.0, duration_us - capture.launch_us)
    capture.graph._nodes.append(
        GraphNode(op, "launch", tuple(inputs), tuple(outputs), device_us, call, args, kwargs))
    for buffer in outputs:
        capture._recorded.add(buffer.untyped_storage().data_ptr())
    return True


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
        global _ACTIVE
        if capture_error_mode not in ("global", "thread_local", "relaxed"):
            raise ValueError(
                f"capture_error_mode must be 'global', 'thread_local' or 'relaxed', "
                f"got {capture_error_mode!r}"
            )
        if _ACTIVE is not None:
            raise RuntimeError(
                f"capture_begin: graph {_ACTIVE.graph.id} is already capturing; only one capture "
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
        _ACTIVE = _Capture(self, RUNTIME.device(index), wanted, current_stream(index))
        _ACTIVE.install()

    def capture_end(self) -> None:
        """Stop recording; with keep_graph=False the graph is instantiated now."""
        capture = _ACTIVE
        if capture is None or capture.graph is not self:
            why = f" (the capture was abandoned: {self._abandoned})" if self._abandoned else ""
            raise RuntimeError(f"capture_end: graph {self.id} is not capturing{why}")
        capture.uninstall()
        self._nodes = share_dead_buffers(self._nodes, capture.made, _storage_alive)
        self._capturing, self._captured = False, True
        if not self.keep_graph:
            self.instantiate()

    def _abandon(self, reason: str) -> None:
        """Clear the capture state after a failure; the device is usable again at once."""
        if _ACTIVE is not None and _ACTIVE.graph is self:
            _ACTIVE.uninstall()
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
        if _ACTIVE is not None:  # a replay bypasses the dispatcher: a capture would miss it
            _ACTIVE.fail(
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


class _Capture:
    """The state of the capture underway, and the two hooks it installs: the dispatcher tells it
    about every op (`record`), and device allocations are routed through it (`allocate`)."""

    def __init__(self, graph: MTIAGraph, device: DeviceState, pool: PoolId, stream: Stream):
        # Weak: a graph deleted mid-capture must die, and its death ends the capture (below).
        self._graph = weakref.ref(graph, self._graph_deleted)
        self.device = device
        self.device_index = device.index
        self.pool = pool
        self.stream = stream
        self.launch_us = device.profile.kernel_launch_us
        self._recorded: set[int] = set()  # host pointers of buffers written by recorded work
        self.made: set[int] = set()  # host pointers of every buffer allocated in the capture

    @property
    def graph(self) -> MTIAGraph:
        return self._graph()

    def _graph_deleted(self, _ref) -> None:
        """The graph was deleted while it captured: give the device its state back (no capture
        hook, no allocation route), as `_abandon` would have."""
        if _ACTIVE is self:
            self.uninstall()

    def install(self) -> None:
        dispatch.set_capture(self)
        tensor.set_allocation_route(self.allocate)

    def uninstall(self) -> None:
        global _ACTIVE
        dispatch.set_capture(None)
        tensor.set_allocation_route(None)
        _ACTIVE = None

    def fail(self, what: str, why: str, fix: str) -> None:
        message = (
            f"{what} cannot be captured in a graph (graph {self.graph.id} on "
            f"{DEVICE_NAME}:{self.device_index}): {why}.\n{fix}\n"
            "The capture was abandoned; the device is usable. Fix the region and capture again."
        )
        self.graph._abandon(message.splitlines()[0])
        raise GraphCaptureError(message)

    # -- hook 1: the dispatcher --------------------------------------------------------------
    def refuse_fallback(self, func) -> None:
        """Called by the dispatcher before the CPU fallback runs `func`."""
        name = facts(func).name
        returns = [str(r.type) for r in func._schema.returns]
        if func in _HOST_SYNC_OPS:
            self._refuse_host_sync(func, name)
        if not any("Tensor" in r for r in returns):
            return  # a metadata query (e.g. _has_compatible_shallow_copy_type): no device work
        self.fail(
            name,
            f"it has no native kernel on {DEVICE_NAME}, so the CPU fallback runs it on the host "
            "(copy the inputs up, compute, copy the results back), which a device graph cannot "
            "replay",
            f'Give it a device kernel (@mtia_lab.register_kernel("{name}")) or move it out of '
            "the captured region.",
        )

    def record(self, func, kernel: Kernel, args, kwargs, out, devices, target, device, duration):
        """Called by the dispatcher after `kernel` ran `func`; returns the duration to charge
        now (None: capture records, the clock moves at replay)."""
        if kernel is None:
            return None  # a metadata query the fallback answered (refuse_fallback let it pass)
        name = facts(func).name
        self._check(func, name, kernel, args, devices, target)
        if kernel.kind == "view":
            return None  # views move no data: nothing to replay
        node = node_for(func, kernel, args, kwargs, out, device)
        if node is not None:
            if duration is not None:
                node = dataclasses.replace(node, device_us=max(0.0, duration - self.launch_us))
            self.graph._nodes.append(node)
            for buffer in node.outputs:
                self._recorded.add(buffer.untyped_storage().data_ptr())
        return None

    def _check(self, func, name, kernel, args, devices, target) -> None:
        if func in _HOST_SYNC_OPS:
            self._refuse_host_sync(func, name)
        if type(target) is not int:
            self.fail(
                f"{name} to {target}",
                "copying device memory to the host makes the host wait for the device (a host "
                "sync), and a replay has no host in the loop",
                "Copy the static output after replay instead: g.replay(); out.cpu().",
            )
        others = sorted({d for d in devices if type(d) is int and d != self.device_index})
        if target != self.device_index or others:
            other = target if target != self.device_index else others[0]
            if kernel.cross_device:
                why = (f"it copies between {DEVICE_NAME}:{self.device_index} and "
                       f"{DEVICE_NAME}:{other}, and a graph holds the work of one device")
                fix = "Do the copy before or after the captured region."
            else:
                why = f"it runs on {DEVICE_NAME}:{other}, not on the captured device"
                fix = f"Capture work of {DEVICE_NAME}:{self.device_index} only."
            self.fail(name, why, fix)
        if func in _DATA_DEPENDENT_OPS or (func is aten.index.Tensor and _has_mask(args)):
            self.fail(
                name,
                "the size of its result depends on the data (e.g. a boolean mask), so the host "
                "must read the device before it can allocate the result",
                "Use a shape-static form: torch.where(mask, x, 0) or masked_fill, not x[mask].",
            )

    def _refuse_host_sync(self, func, name) -> None:
        self.fail(
            f"{name} ({_HOST_SYNC_OPS[func]})",
            "it reads a device value on the host (a host sync); a replay runs with no host in "
            "the loop, so the host would never see the new value",
            "Move .item()/print/Python control flow out of the captured region, or keep the "
            "value on the device (torch.where, masked ops).",
        )

    # -- hook 2: device allocations ---------------------------------------------------------
    def allocate(
        self, device_index: int, nbytes: int, host_ptr: int, op: str, source: str
    ) -> Block:
        """Every device allocation while capturing comes here (tensor.DeviceStorage)."""
        if device_index != self.device_index:
            self.fail(
                f"{op} allocating {nbytes} bytes on {DEVICE_NAME}:{device_index}",
                "the allocation is outside the graph's private memory pool, which lives on "
                f"{DEVICE_NAME}:{self.device_index}",
                f"Allocate on {DEVICE_NAME}:{self.device_index} in the region, or before capture.",
            )
        if host_ptr not in self._recorded and op not in _EMPTY_FACTORIES:
            self.fail(
                op,
                "it puts new data on the device without a device kernel the graph could record "
                "(a host-to-device copy such as .to(device) or torch.tensor(..., device=...), or "
                "a factory computed on the host), so a replay would not redo it",
                "Create the tensor before capture and copy_ new values into it, or use a device "
                "factory (torch.empty/zeros/full(..., device=...)).",
            )
        self._recorded.discard(host_ptr)
        self.made.add(host_ptr)
        allocator = self.device.allocator
        return allocator.malloc(nbytes, op, source, pool=self.pool)


def _has_mask(args) -> bool:
    indices = args[1] if len(args) > 1 else ()
    return any(
        isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ()
    )


def _storage_alive(host_ptr: int) -> bool:
    """Does a device tensor still use the buffer at `host_ptr`?"""
    entry = tensor._LIVE_STORAGES.get(host_ptr)
    return entry is not None and entry() is not None
