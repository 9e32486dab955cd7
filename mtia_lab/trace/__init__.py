"""Traces of what the device did: record with `mtia_lab.trace()`, save, load, export.

    with mtia_lab.trace() as t:
        loss = model(x).sum(); loss.backward()
    t.summary()                       # per op: count, kinds, host and simulated time, bytes
    mtia_lab.trace.io.save_trace(t, "run.json")

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
