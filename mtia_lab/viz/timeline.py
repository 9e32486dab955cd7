"""The simulated timeline of a trace: one lane per (device, stream), one bar per kernel or copy.

Reads only what `mtia_lab.trace()` recorded (each OpEvent's `sim_start_us`, `sim_end_us`,
`stream`, `device`); it never re-runs anything, so a trace loaded from JSON draws the same.
Views (no device work, `sim_start_us is None`) have no bar.

Why a picture of streams: a stream is an ordered queue, so bars in one lane never overlap; work
on *different* streams of one device may run at the same time. That is the whole point of a
side stream (a copy overlapping compute), and `overlaps()` measures it: for each pair of lanes
on one device, the simulated time both were busy.

Renderings:
- text: a header, one ASCII bar per lane (`#` busy), the events of each lane in fixed columns
  (times in simulated us, so nbval compares them: they do not change run to run), and the
  overlaps; compared exactly by tests;
- SVG: hand-written (no Graphviz needed), a time axis, lanes as rows, bars coloured by kind
  (native, fallback), overlap windows shaded across the lanes that share them. Bars closer than
  a pixel are merged ("N ops"), so a trace of 100,000 events still draws a bounded picture.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

from ..trace.events import OpEvent, Trace
from .display import View

WIDTH = 760  # SVG width in px
LABEL_W = 120  # lane labels on the left (at least; wider for longer labels)
LANE_H = 28
ASCII_W = 60  # characters of the text twin's bars
MAX_ROWS = 12  # events listed per lane in the text twin
KIND_FILL = {"native": "#4c9be8", "fallback": "#e76f51", "compiled": "#8e5cc2",
             "collective": "#e9c46a", "wait": "#d9d9d9"}  # the last two: mtia_lab.distributed
COPY_FILL = "#2a9d8f"  # copies (host<->device, device<->device) apart from compute
OTHER_FILL = "#8d99ae"  # a merged bar of several kinds
OVERLAP_FILL = "#f4a261"

Lane_key = tuple[int, int]  # (device, stream)


# -- data model ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Span:
    """One piece of device work: a trace event's simulated interval."""

    index: int  # event index in the trace
    op: str
    kind: str
    start_us: float
    end_us: float


@dataclass(frozen=True, slots=True)
class Lane:
    """All work queued on one stream of one device, in start order."""

    device: int
    stream: int
    spans: tuple[Span, ...]
    rank: int | None = None  # set for a trace of several ranks (mtia_lab.distributed)

    @property
    def label(self) -> str:
        default = " (default)" if self.stream == 0 else ""
        rank = f"rank {self.rank} " if self.rank is not None else ""
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
    """The lanes of a trace, sorted by (device, stream), and the time they cover."""

    lanes: tuple[Lane, ...]
    skipped: int  # events with no device time (views, ops that queued nothing)

    @property
    def start_us(self) -> float:
        return min((ln.spans[0].start_us for ln in self.lanes), default=0.0)

    @property
    def end_us(self) -> float:
        return max((s.end_us for ln in self.lanes for s in ln.spans), default=0.0)

    def lane(self, device: int, stream: int, rank: int | None = None) -> Lane:
        for ln in self.lanes:
            if (ln.device, ln.stream, ln.rank) == (device, stream, rank):
                return ln
        have = ", ".join(ln.label for ln in self.lanes) or "none"
        raise KeyError(f"no lane for device {device} stream {stream} in this trace (lanes: {have})")

    def overlaps(self) -> list[Overlap]:
        """Every pair of lanes on one device that were busy at the same time (non-zero)."""
        out = []
        for i, a in enumerate(self.lanes):
            for b in self.lanes[i + 1:]:
                if a.device != b.device or a.rank != b.rank:
                    continue
                windows = _intersect(a.intervals(), b.intervals())
                total = sum(hi - lo for lo, hi in windows)
                if total > 0:
                    out.append(Overlap(a, b, total, tuple(windows)))
        return out


def timeline_of(trace: Trace | list[OpEvent]) -> Timeline:
    """The timeline of a trace's events that did device work."""
    lanes: dict[Lane_key, list[Span]] = {}
    skipped = 0
    for e in trace:
        if e.sim_start_us is None or e.stream is None or e.sim_end_us <= e.sim_start_us:
            skipped += 1
            continue
        span = Span(e.index, e.op, e.kind, e.sim_start_us, e.sim_end_us)
        lanes.setdefault((getattr(e, "rank", -1), e.device, e.stream), []).append(span)
    return Timeline(
        tuple(
            Lane(dev, stream, tuple(sorted(spans, key=lambda s: (s.start_us, s.index))),
                 None if rank == -1 else rank)
            for (rank, dev, stream), spans in sorted(lanes.items())
        ),
        skipped,
    )


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


