"""Chrome's trace event format: what chrome://tracing and https://ui.perfetto.dev open.

Host wall time on one track, simulated device time on one track per (device, stream). The
export is one way (io.py's `load_trace` refuses it). A Trace draws itself through
`Trace.chrome_trace()`, so a subclass (distributed/'s RankedTrace: one process per rank)
exports its own picture through the same `to_chrome_trace`.

events.py imports this module; it names events.py's records for type checking only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .files import write_atomically

if TYPE_CHECKING:  # events.py imports this module: the record types for annotations only
    from .events import TensorRecord, Trace

HOST_PID = 0

def to_chrome_trace(trace: Trace) -> dict:
    """The trace as Chrome trace events (Perfetto-compatible): `trace.chrome_trace()`, so a
    Trace subclass draws itself (a RankedTrace: one process per rank); a Trace's own is
    `plain_chrome_trace`."""
    if not callable(getattr(trace, "chrome_trace", None)):  # events.py imports this module
        raise TypeError(f"to_chrome_trace(trace): expected a Trace (from `with mtia_lab.trace() "
                        f"as t:` or mtia_lab.load_trace), got {type(trace).__name__}")
    return trace.chrome_trace()


def plain_chrome_trace(trace: Trace) -> dict:
    """Chrome trace events of a single-process trace: "X" (complete) events, ts and dur in
    microseconds. Host wall time is process 0; simulated time of device N is process N + 1,
    one thread per stream, measured from the device's clock when the trace began."""
    out = [_meta("process_name", HOST_PID, 0, "host (wall clock)"),
           _meta("thread_name", HOST_PID, 0, "ops")]
    sim_start = trace.metadata.get("sim_start_us", {})
    tracks: dict[tuple[int, int], list] = {}
    host = []
    described: dict[int, str] = {}  # id(record) -> text; records are shared between events

    def describe(records) -> list[str]:
        out = []
        for t in records:
            text = described.get(id(t))
            if text is None:
                text = described[id(t)] = _describe(t)
            out.append(text)
        return out

    for e in trace.events:
        args = {
            "index": e.index, "kind": e.kind, "phase": e.phase, "module": e.module,
            "call": e.call, "source": e.source,
            "inputs": describe(e.inputs), "outputs": describe(e.outputs),
        }
        if e.reason:
            args["reason"] = e.reason
        host.append({"name": e.op, "cat": e.served_by, "ph": "X", "pid": HOST_PID, "tid": 0,
                     "ts": e.host_start_ns / 1000, "dur": e.host_ns / 1000, "args": args})
        if e.sim_start_us is not None:
            zero = sim_start.get(str(e.device), 0.0)
            tracks.setdefault((e.device, e.stream), []).append({
                "name": e.op, "cat": e.served_by, "ph": "X", "pid": e.device + 1,
                "tid": e.stream, "ts": e.sim_start_us - zero, "dur": e.sim_us, "args": args,
            })
    host.sort(key=lambda ev: ev["ts"])
    out += host
    for device, stream in sorted(tracks):
        if not any(ev["pid"] == device + 1 and ev["ph"] == "M" for ev in out):
            out.append(_meta("process_name", device + 1, 0, f"mtia_sim:{device} (simulated)"))
        out.append(_meta("thread_name", device + 1, stream, f"stream {stream}"))
        out += sorted(tracks[device, stream], key=lambda ev: ev["ts"])
    return {"traceEvents": out, "displayTimeUnit": "ns", "otherData": trace.metadata}


def save_chrome_trace(trace: Trace, path) -> None:
    """Write the Chrome trace export of `trace` (open it in https://ui.perfetto.dev),
    atomically."""
    write_atomically(path, to_chrome_trace(trace))


def _meta(name: str, pid: int, tid: int, value: str) -> dict:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": {"name": value}}


def _describe(t: TensorRecord) -> str:
    shape = "x".join(map(str, t.shape)) or "scalar"
    view = " view" if t.is_view else ""
    return f"{t.dtype}[{shape}] stride={list(t.strides)} @{t.storage:#x}+{t.storage_offset}{view}"
