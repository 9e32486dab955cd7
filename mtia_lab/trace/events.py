"""What a trace records: one immutable `OpEvent` per op that reached the device, in a `Trace`.

This is the data model only. Renderers (rich tables, widgets, diagrams) read these records and
never re-run anything; every event goes in through the recorder (recorder.py: its own dispatcher
hooks, or `emit()` for the compilers' listeners and the collectives), and io.py is the only
(de)serialiser. Records are immutable and small (a NamedTuple, `__slots__`), and equal tensor
records and dispatch paths are shared between events, so a trace of 100,000 events stays cheap
to keep, filter and summarise.

Vocabulary:
- kind: how the device served the op -- "native" (a registry kernel), "fallback" (the CPU
  fallback, see `reason`) or "view" (no data moved; the result aliases its input's storage);
  "compiled" is one fused kernel of a torch.compile'd region (its aten nodes in `reason`);
- phase: "forward", or "backward" for ops run by autograd during `.backward()`;
- call: the top-level torch function the user called (`torch.matmul`, `F.layer_norm`, ...) that
  produced the event; events with one `call_id` are one call. A call that became several aten
  ops is a *composite* (see `Trace.calls`). In the backward phase the call is the autograd node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from ..records.display import view_for
from .chrome import plain_chrome_trace, save_chrome_trace

KINDS = ("native", "fallback", "view")
COMPILED = "compiled"  # a fused kernel of a torch.compile'd region (either compiler's listener)
ALL_KINDS = (*KINDS, COMPILED)  # views list COMPILED only when a trace has such events
PHASES = ("forward", "backward")


@dataclass(frozen=True, slots=True)
class TensorRecord:
    """A tensor as an op saw it: metadata and where its bytes live."""

    shape: tuple[int, ...]
    dtype: str  # "float32"
    strides: tuple[int, ...]  # in elements, as Tensor.stride()
    storage_offset: int  # in elements
    storage: int  # simulated device address of its DeviceStorage block (host: data pointer)
    storage_nbytes: int  # size of the whole storage, which views share
    device: str  # "mtia_sim:0", "cpu"
    view_of: int | None  # storage of the base tensor this one is a view of; None: not a view
    nbytes: int  # bytes of its own elements (numel * element size)

    @property
    def is_view(self) -> bool:
        return self.view_of is not None

    @property
    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count


@dataclass(frozen=True, slots=True)
class DispatchPath:
    """How PyTorch's dispatcher brought an op to the kernel that served it.

    `arg_keys` holds each tensor argument's dispatch key set, `merged` their union: the set the
    dispatcher reads the highest-priority key from. `steps` walks the keys from the highest
    priority down, saying what each one did; `chosen` says why this kernel served the op.
    """

    arg_keys: tuple[tuple[str, ...], ...]
    merged: tuple[str, ...]
    steps: tuple[str, ...]
    chosen: str

    @property
    def route(self) -> str:
        """One line: the keys that acted (not those that fell through), then the choice, e.g.
        "AutogradPrivateUse1 -> Python -> MTIATensor.__torch_dispatch__ -> registry: ..."."""
        acted = [
            step.split(":", 1)[0]
            for step in self.steps
            if "fall through" not in step and "not reached" not in step
            and not step.startswith(("__torch_dispatch__", "PythonTLSSnapshot"))
        ]
        if "Python" not in self.merged:  # a factory or host->device copy: PrivateUse1 served it
            return " -> ".join([*acted[:-1], self.chosen])
        return " -> ".join([*acted, "MTIATensor.__torch_dispatch__", self.chosen])


NO_PATH = DispatchPath((), (), (), "")  # an event's default: no dispatcher path recorded


class OpEvent(NamedTuple):
    """One aten op that reached the device (or one compiled kernel, collective, wait).

    A NamedTuple rather than a frozen dataclass: just as immutable, but made ten times faster,
    and one is made per recorded op (see benchmarks/bench_trace.py). Build one by keyword:
    every field has a default, so a writer names what it knows and a field added here (with
    its default) needs no change in any writer, in io.py's tables or in RankedEvent.
    `Recorder.emit` fills in `index`, `host_start_ns` and `device_bytes`.
    """

    index: int = 0  # position in its trace
    op: str = ""  # aten overload, "aten::add.Tensor"
    kind: str = ""  # "native" | "fallback" | "view" | "compiled" | "collective" | "wait"
    phase: str = "forward"  # "forward" | "backward"
    reason: str = ""  # why the fallback served it ("" otherwise); "raised ..." if the op failed
    dispatch: DispatchPath = NO_PATH
    inputs: tuple[TensorRecord, ...] = ()
    outputs: tuple[TensorRecord, ...] = ()
    allocated: int = 0  # device bytes allocated during the op (allocator blocks, rounded)
    freed: int = 0  # device bytes freed during the op
    device_bytes: int = 0  # bytes allocated on the device after the op
    host_start_ns: int = 0  # wall clock (perf_counter_ns) since the trace started
    host_ns: int = 0  # wall time of the kernel on the host
    sim_start_us: float | None = None  # simulated device clock; None for views (no device work)
    sim_end_us: float | None = None
    stream: int | None = None  # stream id on the device; None when no device work was queued
    device: int = 0  # device index
    source: str = ""  # "file.py:12", the user's line (mtia_lab.source.user_source)
    module: str = ""  # nn.Module path, "MLP.fc1" ("" outside any module)
    call: str = ""  # top-level torch function, or autograd node in backward
    call_id: int = 0  # events of one call share it
    # (start, end) of the host issuing the op's device work, on the device's simulated clock:
    # the profile's host_op_us per op (a GPU profile's eager dispatch cost); None when issuing
    # took no simulated time (the MTIA profiles) or the op queued no device work
    host_issue_us: tuple[float, float] | None = None

    @property
    def sim_us(self) -> float:
        return 0.0 if self.sim_start_us is None else self.sim_end_us - self.sim_start_us

    @property
    def host_issue_span_us(self) -> float:
        """Simulated microseconds the host spent issuing the op (0.0 when not modelled)."""
        issue = self.host_issue_us
        return 0.0 if issue is None else issue[1] - issue[0]

    @property
    def served_by(self) -> str:
        """One word for the summary: "backward" wins over how the op was served."""
        return "backward" if self.phase == "backward" else self.kind


@dataclass(frozen=True, slots=True)
class OpSummary:
    """All events of one aten overload, added up."""

    op: str
    count: int
    kinds: dict[str, int]  # kind -> count (either phase)
    host_ns: int
    sim_us: float
    allocated: int
    freed: int
    bytes_in: int
    bytes_out: int


@dataclass(frozen=True, slots=True)
class CallGroup:
    """The events of one top-level call; `kind` is "composite" when it became several aten ops."""

    call_id: int
    call: str
    phase: str
    module: str
    events: tuple[OpEvent, ...]

    @property
    def kind(self) -> str:
        return "composite" if len(self.events) > 1 else self.events[0].kind


@dataclass(eq=True)
class Trace:
    """The events of one `mtia_lab.trace()` block, in the order they ran, and what was traced.

    `metadata` holds plain JSON values: label, torch and mtia_lab versions, start time, and the
    simulated clock of each device when the trace began.
    """

    events: list[OpEvent] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[OpEvent]:
        return iter(self.events)

    def __getitem__(self, index):
        return self.events[index]

    def __repr__(self) -> str:
        kinds = ", ".join(f"{k}={n}" for k, n in sorted(self.kinds().items()))
        backward = self.phases().get("backward", 0)
        kinds += f"; {backward} in backward" if backward else ""
        label = self.metadata.get("label") or "trace"
        return (
            f"<Trace {label!r}: {len(self.events)} events ({kinds}), "
            f"host {self.host_ns() / 1e6:.3f} ms, simulated {self.sim_us():.3f} us>"
        )

    # -- how it shows itself: the view is looked up (records/display.py), never imported ------
    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """In a notebook a Trace shows the view registered for it (the summary table, with
        simulated times only so that a saved output stays the same from run to run)."""
        return view_for(self, "notebook")._repr_mimebundle_(include, exclude)

    def _repr_html_(self) -> str:
        return self._repr_mimebundle_(include={"text/html"})["text/html"]

    def __rich__(self):
        return view_for(self, "terminal").__rich__()

    # -- how it is saved: io.py asks the trace, so a subclass (RankedTrace) saves itself ------
    def to_plain(self) -> Trace:
        """The Trace of plain OpEvents that io.py writes; a subclass whose events hold more
        returns its events as OpEvents and the rest in metadata."""
        return self

    def chrome_trace(self) -> dict:
        """The Chrome trace event object of `io.to_chrome_trace` (one process for the host,
        one per device); a subclass may draw itself otherwise."""
        return plain_chrome_trace(self)

    def export_chrome_trace(self, path) -> None:
        """Write a Chrome trace event file, as torch.profiler's `prof.export_chrome_trace`."""
        save_chrome_trace(self, path)

    # -- selections --------------------------------------------------------------------------
    def filter(
        self,
        *,
        op: str | None = None,
        kind: str | None = None,
        phase: str | None = None,
        module: str | None = None,
        device: int | None = None,
    ) -> Trace:
        """The events that match every given criterion; `module` matches a path and its
        submodules ("MLP.fc1" matches "MLP.fc1" and "MLP.fc1.act")."""
        prefix = None if module is None else module + "."
        events = [
            e
            for e in self.events
            if (op is None or e.op == op)
            and (kind is None or e.kind == kind)
            and (phase is None or e.phase == phase)
            and (module is None or e.module == module or e.module.startswith(prefix))
            and (device is None or e.device == device)
        ]
        return Trace(events, dict(self.metadata))

    # -- summaries ---------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """op -> number of events."""
        return dict(Counter(e.op for e in self.events))

    def kinds(self) -> dict[str, int]:
        """kind -> number of events: how each op was served, in either phase (as the summary
        table counts them; `phases()` says how many ran in backward)."""
        return dict(Counter(e.kind for e in self.events))

    def phases(self) -> dict[str, int]:
        """phase -> number of events ("forward", "backward")."""
        return dict(Counter(e.phase for e in self.events))

    def host_ns(self) -> int:
        return sum(e.host_ns for e in self.events)

    def sim_us(self) -> float:
        return sum(e.sim_us for e in self.events)

    def allocated(self) -> int:
        return sum(e.allocated for e in self.events)

    def modules(self) -> list[str]:
        """Module paths in the order they first appear."""
        return list(dict.fromkeys(e.module for e in self.events if e.module))

    def devices(self) -> list[int]:
        return sorted({e.device for e in self.events})

    def summary(self) -> list[OpSummary]:
        """One row per aten overload, the most host time first."""
        rows: dict[str, list] = {}
        for e in self.events:
            row = rows.get(e.op)
            if row is None:
                row = rows[e.op] = [0, Counter(), 0, 0.0, 0, 0, 0, 0]
            row[0] += 1
            row[1][e.kind] += 1
            row[2] += e.host_ns
            row[3] += e.sim_us
            row[4] += e.allocated
            row[5] += e.freed
            row[6] += sum(t.nbytes for t in e.inputs)
            row[7] += sum(t.nbytes for t in e.outputs)
        out = [
            OpSummary(op, r[0], dict(r[1]), r[2], r[3], r[4], r[5], r[6], r[7])
            for op, r in rows.items()
        ]
        out.sort(key=lambda s: -s.host_ns)
        return out

    def calls(self) -> list[CallGroup]:
        """Events grouped by the top-level call that produced them, in order."""
        groups: dict[int, list[OpEvent]] = {}
        for e in self.events:
            groups.setdefault(e.call_id, []).append(e)
        return [
            CallGroup(cid, evs[0].call, evs[0].phase, evs[0].module, tuple(evs))
            for cid, evs in groups.items()
        ]

    def fallbacks(self) -> dict[str, str]:
        """op -> the reason the CPU fallback served it."""
        return {e.op: e.reason for e in self.events if e.kind == "fallback"}


def require_trace(value, where: str, events: bool = False) -> None:
    """A TypeError naming `where`'s argument unless `value` is a Trace (with `events`, also a
    list of its events): a view handed anything else would fail deep inside, on an attribute."""
    if isinstance(value, Trace):
        return
    if events and isinstance(value, (list, tuple)) and all(
            isinstance(e, tuple) and hasattr(e, "sim_start_us") for e in value):
        return
    also = " or a list of its events" if events else ""
    raise TypeError(f"{where}(trace): expected a Trace{also} (from `with mtia_lab.trace() as t:` "
                    f"or mtia_lab.load_trace), got {type(value).__name__}")
