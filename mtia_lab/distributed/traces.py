"""Every rank's trace in one: events with a rank, collectives joining the ranks.

Each rank records its own `mtia_lab.trace()` (the launcher does it with `trace=True`); the
launcher brings them back and `merge_traces` makes one `RankedTrace`:

- its events are `RankedEvent`s: an OpEvent's fields plus `rank`, so every view that reads
  OpEvents (summary, explorer, timeline) reads them too, and the ones that know about ranks
  (the explorer's rank filter, the timeline's one row per rank and stream, the Chrome export's
  one process per rank) use the field;
- `collectives()` joins the events of one collective across ranks: they share a collective
  id (the `call` of a "collective" event: "allreduce #3 (group 0)"), which is the same on
  every rank because the ranks agreed on the sequence number before any byte moved;
- `time_split()` says, per rank, how the simulated window was spent: compute, collectives,
  waiting for a slower rank, and idle (nothing queued).

Simulated clocks are comparable across ranks: every collective starts on all ranks at the
same simulated time (when the last one arrived), so after the first collective the ranks'
clocks agree on what "now" is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..trace.events import OpEvent, Trace
from ..trace.io import load_trace, save_trace
from .events import COLLECTIVE, WAIT

RankedEvent = NamedTuple(  # noqa: UP014  (the fields are OpEvent's, computed)
    "RankedEvent",
    [(name, OpEvent.__annotations__[name]) for name in OpEvent._fields] + [("rank", int)],
)
RankedEvent.__doc__ = "An OpEvent of one rank: the same fields, then `rank`."
RankedEvent.sim_us = OpEvent.sim_us
RankedEvent.served_by = OpEvent.served_by


@dataclass(frozen=True, slots=True)
class RankPart:
    """One rank's share of a collective: when it arrived, started, ended (simulated us)."""

    rank: int
    event: int  # index of its "collective" event in the merged trace
    arrival_us: float
    start_us: float
    end_us: float

    @property
    def waited_us(self) -> float:
        return self.start_us - self.arrival_us


@dataclass(frozen=True, slots=True)
class Collective:
    """One collective as all its ranks saw it."""

    id: str  # "allreduce #3 (group 0)", the same on every rank
    op: str  # "c10d::allreduce"
    reason: str  # the interconnect model's algorithm and formula
    parts: tuple[RankPart, ...]

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(p.rank for p in self.parts)

    @property
    def slowest(self) -> int:
        """The rank that arrived last: the others waited for it."""
        return max(self.parts, key=lambda p: p.arrival_us).rank


@dataclass(frozen=True, slots=True)
class RankTime:
    """How one rank spent the merged trace's simulated window."""

    rank: int
    compute_us: float  # kernels, copies, fallbacks, compiled kernels
    collective_us: float  # bytes on the interconnect
    wait_us: float  # in a collective, waiting for a slower rank
    idle_us: float  # nothing queued on any stream
    window_us: float


