"""Graph capture: the hooks that record a region of device work, and what they refuse.

How capture works here. While a graph captures, the dispatcher (dispatch.py) hands every device
op to `_Capture.record`, which writes down a `GraphNode` (graph_replay_nodes.py): the kernel, its
inner input tensors and the buffers it writes. Memory allocated meanwhile comes from the graph's
*private pool* of the caching allocator (runtime/allocator/), so the addresses the graph uses stay
reserved for it; the tensors made in the region are the graph's static outputs and stay valid
after capture. Work that a replay could not redo raises `GraphCaptureError` naming the op:
host syncs (`.item()`, `.cpu()`, `synchronize`), the CPU fallback, data-dependent shapes,
memory made outside the recorded work or outside the pool's device, copies across devices.

A copy from a host tensor into a device tensor (`static.copy_(host)`) is recorded like any
kernel: each replay reads the host tensor's memory again, as a CUDA graph's copy from pinned
memory does.

The graph object itself (capture_begin/end, replay, pools, lifetime) is mtia_graph.py; the
recorded calls are graph_replay_nodes.py.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable

import torch

from ..._compat import DEVICE_NAME, op_schema
from ..runtime.allocator import Block, PoolId
from ..runtime.device_state import RUNTIME, DeviceState
from ..runtime.streams import Stream
from . import dispatch, tensor
from .graph_replay_nodes import GraphNode, node_for
from .registry import Kernel
from .schema import facts

aten = torch.ops.aten
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



def _has_sparse(value) -> bool:
    """Whether a sparse tensor is among `value` (tensors, lists, tuples, dicts of them)."""
    if isinstance(value, torch.Tensor):
        return value.is_sparse
    if isinstance(value, (list, tuple)):
        return any(_has_sparse(item) for item in value)
    if isinstance(value, dict):
        return any(_has_sparse(item) for item in value.values())
    return False

class GraphCaptureError(RuntimeError):
    """Something in a captured region cannot be replayed; the capture was abandoned."""


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


def active() -> _Capture | None:
    """The capture underway, or None."""
    return _ACTIVE


def begin(graph, device: DeviceState, pool: PoolId, stream: Stream) -> None:
    """Start recording `graph` (an MTIAGraph, mtia_graph.py): install the dispatcher hook and the
    allocation route. Its capture_begin has checked that no other capture is underway."""
    global _ACTIVE
    _ACTIVE = _Capture(graph, device, pool, stream)
    _ACTIVE.install()


class _Capture:
    """The state of the capture underway, and the two hooks it installs: the dispatcher tells it
    about every op (`record`), and device allocations are routed through it (`allocate`)."""

    def __init__(self, graph, device: DeviceState, pool: PoolId, stream: Stream):
        # `graph`: the MTIAGraph being recorded (mtia_graph.py)
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
    def graph(self):
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
        returns = [str(r.type) for r in op_schema(func).returns]
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
        if _has_sparse((args, kwargs, out)):
            self.fail(
                name,
                "it reads or makes a sparse COO tensor, whose number of elements (the sizes of "
                "its indices and values) a kernel decides as it runs, and a replay writes into "
                "the buffers the capture made",
                "Run the sparse ops before the captured region (or convert with .to_dense()).",
            )
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


def storage_alive(host_ptr: int) -> bool:
    """Does a device tensor still use the buffer at `host_ptr`?"""
    entry = tensor._LIVE_STORAGES.get(host_ptr)
    return entry is not None and entry() is not None
