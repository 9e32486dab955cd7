"""Traces of what the device did: record with `mtia_lab.trace()`, save, load, export.

    with mtia_lab.trace() as t:
        loss = model(x).sum(); loss.backward()
    t.summary()                       # per op: count, kinds, host and simulated time, bytes
    mtia_lab.trace_io.save_trace(t, "run.json")   # or: from mtia_lab.trace.io import save_trace

Note: `mtia_lab.trace` (the attribute) is the recording function; import from this package with
`from mtia_lab.trace import Trace` or `from mtia_lab.trace.io import save_trace`.
"""

from __future__ import annotations

from .events import CallGroup, DispatchPath, OpEvent, OpSummary, TensorRecord, Trace
from .io import TraceFormatError, load_trace, save_trace, to_chrome_trace
from .recorder import Tracer, trace

__all__ = [
    "CallGroup", "DispatchPath", "OpEvent", "OpSummary", "TensorRecord", "Trace",
    "TraceFormatError", "Tracer", "load_trace", "save_trace", "to_chrome_trace", "trace",
]
