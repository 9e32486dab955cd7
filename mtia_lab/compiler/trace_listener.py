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

The teaching compiler's own trace listener: it builds the event and hands it to the recorder's
public `emit()` (trace/recorder.py); trace/ knows nothing of this compiler. With no trace open
the listener returns at once, so it stays installed (`install()` runs at `import mtia_lab`) and
the recorder's own hot path is untouched.
"""

from __future__ import annotations

from time import perf_counter_ns

from ..source import user_source
from ..trace.events import COMPILED as KIND
from ..trace.events import DispatchPath, OpEvent, TensorRecord
from ..trace.recorder import RECORDER, host_issue
from .aot import COMPILED
from .runner import LISTENERS, remove_listener

_state = {"program": None, "call_id": 0, "end_ns": 0}
_owners: dict[int, tuple] = {}  # id(kernel) -> (CompiledGraph, kernel)
_buffer_ids: dict[tuple[str, str], int] = {}  # (graph, buffer) -> synthetic storage id
_records: dict[tuple, TensorRecord] = {}


def _owner(kernel):
    """The CompiledGraph a kernel belongs to (the compiler keeps every one in COMPILED)."""
    hit = _owners.get(id(kernel))
    if hit is not None and hit[1] is kernel:
        return hit[0]
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
    if not RECORDER.recording or span is None:  # no trace open, or the graph ran on host tensors
        return
    now = perf_counter_ns()
    compiled = _owner(kernel)
    graph = compiled.name if compiled is not None else "graph"
    ir = compiled.plan.ir if compiled is not None else None
    program = compiled.program if compiled is not None else None
    group = kernel.group
    first = program is None or kernel is program.kernels[0]
    if first or _state["program"] is not program:  # a new run of a graph: a call of its own
        _state["call_id"], _state["program"] = RECORDER.new_call(), program
        host_ns = 0  # the runner tells us when a kernel ended, not when the first one started
    else:
        host_ns = now - _state["end_ns"]
    _state["end_ns"] = now
    stream, sim_start, sim_end = span[:3]
    device = stream.device_index
    device_name = f"mtia_sim:{device}"
    path = DispatchPath((), (), tuple(group.aten_nodes),
                        f"torch.compile(backend='mtia_lab') {graph}.{kernel.name}")
    RECORDER.emit(OpEvent(
        op=f"{graph}.{kernel.name}", kind=KIND,
        phase="backward" if graph.startswith("backward") else "forward",
        reason=f"{group.kind} kernel {group.index} of {graph}: {', '.join(group.nodes)}",
        dispatch=path,
        inputs=_records_of(graph, ir, kernel.inputs, device_name),
        outputs=_records_of(graph, ir, kernel.outputs, device_name),
        host_ns=host_ns, sim_start_us=sim_start, sim_end_us=sim_end, stream=stream.stream_id,
        device=device, source=user_source(), module=RECORDER.module,
        call=f"compiled {graph}", call_id=_state["call_id"], host_issue_us=host_issue(span),
    ), started_ns=now - host_ns)


def install() -> None:
    """Listen to the compiler's runner (idempotent)."""
    if on_kernel not in LISTENERS:
        LISTENERS.append(on_kernel)


def uninstall() -> None:
    remove_listener(on_kernel)
