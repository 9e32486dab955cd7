"""Triton launches of Inductor-compiled code in `mtia_lab.trace()`: one "compiled" OpEvent each.

The Inductor engine's own trace listener: the same record type as the teaching scheduler's
fused kernels (compiler/trace_listener.py), put into the open traces through the recorder's
public `emit()`, so the summary, explorer and timeline draw them with no change:

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

from ..source import user_source
from ..trace.events import COMPILED as KIND
from ..trace.events import DispatchPath, OpEvent
from ..trace.recorder import RECORDER, host_issue
from .triton_launch import LISTENERS, TritonLaunch

SOURCES: dict[str, str] = {}  # event op name -> Triton source of the kernel
_state = {"graph": None, "call_id": 0, "end_ns": 0, "last": None}


def event_name(launch: TritonLaunch) -> str:
    return f"inductor.{launch.kernel.graph or 'graph'}.{launch.kernel.name}"


def kernel_source(event) -> str:
    """The @triton.jit source of the kernel an event launched."""
    return SOURCES.get(event.op, "")


def on_launch(launch: TritonLaunch, cost, span) -> None:
    """launch.py's listener: one "compiled" OpEvent per Triton launch in every open trace."""
    if not RECORDER.recording or span is None:
        return
    now = perf_counter_ns()
    kernel = launch.kernel
    name = event_name(launch)
    SOURCES[name] = kernel.source
    graph = kernel.graph or "graph"
    if _state["graph"] != graph or _state["last"] == name:  # a new run of a graph: a new call
        _state["call_id"], _state["graph"] = RECORDER.new_call(), graph
        host_ns = 0
    else:
        host_ns = now - _state["end_ns"]
    _state["end_ns"], _state["last"] = now, name
    stream, sim_start, sim_end = span[:3]
    nodes = ", ".join(kernel.nodes) or "aten nodes unknown (Inductor's graph cache)"
    blocks = "".join(f", {k}={v}" for k, v in launch.blocks.items())
    path = DispatchPath((), (), tuple(kernel.aten_nodes),
                        f"torch.compile (Inductor + Triton interpreter) {graph}.{kernel.name}")
    RECORDER.emit(OpEvent(
        op=name, kind=KIND, phase="backward" if graph.startswith("backward") else "forward",
        reason=f"triton kernel of {graph}, grid {launch.grid}{blocks}: {nodes}", dispatch=path,
        inputs=tuple(RECORDER.tensor_record(t) for t in launch.inputs),
        outputs=tuple(RECORDER.tensor_record(t) for t in launch.outputs),
        host_ns=host_ns, sim_start_us=sim_start, sim_end_us=sim_end, stream=stream.stream_id,
        device=stream.device_index, source=user_source(), module=RECORDER.module,
        call=f"compiled {graph}", call_id=_state["call_id"], host_issue_us=host_issue(span),
    ), started_ns=now - host_ns)


def install() -> None:
    if on_launch not in LISTENERS:
        LISTENERS.append(on_launch)
