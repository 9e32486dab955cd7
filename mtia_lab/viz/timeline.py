"""The simulated timeline of a trace, as data: one lane per (device, stream), one span per kernel
or copy. Its pictures (text and SVG) are drawn by timeline_views.py.

Reads only what `mtia_lab.trace()` recorded (each OpEvent's `sim_start_us`, `sim_end_us`,
`stream`, `device`); it never re-runs anything, so a trace loaded from JSON draws the same.
Views (no device work, `sim_start_us is None`) have no span.

Why lanes of streams: a stream is an ordered queue, so spans in one lane never overlap; work
on *different* streams of one device may run at the same time. That is the whole point of a
side stream (a copy overlapping compute), and `overlaps()` measures it: for each pair of lanes
on one device, the simulated time both were busy.

The host lane: a chip profile may price issuing an op on the host (`host_op_us`: a GPU's eager
dispatch cost; 0 on the MTIA profiles). Each event then records its host interval
(`OpEvent.host_issue_us`), and the timeline has one "host" lane per device, above its stream
lanes, only when some event has one: small ops whose host lane is busier than their streams are
host-bound (the device waits for the host), which a fixed launch cost would hide.

"Optimizer" is read from the records, which do not mark `optimizer.step()`: an in-place op
(`add_`, `_foreach_mul_`...) outside any module, after the trace's first backward op, in the
forward phase (`purpose_of`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..trace.events import OpEvent, Trace, require_trace

Lane_key = tuple[int, int]  # (device, stream)
HOST = -1  # the stream of a device's host lane (it sorts above the device's streams)


@dataclass(frozen=True, slots=True)
class Span:
    """One piece of work: a trace event's simulated interval on a stream (or the host issuing
    it, in a host lane)."""

    index: int  # event index in the trace
    op: str
    kind: str
    start_us: float
    end_us: float
    purpose: str = "forward"  # forward / backward / optimizer / copy / fallback / host / ...


@dataclass(frozen=True, slots=True)
class Lane:
    """All work queued on one stream of one device, in start order; or, for stream HOST, the
    host's issuing of that work."""

    device: int
    stream: int
    spans: tuple[Span, ...]
    rank: int | None = None  # set for a trace of several ranks (mtia_lab.distributed)

    @property
    def is_host(self) -> bool:
        return self.stream == HOST

    @property
    def label(self) -> str:
        rank = f"rank {self.rank} " if self.rank is not None else ""
        if self.is_host:
            return f"{rank}mtia_sim:{self.device} host"
        default = " (default)" if self.stream == 0 else ""
        return f"{rank}mtia_sim:{self.device} stream {self.stream}{default}"

    @property
    def key(self) -> tuple:
        return (self.rank, self.device, self.stream)

    @property
    def busy_us(self) -> float:
        return sum(s.end_us - s.start_us for s in self.spans)

    def intervals(self) -> list[tuple[float, float]]:
        """The busy time as disjoint intervals (spans of one stream touch but do not overlap)."""
        return _union([(s.start_us, s.end_us) for s in self.spans])


@dataclass(frozen=True, slots=True)
class Overlap:
    """Two lanes of one device busy at the same simulated time."""

    a: Lane
    b: Lane
    overlap_us: float
    windows: tuple[tuple[float, float], ...]  # the intervals where both were busy

    def ops(self, lane: Lane) -> list[str]:
        """The ops of `lane` that ran (partly) inside the overlap windows."""
        return [
            s.op for s in lane.spans
            if any(s.start_us < hi and s.end_us > lo for lo, hi in self.windows)
        ]


@dataclass(frozen=True, slots=True)
class Timeline:
    """The lanes of a trace, sorted by (rank, device, stream: the host lane first), and the
    time they cover."""

    lanes: tuple[Lane, ...]
    skipped: int  # events with no device time (views, ops that queued nothing)

    @property
    def start_us(self) -> float:
        return min((ln.spans[0].start_us for ln in self.lanes), default=0.0)

    @property
    def end_us(self) -> float:
        return max((s.end_us for ln in self.lanes for s in ln.spans), default=0.0)

    @property
    def stream_lanes(self) -> tuple[Lane, ...]:
        return tuple(ln for ln in self.lanes if not ln.is_host)

    @property
    def host_lanes(self) -> tuple[Lane, ...]:
        """One per device whose events record a host issue interval (none on MTIA profiles)."""
        return tuple(ln for ln in self.lanes if ln.is_host)

    def device_busy_us(self, device: int, rank: int | None = None) -> float:
        """Simulated time any stream of the device was busy (overlapping streams count once):
        what a host lane is compared with."""
        return sum(hi - lo for lo, hi in _union([
            interval for ln in self.stream_lanes if (ln.device, ln.rank) == (device, rank)
            for interval in ln.intervals()]))

    def lane(self, device: int, stream: int, rank: int | None = None) -> Lane:
        for ln in self.lanes:
            if (ln.device, ln.stream, ln.rank) == (device, stream, rank):
                return ln
        have = ", ".join(ln.label for ln in self.lanes) or "none"
        raise KeyError(f"no lane for device {device} stream {stream} in this trace (lanes: {have})")

    def overlaps(self) -> list[Overlap]:
        """Every pair of stream lanes on one device that were busy at the same time."""
        out = []
        lanes = self.stream_lanes
        for i, a in enumerate(lanes):
            for b in lanes[i + 1:]:
                if a.device != b.device or a.rank != b.rank:
                    continue
                windows = _intersect(a.intervals(), b.intervals())
                total = sum(hi - lo for lo, hi in windows)
                if total > 0:
                    out.append(Overlap(a, b, total, tuple(windows)))
        return out


def timeline_of(trace: Trace | list[OpEvent]) -> Timeline:
    """The timeline of a trace's events that did device work."""
    require_trace(trace, "timeline_of", events=True)
    lanes: dict[Lane_key, list[Span]] = {}
    skipped = 0
    after_backward = False
    for e in trace:
        after_backward = after_backward or e.phase == "backward"
        if e.sim_start_us is None or e.stream is None or e.sim_end_us <= e.sim_start_us:
            skipped += 1
            continue
        rank = getattr(e, "rank", -1)
        span = Span(e.index, e.op, e.kind, e.sim_start_us, e.sim_end_us,
                    purpose_of(e, after_backward))
        lanes.setdefault((rank, e.device, e.stream), []).append(span)
        issue = e.host_issue_us
        if issue is not None and issue[1] > issue[0]:
            lanes.setdefault((rank, e.device, HOST), []).append(
                Span(e.index, e.op, e.kind, issue[0], issue[1], "host"))
    return Timeline(
        tuple(
            Lane(dev, stream, tuple(sorted(spans, key=lambda s: (s.start_us, s.index))),
                 None if rank == -1 else rank)
            for (rank, dev, stream), spans in sorted(lanes.items())
        ),
        skipped,
    )


def purpose_of(e: OpEvent, after_backward: bool) -> str:
    """What an event's device work was for (see the module doc for "optimizer")."""
    name = e.op.removeprefix("aten::").split(".")[0]
    if e.kind in ("collective", "wait"):  # mtia_lab.distributed
        return e.kind
    if "copy" in name:
        return "copy"
    if e.kind == "fallback":
        return "fallback"
    if e.phase == "backward":
        return "backward"
    if after_backward and not e.module and name.endswith("_"):
        return "optimizer"
    return "forward"


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for lo, hi in sorted(intervals):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def _intersect(a: list[tuple[float, float]], b: list[tuple[float, float]]):
    """Intersection of two sorted lists of disjoint intervals (a two-pointer sweep)."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out