# -- view ---------------------------------------------------------------------------------------
class TimelineView(View):
    """A trace's simulated timeline as text and SVG."""

    def __init__(self, timeline: Timeline, title: str = "simulated timeline") -> None:
        self.timeline = timeline
        self.title = title

    def to_text(self) -> str:
        return render_text(self.timeline, self.title)

    def to_svg(self) -> str:
        return render_svg(self.timeline, self.title)


def timeline_view(trace: Trace | list[OpEvent], title: str = "") -> TimelineView:
    """The timeline of `trace` (from `with mtia_lab.trace() as t:`, or load_trace)."""
    label = getattr(trace, "metadata", {}).get("label", "") if title == "" else title
    return TimelineView(timeline_of(trace), label or "simulated timeline")


def _f(us: float) -> str:
    return f"{us:.3f}"


def _short(op: str) -> str:
    return op.removeprefix("aten::")


def _op_counts(ops: list[str]) -> str:
    counts: dict[str, int] = {}
    for op in ops:
        counts[_short(op)] = counts.get(_short(op), 0) + 1
    return ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())


def render_text(tl: Timeline, title: str = "simulated timeline") -> str:
    if not tl.lanes:
        return f"{title}: no device work recorded ({tl.skipped} events without device time)"
    t0, t1 = tl.start_us, tl.end_us
    n = sum(len(ln.spans) for ln in tl.lanes)
    lines = [
        f"{title}: {n} ops with device time on {len(tl.lanes)} lanes, "
        f"simulated {_f(t0)} .. {_f(t1)} (us)"
        + (f"; {tl.skipped} without device time (views)" if tl.skipped else ""),
    ]
    width = max(len(ln.label) for ln in tl.lanes)
    scale = ASCII_W / (t1 - t0) if t1 > t0 else 0.0
    for ln in tl.lanes:
        bar = [" "] * ASCII_W
        for lo, hi in ln.intervals():
            a = min(ASCII_W - 1, int((lo - t0) * scale))
            b = max(a + 1, min(ASCII_W, round((hi - t0) * scale)))
            bar[a:b] = "#" * (b - a)
        lines.append(f"  {ln.label:<{width}} |{''.join(bar)}|")
    for ln in tl.lanes:
        lines.append("")
        ops = f"{len(ln.spans)} op" + ("s" if len(ln.spans) > 1 else "")
        waited = sum(s.end_us - s.start_us for s in ln.spans if s.kind == "wait")
        waiting = f" (waiting for other ranks {_f(waited)})" if waited else ""
        lines.append(f"{ln.label}: {ops}, busy for {_f(ln.busy_us)} simulated us{waiting}")
        lines.append(f"  {'#':>5}  {'op':<28} {'kind':<8} {'start_us':>11} {'end_us':>11}")
        for s in ln.spans[:MAX_ROWS]:
            lines.append(
                f"  {s.index:>5}  {_short(s.op):<28.28} {s.kind:<8} "
                f"{_f(s.start_us):>11} {_f(s.end_us):>11}"
            )
        if len(ln.spans) > MAX_ROWS:
            lines.append(f"  ... {len(ln.spans) - MAX_ROWS} more")
    lines.append("")
    overlaps = tl.overlaps()
    if not overlaps:
        lines.append("overlaps: none (no two streams of a device were busy at the same time)")
    for ov in overlaps:
        lines.append(
            f"overlap: {ov.a.label} and {ov.b.label} both busy for "
            f"{_f(ov.overlap_us)} simulated us "
            f"({_op_counts(ov.ops(ov.a))} | {_op_counts(ov.ops(ov.b))})"
        )
    return "\n".join(lines)


def _merge_bars(lane: Lane, x_of) -> list[tuple[float, float, list[Span]]]:
    """Bars in px; spans whose bars would touch within a pixel share one bar."""
    bars: list[tuple[float, float, list[Span]]] = []
    for s in lane.spans:
        x0, x1 = x_of(s.start_us), x_of(s.end_us)
        if bars and x0 - bars[-1][1] < 1.0 and (x1 - x0 < 1.0 or bars[-1][1] - bars[-1][0] < 1.0):
            lo, hi, group = bars[-1]
            bars[-1] = (lo, max(hi, x1), group + [s])
        else:
            bars.append((x0, x1, [s]))
    return bars


def _fill(s: Span) -> str:
    if s.kind == "native" and "copy" in s.op:
        return COPY_FILL
    return KIND_FILL.get(s.kind, OTHER_FILL)


def _svg_text(x: float, y: float, text: str, anchor: str = "start", size: int = 11,
              fill: str = "#222222") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-family="monospace" font-size="{size}" '
        f'text-anchor="{anchor}" fill="{fill}">{html.escape(text)}</text>'
    )