class RankedTrace(Trace):
    """The traces of several ranks, merged (see the module doc). A `Trace`: summaries and
    views work on it; `filter(rank=...)` selects ranks."""

    def __repr__(self) -> str:
        return (f"<RankedTrace {self.metadata.get('label', '')!r}: {len(self.events)} events "
                f"on {len(self.ranks())} ranks, {len(self.collectives())} collectives>")

    def filter(self, *, rank: int | None = None, **criteria) -> RankedTrace:
        events = self.events if rank is None else [e for e in self.events if e.rank == rank]
        if any(v is not None for v in criteria.values()):
            events = Trace(events, self.metadata).filter(**criteria).events
        return RankedTrace(list(events), dict(self.metadata))

    # -- saved and drawn by trace/io.py through these two (trace/ knows nothing of ranks) -----
    def to_plain(self) -> Trace:
        """A plain Trace of OpEvents whose metadata "event_ranks" holds each event's rank: what
        `save_trace` writes (and `load_trace` reads back)."""
        return ranked_to_plain(self)

    def chrome_trace(self) -> dict:
        """One process per rank, collectives joined by flow arrows (see `to_chrome_trace`)."""
        return to_chrome_trace(self)

    def save(self, path) -> None:
        """Write this trace in the mtia_lab trace format (the ranks in metadata)."""
        save_trace(self, path)

    @classmethod
    def load(cls, path) -> RankedTrace:
        """Read what `save` (or `mtia_lab.trace.io.save_trace` of a RankedTrace) wrote."""
        return ranked_from_plain(load_trace(path), path)

    def ranks(self) -> list[int]:
        return sorted({e.rank for e in self.events})

    def collectives(self) -> list[Collective]:
        """The collectives, in the order they were issued, each joined across its ranks."""
        waits = {(e.rank, e.call): e for e in self.events if e.kind == WAIT}
        joined: dict[str, list] = {}
        for e in self.events:
            # (a functional collective's own dispatch event is kind "collective" too, without
            # device time: the process group's event, with the span, follows it)
            if e.kind == COLLECTIVE and e.sim_start_us is not None:
                wait = waits.get((e.rank, e.call))
                arrival = wait.sim_start_us if wait is not None else e.sim_start_us
                joined.setdefault(e.call, [e.op, e.reason, []])[2].append(
                    RankPart(e.rank, e.index, arrival, e.sim_start_us, e.sim_end_us))
        return [Collective(cid, op, reason, tuple(sorted(parts, key=lambda p: p.rank)))
                for cid, (op, reason, parts) in joined.items()]

    def time_split(self) -> list[RankTime]:
        """Per rank: compute, collective, wait and idle time in the common simulated window
        (from the first event of any rank to the last)."""
        timed = [e for e in self.events if e.sim_start_us is not None]
        if not timed:
            return []
        t0 = min(e.sim_start_us for e in timed)
        t1 = max(e.sim_end_us for e in timed)
        out = []
        for rank in self.ranks():
            mine = [e for e in timed if e.rank == rank]
            compute = sum(e.sim_us for e in mine if e.kind not in (COLLECTIVE, WAIT))
            coll = sum(e.sim_us for e in mine if e.kind == COLLECTIVE)
            wait = sum(e.sim_us for e in mine if e.kind == WAIT)
            busy = _union_length([(e.sim_start_us, e.sim_end_us) for e in mine])
            out.append(RankTime(rank, compute, coll, wait, (t1 - t0) - busy, t1 - t0))
        return out

    def time_split_text(self) -> str:
        """`time_split()` as a fixed-width table (simulated us: stable from run to run)."""
        rows = self.time_split()
        lines = [f"{'rank':>4}  {'compute':>10}  {'collective':>10}  {'waiting':>10}  "
                 f"{'idle':>10}  {'window':>10}"]
        for r in rows:
            lines.append(f"{r.rank:>4}  {r.compute_us:>10.3f}  {r.collective_us:>10.3f}  "
                         f"{r.wait_us:>10.3f}  {r.idle_us:>10.3f}  {r.window_us:>10.3f}")
        return "\n".join(lines)


def merge_traces(traces: list[Trace], label: str = "") -> RankedTrace:
    """One RankedTrace from the traces of ranks 0..N-1 (in rank order)."""
    events: list[RankedEvent] = []
    sim_start: dict[str, dict] = {}
    calls: dict[tuple[int, int], int] = {}  # (rank, call_id) -> call id in the merged trace
    for rank, trace in enumerate(traces):
        if trace is None:
            raise ValueError(f"rank {rank} has no trace: launch with trace=True")
        sim_start[str(rank)] = trace.metadata.get("sim_start_us", {})
        for e in trace.events:
            call_id = calls.setdefault((rank, e.call_id), len(calls) + 1)  # unique across ranks
            events.append(RankedEvent(**dict(e._asdict(), index=len(events), call_id=call_id),
                                      rank=rank))
    first = traces[0].metadata if traces else {}
    metadata = {k: v for k, v in first.items() if k not in ("label", "sim_start_us")}
    metadata.update({"label": label or f"{len(traces)} ranks", "ranks": len(traces),
                     "rank_sim_start_us": sim_start})
    return RankedTrace(events, metadata)


