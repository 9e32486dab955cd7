"""The recorder: the one object that puts events into the open traces.

Several traces may be open at once (nested, or several devices): one `Recorder` (`RECORDER`) is
installed while any trace is open and writes each event into every open trace. Two kinds of
writer feed it:

- its own dispatcher hooks (dispatch_hooks.py): every aten op that reaches the device;
- listeners of work the dispatcher never sees, through the public `emit()`: each compiler's
  trace listener (compiler/trace_listener.py, inductor/trace_events.py) and the process
  group's collectives (distributed/events.py). They build an `OpEvent` by keyword and ask the
  recorder for what only it knows (`new_call()`, `module`, `tensor_record()`).

`mtia_lab.trace()` (tracer.py) opens and closes traces on it.
"""

from __future__ import annotations

import weakref
from time import perf_counter_ns

from ..backend.aten import dispatch
from ..backend.runtime.device_state import RUNTIME
from ..backend.runtime.streams import Charge
from .dispatch_hooks import DispatchHooks, _PerThread
from .events import DispatchPath, OpEvent, Trace
from .tensor_records import TensorRecords


class Recorder(DispatchHooks, TensorRecords):
    """Writes events into every open trace; installs its dispatcher hooks while any is open."""

    def __init__(self) -> None:
        self.traces: list[tuple[Trace, int]] = []  # (trace, perf_counter_ns at its start)
        self.previous = None  # the observer installed before us: we keep telling it
        self.local = _PerThread()  # pending, modules, call: per thread
        self.module_names: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.node_info: dict[int, tuple[str, str]] = {}  # node sequence nr -> (module, source)
        self.node_floor = 0  # nodes older than the first trace belong to no traced module
        self.next_call = 0
        self.last_node = (-1, 0)  # (sequence nr, call_id) of the last backward node seen
        self.call_names: dict = {}
        self.op_names: dict = {}
        self.paths: dict[tuple, DispatchPath] = {}
        self.sources: dict[tuple, tuple] = {}  # user_source's cache, see DispatchHooks._open
        self._init_records()
        self.mode = None  # the _CallMode while installed
        self.handles: list = []

    # -- for every writer ------------------------------------------------------------------
    @property
    def recording(self) -> bool:
        """Is any trace open? A writer with nothing to record returns at once when not."""
        return bool(self.traces)

    @property
    def module(self) -> str:
        """The nn.Module path running now on this thread ("MLP.fc1"; "" outside any module)."""
        modules = self.modules
        return modules[-1] if modules else ""

    def new_call(self) -> int:
        """A fresh call id: events of one call (a compiled graph's run, a collective) share it."""
        self.next_call += 1
        return self.next_call

    def emit(self, event: OpEvent, *, started_ns: int | None = None) -> None:
        """Put `event` into every open trace (nothing happens while none is open).

        Build the event by keyword (`OpEvent(op=..., kind=..., ...)`); the recorder fills in
        what depends on the trace or on the moment:
        - `index`: its position in each trace;
        - `host_start_ns`: `started_ns` (a `time.perf_counter_ns()` reading; default: now minus
          the event's `host_ns`) counted from each trace's start;
        - `device_bytes`: the bytes allocated on the event's device now (the allocator's
          statistics)."""
        if not self.traces:
            return
        if started_ns is None:
            started_ns = perf_counter_ns() - event.host_ns
        device_bytes = RUNTIME.device(event.device).allocator.allocated_bytes
        for trace, trace_start in self.traces:
            events = trace.events
            events.append(event._replace(index=len(events), device_bytes=device_bytes,
                                         host_start_ns=started_ns - trace_start))

    # -- opening and closing ---------------------------------------------------------------
    def open(self, trace: Trace) -> None:
        try:
            if not self.traces:
                if self.mode is not None or dispatch._OBSERVER is self:
                    self._uninstall()  # what an interrupted open left behind
                self._install()
            self.traces.append((trace, perf_counter_ns()))
        except BaseException:  # a KeyboardInterrupt half-way: leave nothing installed
            if not self.traces:
                self._uninstall()
            raise

    def close(self, trace: Trace, error: BaseException | None) -> None:
        if self.pending:  # ops that raised: their after_op never came
            reason = f"raised {type(error).__name__}: {error}" if error else "raised an error"
            for facts_ in self.pending:
                self._emit_op(facts_, perf_counter_ns(), (), None, reason.splitlines()[0][:200])
            self.pending.clear()
        start = next((s for t, s in self.traces if t is trace), None)
        if start is None:  # closed already (`__exit__` twice): nothing left to do
            return
        self.traces = [(t, s) for t, s in self.traces if t is not trace]
        trace.metadata["host_duration_ns"] = perf_counter_ns() - start
        if error is not None:
            trace.metadata["error"] = f"{type(error).__name__}: {error}".splitlines()[0][:500]
        if not self.traces:
            self._uninstall()



def host_issue(span: Charge) -> tuple[float, float] | None:
    """An event's `host_issue_us` from the charge that queued its work: the host's interval
    issuing it, or None when it took no simulated time."""
    return (span.host_start_us, span.host_end_us) if span.host_end_us > span.host_start_us else None


RECORDER = Recorder()
