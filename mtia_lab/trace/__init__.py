"""Traces of what the device did: record with `mtia_lab.trace()`, save, load, export.

    with mtia_lab.trace() as t:
        loss = model(x).sum(); loss.backward()
    t.summary()                       # per op: count, kinds, host and simulated time, bytes
    mtia_lab.trace.io.save_trace(t, "run.json")

Reading order:
    events.py          the records: OpEvent, TensorRecord, DispatchPath, Trace
    tracer.py          `mtia_lab.trace()`: opens and closes traces on the recorder
    recorder.py        the one Recorder: open traces, `emit()` for every writer
    dispatch_hooks.py  the dispatcher observer, TorchFunctionMode and module hooks (the hot path)
    tensor_records.py  TensorRecords made once and shared
    paths.py           why the dispatcher sent an op where it went (DispatchPath)
    io.py, chrome.py   the JSON format (save/load) and the Chrome trace export; files.py
The compilers' listeners (compiler/trace_listener.py, inductor/trace_events.py) and the
collectives (distributed/events.py) write through `Recorder.emit`; trace/ imports none of them.

`mtia_lab.trace` is this package *and* the recording function: the package is callable, so
`mtia_lab.trace()` is `mtia_lab.trace.trace()`, while `mtia_lab.trace.io` and
`from mtia_lab.trace.events import OpEvent` keep working as for any package.
"""

from __future__ import annotations

import sys
import types

from .chrome import save_chrome_trace, to_chrome_trace
from .events import CallGroup, DispatchPath, OpEvent, OpSummary, TensorRecord, Trace
from .io import TraceFormatError, load_trace, save_trace
from .tracer import Tracer, trace

__all__ = [
    "CallGroup", "DispatchPath", "OpEvent", "OpSummary", "TensorRecord", "Trace",
    "TraceFormatError", "Tracer", "load_trace", "save_chrome_trace", "save_trace",
    "to_chrome_trace", "trace",
]


class _CallablePackage(types.ModuleType):
    def __call__(self, label: str = "") -> Tracer:
        return trace(label)


sys.modules[__name__].__class__ = _CallablePackage