def ranked_to_plain(trace: RankedTrace) -> Trace:
    """A plain Trace of OpEvents whose metadata "event_ranks" holds each event's rank."""
    return Trace([_plain(e) for e in trace.events],
                 dict(trace.metadata, event_ranks=[e.rank for e in trace.events]))


def _plain(event: RankedEvent) -> OpEvent:
    """The OpEvent of a RankedEvent: every field but `rank`."""
    fields = event._asdict()
    del fields["rank"]
    return OpEvent(**fields)


def save_ranked_trace(trace: RankedTrace, path) -> None:
    """Write a RankedTrace in the mtia_lab trace format, ranks in metadata "event_ranks"
    (`RankedTrace.save`; `mtia_lab.trace.io.save_trace` does the same)."""
    trace.save(path)


def load_ranked_trace(path) -> RankedTrace:
    """Read what save_ranked_trace (or save_trace of a RankedTrace) wrote; `load_trace` reads
    it as a plain Trace, the ranks in its metadata "event_ranks"."""
    return RankedTrace.load(path)


def ranked_from_plain(plain: Trace, path="<data>") -> RankedTrace:
    """The RankedTrace of a plain Trace read from a file save_ranked_trace wrote."""
    ranks = plain.metadata.pop("event_ranks", None)
    if ranks is None or len(ranks) != len(plain.events):
        raise ValueError(f"{path} holds a single-rank trace: read it with mtia_lab.load_trace")
    return RankedTrace([RankedEvent(**e._asdict(), rank=r)
                        for e, r in zip(plain.events, ranks, strict=True)],
                       plain.metadata)


def to_chrome_trace(trace: RankedTrace) -> dict:
    """Chrome trace events (Perfetto) with one process per rank: its device streams as
    threads on the simulated clock. A collective's parts are joined by flow arrows (one flow
    id per collective), so the viewer links the ranks that took part."""
    out: list[dict] = []
    named: set[tuple] = set()
    for e in trace.events:
        if e.sim_start_us is None:
            continue
        pid = e.rank
        if (pid, None) not in named:
            named.add((pid, None))
            out.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                        "args": {"name": f"rank {e.rank} (mtia_sim:{e.device}, simulated)"}})
        tid = e.device * 1000 + e.stream
        if (pid, tid) not in named:
            named.add((pid, tid))
            out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                        "args": {"name": f"mtia_sim:{e.device} stream {e.stream}"}})
        args = {"index": e.index, "rank": e.rank, "kind": e.kind, "call": e.call,
                "module": e.module}
        if e.reason:
            args["reason"] = e.reason
        out.append({"name": e.op, "cat": e.served_by, "ph": "X", "pid": pid, "tid": tid,
                    "ts": e.sim_start_us, "dur": e.sim_us, "args": args})
    for number, collective in enumerate(trace.collectives(), start=1):
        last = len(collective.parts) - 1
        for i, part in enumerate(collective.parts):
            e = trace.events[part.event]
            out.append({"name": collective.id, "cat": "collective", "id": number,
                        "ph": "s" if i == 0 else ("f" if i == last else "t"), "bp": "e",
                        "pid": e.rank, "tid": e.device * 1000 + e.stream, "ts": e.sim_start_us})
    return {"traceEvents": out, "displayTimeUnit": "ns", "otherData": trace.metadata}


def save_chrome_trace(trace: RankedTrace, path) -> None:
    """Write the Chrome trace export of a RankedTrace (as `trace.export_chrome_trace`)."""
    trace.export_chrome_trace(path)


def _union_length(intervals) -> float:
    total, end = 0.0, None
    for lo, hi in sorted(intervals):
        if end is None or lo > end:
            total += hi - lo
            end = hi
        elif hi > end:
            total += hi - end
            end = hi
    return total