def _ticks(t0: float, t1: float, count: int = 6) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten) covering [t0, t1]."""
    span = t1 - t0
    if span <= 0:
        return [t0]
    raw = span / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = -(-t0 // step) * step
    out, t = [], first
    while t <= t1 + 1e-9:
        out.append(round(t, 9))
        t += step
    return out


def render_svg(tl: Timeline, title: str = "simulated timeline") -> str:
    pad, top = 10, 46
    label_w = max([LABEL_W] + [7 * len(ln.label) + 2 * pad for ln in tl.lanes])
    plot_w = WIDTH - label_w - 2 * pad
    height = top + LANE_H * max(1, len(tl.lanes)) + 40
    parts = [_svg_text(pad, 18, title, size=13)]
    t0, t1 = tl.start_us, tl.end_us
    scale = plot_w / (t1 - t0) if t1 > t0 else 0.0

    def x_of(us: float) -> float:
        return label_w + pad + (us - t0) * scale

    if not tl.lanes:
        parts.append(_svg_text(pad, 40, "no device work recorded"))
    else:
        parts.append(_svg_text(pad, 34, f"simulated time (us), {_f(t0)} .. {_f(t1)}", size=10))
    lane_y = {ln.key: top + i * LANE_H for i, ln in enumerate(tl.lanes)}
    bottom = top + LANE_H * len(tl.lanes)
    # Overlap windows first, so bars draw on top of the shading.
    for ov in tl.overlaps():
        ya = lane_y[ov.a.key]
        yb = lane_y[ov.b.key]
        y0, y1 = min(ya, yb) + 1, max(ya, yb) + LANE_H - 1
        for lo, hi in ov.windows:
            parts.append(
                f'<rect class="overlap" x="{x_of(lo):.1f}" y="{y0}" '
                f'width="{max(1.0, (hi - lo) * scale):.1f}" height="{y1 - y0}" '
                f'fill="{OVERLAP_FILL}" fill-opacity="0.45"/>'
            )
    for ln in tl.lanes:
        y = lane_y[ln.key]
        parts.append(
            f'<line x1="{label_w}" y1="{y + LANE_H}" x2="{WIDTH - pad}" y2="{y + LANE_H}" '
            'stroke="#dddddd"/>'
        )
        parts.append(_svg_text(pad, y + LANE_H * 0.62, ln.label, size=11))
        for x0, x1, group in _merge_bars(ln, x_of):
            w = max(1.0, x1 - x0)
            fills = {_fill(s) for s in group}
            fill = fills.pop() if len(fills) == 1 else OTHER_FILL
            name = _short(group[0].op) if len(group) == 1 else f"{len(group)} ops"
            tip = (
                f"{name}: {_f(group[0].start_us)} .. {_f(max(s.end_us for s in group))} us"
            )
            parts.append(
                f'<rect class="op" x="{x0:.1f}" y="{y + 4}" width="{w:.1f}" '
                f'height="{LANE_H - 8}" fill="{fill}" stroke="#ffffff" stroke-width="0.5">'
                f"<title>{html.escape(tip)}</title></rect>"
            )
            if w >= 7 * len(name) + 6:
                parts.append(
                    _svg_text(x0 + w / 2, y + LANE_H * 0.62, name, "middle", 10, "#ffffff")
                )
    # Time axis under the lanes.
    parts.append(
        f'<line x1="{x_of(t0):.1f}" y1="{bottom}" x2="{x_of(t1):.1f}" y2="{bottom}" '
        'stroke="#555555"/>'
    )
    for t in _ticks(t0, t1) if tl.lanes else []:
        x = x_of(t)
        parts.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" '
                     'stroke="#555555"/>')
        parts.append(_svg_text(x, bottom + 16, f"{t:g}", "middle", 10))
    legend_y = bottom + 32
    lx = label_w + pad
    legend = (("compute", KIND_FILL["native"]), ("copy", COPY_FILL),
              ("CPU fallback", KIND_FILL["fallback"]), ("streams overlap", OVERLAP_FILL))
    if any(s.kind == "compiled" for ln in tl.lanes for s in ln.spans):
        legend += (("compiled kernel", KIND_FILL["compiled"]),)
    if any(s.kind == "collective" for ln in tl.lanes for s in ln.spans):
        legend += (("collective", KIND_FILL["collective"]),
                   ("waiting for a rank", KIND_FILL["wait"]))
    for label, fill in legend:
        parts.append(f'<rect x="{lx}" y="{legend_y - 9}" width="10" height="10" fill="{fill}"/>')
        parts.append(_svg_text(lx + 14, legend_y, label, size=10))
        lx += 14 + 7 * len(label) + 16
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height + 4}" '
        f'viewBox="0 0 {WIDTH} {height + 4}">'
        f'<rect width="100%" height="100%" fill="#ffffff"/>' + "".join(parts) + "</svg>"
    )
