"""Triton launches of Inductor-compiled code in `mtia_lab.trace()`: one "compiled" OpEvent each.

The same record type as the teaching scheduler's fused kernels (trace/compiled.py), so the
summary, explorer and timeline draw them with no change:

    op        "inductor.forward_1.triton_poi_fused_add_relu_0"
    reason    "triton kernel of forward_1, grid (1, 1, 1), XBLOCK=1024: add, relu"  (the grid
              and block sizes Inductor launched it with, and its aten nodes)
    dispatch  steps = the aten nodes with their targets; chosen = how it ran
    inputs / outputs   the device tensors it read and wrote (real addresses)
    sim_start_us / sim_end_us / stream   the span triton_launch.py charged to the device clock
The kernel's Triton source is not in the event (events stay small); `kernel_source(event)`
returns it from the launch records kept here.
"""

from __future__ import annotations

from time import perf_counter_ns

from ..trace.compiled import KIND, _user_source
from ..trace.events import DispatchPath, OpEvent
from .triton_launch import LISTENERS, TritonLaunch

SOURCES: dict[str, str] = {}  # event op name -> Triton source of the kernel
_state = {"graph": None, "call_id": 0, "end_ns": 0, "last": None}


def event_name(launch: TritonLaunch) -> str:
    return f"inductor.{launch.kernel.graph or 'graph'}.{launch.kernel.name}"


def kernel_source(event) -> str:
    """The @triton.jit source of the kernel an event launched."""
    return SOURCES.get(event.op, "")


def on_launch(launch: TritonLaunch, cost, span) -> None:
    from ..backend.runtime.device_state import RUNTIME
    from .recorder_access import recorder

    rec = recorder()
    if not rec.traces or span is None:
        return
    now = perf_counter_ns()
    kernel = launch.kernel
    name = event_name(launch)
    SOURCES[name] = kernel.source
    graph = kernel.graph or "graph"
    if _state["graph"] != graph or _state["last"] == name:
        rec.next_call += 1  # a new run of a graph: a call of its own
        _state["call_id"], _state["graph"] = rec.next_call, graph
        host_ns = 0
    else:
        host_ns = now - _state["end_ns"]
    _state["end_ns"], _state["last"] = now, name
    stream, sim_start, sim_end = span
    nodes = ", ".join(kernel.nodes) or "aten nodes unknown (Inductor's graph cache)"
    blocks = "".join(f", {k}={v}" for k, v in launch.blocks.items())
    reason = f"triton kernel of {graph}, grid {launch.grid}{blocks}: {nodes}"
    path = DispatchPath((), (), tuple(kernel.aten_nodes),
                        f"torch.compile (Inductor + Triton interpreter) {graph}.{kernel.name}")
    inputs = tuple(rec._record(t, None, False)[0] for t in launch.inputs)
    outputs = tuple(rec._record(t, None, False)[0] for t in launch.outputs)
    device = stream.device_index
    current = RUNTIME.device(device).allocator._stats["all"].allocated_bytes.current
    phase = "backward" if graph.startswith("backward") else "forward"
    module = rec.modules[-1] if rec.modules else ""
    source = _user_source()
    for trace, trace_start in rec.traces:
        events = trace.events
        events.append(OpEvent(
            len(events), name, KIND, phase, reason, path, inputs, outputs, 0, 0, current,
            now - host_ns - trace_start, host_ns, sim_start, sim_end, stream.stream_id, device,
            source, module, f"compiled {graph}", _state["call_id"]))


def install() -> None:
    if on_launch not in LISTENERS:
        LISTENERS.append(on_launch)
