"""Compiled kernels in the dispatch trace: a compiled region shows as its fused kernels.

Code compiled by `torch.compile(backend="mtia_lab")` runs on the inner CPU tensors, so none of
its ops reach `__torch_dispatch__` and the dispatch observer never sees them. What does see
them is the compiler's runner (compiler/runner.py), which tells its LISTENERS about every
kernel it launches: (kernel, cost, span). This module is one such listener. While a
`mtia_lab.trace()` is open, each launch becomes one OpEvent of kind "compiled":

    op       "forward_1.kernel_0"      (graph . kernel)
    reason   "template kernel 0 of forward_1: mm, add, gelu"  (its aten nodes)
    dispatch steps = the aten nodes with their targets; chosen = the compiled graph
    inputs / outputs   the buffers it reads and writes, from the scheduler's graph (shapes,
                       dtypes, bytes); `storage` is a negative id per (graph, buffer), not a
                       device address: the runner hands listeners no tensors
    sim_start_us / sim_end_us / stream   the span the runner charged to the device clock

With no trace open the listener returns at once, so it stays installed (`install()` runs at
`import mtia_lab`) and the recorder's own hot path is untouched.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
from time import perf_counter_ns

import torch

from .events import DispatchPath, OpEvent, TensorRecord

KIND = "compiled"
_state = {"program": None, "call_id": 0, "end_ns": 0}
_owners: dict[int, tuple] = {}  # id(kernel) -> (CompiledGraph, kernel)
_buffer_ids: dict[tuple[str, str], int] = {}  # (graph, buffer) -> synthetic storage id
_records: dict[tuple, TensorRecord] = {}


_SKIP = (os.path.dirname(torch.__file__),
         os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # mtia_lab
         sysconfig.get_paths()["stdlib"], "<frozen")


@functools.lru_cache(maxsize=1024)
def _is_user_file(filename: str) -> bool:
    return not filename.startswith(_SKIP)


def _user_source() -> str:
    """file:line of the innermost frame outside torch, mtia_lab and the standard library (the
    recorder's rule; found here once per launch, so the simple walk is fast enough)."""
    frame = sys._getframe(1)
    while frame is not None:
        if _is_user_file(frame.f_code.co_filename):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def _owner(kernel):
    """The CompiledGraph a kernel belongs to (the compiler keeps every one in COMPILED)."""
    hit = _owners.get(id(kernel))
    if hit is not None and hit[1] is kernel:
        return hit[0]
    from ..compiler.aot import COMPILED

    for compiled in reversed(COMPILED):
        for k in compiled.program.kernels:
            _owners[id(k)] = (compiled, k)
        if any(k is kernel for k in compiled.program.kernels):
            return compiled
    return None


def _record(graph: str, ir, buffer: str, device: str) -> TensorRecord | None:
    key = (graph, buffer, device)
    record = _records.get(key)
    if record is None:
        buf = ir.buffers.get(buffer) if ir is not None else None
        if buf is None or not all(isinstance(d, int) for d in (*buf.shape, buf.nbytes)):
            return None  # unknown, or symbolic (dynamic shapes): no record rather than a guess
        storage = _buffer_ids.setdefault((graph, buffer), -(len(_buffer_ids) + 1))
        strides, step = [], 1
        for size in reversed(buf.shape):  # contiguous, as the kernels write them
            strides.append(step)
            step *= max(size, 1)
        record = _records[key] = TensorRecord(
            tuple(buf.shape), str(buf.dtype).removeprefix("torch."), tuple(reversed(strides)),
            0, storage, buf.nbytes, device, None, buf.nbytes)
    return record


def _records_of(graph: str, ir, buffers, device: str) -> tuple[TensorRecord, ...]:
    found = (_record(graph, ir, b, device) for b in buffers)
    return tuple(r for r in found if r is not None)


def on_kernel(kernel, cost, span) -> None:
    """The runner's listener: one "compiled" OpEvent per kernel launch in every open trace."""
    from .recorder import _RECORDER

    recorder = _RECORDER
    if not recorder.traces or span is None:  # no trace open, or the graph ran on host tensors
        return
    now = perf_counter_ns()
    compiled = _owner(kernel)
    graph = compiled.name if compiled is not None else "graph"
    ir = compiled.plan.ir if compiled is not None else None
    program = compiled.program if compiled is not None else None
    group = kernel.group
    first = program is None or kernel is program.kernels[0]
    if first or _state["program"] is not program:  # a new run of a graph: a call of its own
        recorder.next_call += 1
        _state["call_id"], _state["program"] = recorder.next_call, program
        host_ns = 0  # the runner tells us when a kernel ended, not when the first one started
    else:
        host_ns = now - _state["end_ns"]
    _state["end_ns"] = now
    stream, sim_start, sim_end = span
    device = stream.device_index
    device_name = f"mtia_sim:{device}"
    nodes = ", ".join(group.nodes)
    reason = f"{group.kind} kernel {group.index} of {graph}: {nodes}"
    path = DispatchPath((), (), tuple(group.aten_nodes),
                        f"torch.compile(backend='mtia_lab') {graph}.{kernel.name}")
    inputs = _records_of(graph, ir, kernel.inputs, device_name)
    outputs = _records_of(graph, ir, kernel.outputs, device_name)
    from ..backend.runtime.device_state import RUNTIME

    current = RUNTIME.device(device).allocator._stats["all"].allocated_bytes.current
    phase = "backward" if graph.startswith("backward") else "forward"
    module = recorder.modules[-1] if recorder.modules else ""
    source = _user_source()
    for trace, trace_start in recorder.traces:
        events = trace.events
        events.append(OpEvent(
            len(events), f"{graph}.{kernel.name}", KIND, phase, reason, path, inputs,
            outputs, 0, 0, current, now - host_ns - trace_start, host_ns, sim_start, sim_end,
            stream.stream_id, device, source, module, f"compiled {graph}", _state["call_id"],
        ))


def install() -> None:
    """Listen to the compiler's runner (idempotent)."""
    from ..compiler.runner import LISTENERS

    if on_kernel not in LISTENERS:
        LISTENERS.append(on_kernel)


def uninstall() -> None:
    from ..compiler.runner import remove_listener

    remove_listener(on_kernel)
