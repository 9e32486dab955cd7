"""The simulated timeline of a trace drawn: one row per lane, one bar per span (the data model,
lanes, spans and overlaps, is timeline.py's `timeline_of`).

Renderings:
- text: a header, one ASCII bar per lane (`#` busy), the events of each lane in fixed columns
  (times in simulated us, so nbval compares them: they do not change run to run), and the
  overlaps; compared exactly by tests;
- SVG: hand-written (no Graphviz needed), a time axis, lanes as rows, bars coloured by what
  the work was for: forward, backward, optimizer, copies (CPU fallbacks stand out in red;
  compiled kernels are outlined), overlap windows shaded across the lanes that share them.
  Every bar wide enough is labelled; every bar has a hover `<title>` (op, phase, times). Bars
  closer than a pixel are merged ("N ops"), so a trace of 100,000 events still draws a bounded
  picture. Two timelines meant to be compared share one time scale with `same_scale_as=`.

"Optimizer" is read from the records, which do not mark `optimizer.step()` (see
timeline.py's `purpose_of`); the legend says so.
"""

from __future__ import annotations

import html
import math

from ..trace.events import OpEvent, Trace, require_trace
from . import palette
from .display import View
from .text_fit import abbreviate
from .timeline import Lane, Span, Timeline, timeline_of

WIDTH = 760  # SVG width in px
LABEL_W = 120  # lane labels on the left (at least; wider for longer labels)
LANE_H = 28
ASCII_W = 60  # characters of the text twin's bars
MAX_ROWS = 12  # events listed per lane in the text twin
# Fill by what the work was for (Tableau 10 colours: told apart by most readers).
PURPOSE_FILL = {
    "forward": palette.FORWARD.hex, "backward": palette.BACKWARD.hex,
    "optimizer": palette.OPTIMIZER.hex, "copy": palette.COPY.hex,
    "fallback": palette.FALLBACK.hex, "collective": palette.COLLECTIVE.hex,
    "wait": palette.WAIT.hex, "host": palette.HOST.hex,
}
PURPOSE_LEGEND = {
    "forward": "forward", "backward": "backward",
    "optimizer": "optimizer (in-place update after backward)", "copy": "copy",
    "fallback": "CPU fallback", "collective": "collective (mtia_lab.distributed)",
    "wait": "waiting for a rank", "host": "host issuing ops (the profile's host_op_us)",
}
DARK_TEXT = {"copy", "wait", "host"}  # fills light enough for dark text
COMPILED_STROKE = "#222222"  # compiled kernels: outlined
OTHER_FILL = palette.MIXED.hex  # a merged bar of several purposes
OVERLAP_FILL = palette.OVERLAP.hex
FONT = 12  # px: lane labels, bar labels, axis (the notebook's own text is 13-14 px)


# -- view ---------------------------------------------------------------------------------------
class TimelineView(View):
    """A trace's simulated timeline as text and SVG."""

    def __init__(self, timeline: Timeline, title: str = "simulated timeline",
                 span_us: float | None = None) -> None:
        self.timeline = timeline
        self.title = title
        self.span_us = span_us  # simulated us across the plot (None: this trace's own)

    @property
    def own_span_us(self) -> float:
        return self.timeline.end_us - self.timeline.start_us

    def to_text(self) -> str:
        return render_text(self.timeline, self.title)

    def to_svg(self) -> str:
        return render_svg(self.timeline, self.title, self.span_us)


def timeline_view(trace: Trace | list[OpEvent], title: str = "", *,
                  same_scale_as=None) -> TimelineView:
    """The timeline of `trace` (from `with mtia_lab.trace() as t:`, or load_trace).

    `same_scale_as`: another timeline view or trace (or a list of them) to compare with: the
    plot then covers the longest of their durations, so one microsecond is as wide in both
    pictures (draw the longer one first, or give each the other)."""
    require_trace(trace, "timeline_view", events=True)
    label = getattr(trace, "metadata", {}).get("label", "") if title == "" else title
    view = TimelineView(timeline_of(trace), label or "simulated timeline")
    if same_scale_as is not None:
        others = same_scale_as if isinstance(same_scale_as, (list, tuple)) else [same_scale_as]
        spans = [view.own_span_us]
        for other in others:
            if isinstance(other, TimelineView):
                spans.append(other.span_us or other.own_span_us)
            else:
                tl = timeline_of(other)
                spans.append(tl.end_us - tl.start_us)
        view.span_us = max(spans)
    return view


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
    n = sum(len(ln.spans) for ln in tl.stream_lanes)
    lines = [
        f"{title}: {n} ops with device time on {len(tl.stream_lanes)} lanes, "
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
        if ln.is_host:
            lines.append(f"{ln.label}: {ops}, issuing for {_f(ln.busy_us)} simulated us "
                         f"({_host_verdict(tl, ln)})")
            _span_rows(ln, lines)
            continue
        waited = sum(s.end_us - s.start_us for s in ln.spans if s.kind == "wait")
        waiting = f" (waiting for other ranks {_f(waited)})" if waited else ""
        lines.append(f"{ln.label}: {ops}, busy for {_f(ln.busy_us)} simulated us{waiting}")
        _span_rows(ln, lines)
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


def _span_rows(ln: Lane, lines: list[str]) -> None:
    """A lane's spans in fixed columns (the first MAX_ROWS)."""
    lines.append(f"  {'#':>5}  {'op':<28} {'kind':<8} {'start_us':>11} {'end_us':>11}")
    for s in ln.spans[:MAX_ROWS]:
        lines.append(
            f"  {s.index:>5}  {abbreviate(_short(s.op), 28):<28} {s.kind:<8} "
            f"{_f(s.start_us):>11} {_f(s.end_us):>11}"
        )
    if len(ln.spans) > MAX_ROWS:
        lines.append(f"  ... {len(ln.spans) - MAX_ROWS} more")


def _host_verdict(tl: Timeline, host: Lane) -> str:
    """Host-bound or not: the host lane's issuing time against its device's busy time."""
    device = tl.device_busy_us(host.device, host.rank)
    if host.busy_us > device:
        return f"host-bound: its streams were busy for {_f(device)}"
    return f"its streams were busy for {_f(device)}: the device sets the pace"


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


def _svg_text(x: float, y: float, text: str, anchor: str = "start", size: int = FONT,
              fill: str = "#222222", weight: str = "normal") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-family="sans-serif" font-size="{size}" '
        f'font-weight="{weight}" text-anchor="{anchor}" fill="{fill}">{html.escape(text)}</text>'
    )


def _text_w(text: str, size: int = FONT) -> float:
    """A generous width of sans-serif text in px (no font metrics at hand)."""
    return 0.62 * size * len(text)


def _bar_label(name: str, width: float) -> str:
    """The op's name if it fits in the bar, else as much as fits with an ellipsis (3 letters at
    least), else nothing: the bar's hover title still names it."""
    if _text_w(name) + 6 <= width:
        return name
    keep = int((width - 6) / (0.62 * FONT)) - 1
    return name[:keep] + "\u2026" if keep >= 3 else ""


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


def render_svg(tl: Timeline, title: str = "simulated timeline",
               span_us: float | None = None) -> str:
    pad, top = 10, 50
    label_w = max([LABEL_W] + [int(_text_w(ln.label)) + 2 * pad for ln in tl.lanes])
    plot_w = WIDTH - label_w - 2 * pad
    height = top + LANE_H * max(1, len(tl.lanes)) + 44
    parts = [_svg_text(pad, 20, title, size=14, weight="bold")]
    t0, t1 = tl.start_us, tl.end_us
    span = max(span_us or 0.0, t1 - t0)
    scale = plot_w / span if span > 0 else 0.0

    def x_of(us: float) -> float:
        return label_w + pad + (us - t0) * scale

    if not tl.lanes:
        parts.append(_svg_text(pad, 42, "no device work recorded"))
    else:
        shared = f"; plot width = {span:.3f} us, shared scale" if span > t1 - t0 + 1e-9 else ""
        parts.append(_svg_text(pad, 38, f"simulated time (us), {_f(t0)} .. {_f(t1)}{shared}",
                               size=FONT - 1))
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
                f'fill="{OVERLAP_FILL}" fill-opacity="0.35"/>'
            )
    used: set[str] = set()
    compiled = False
    for ln in tl.lanes:
        y = lane_y[ln.key]
        parts.append(
            f'<line x1="{label_w}" y1="{y + LANE_H}" x2="{WIDTH - pad}" y2="{y + LANE_H}" '
            'stroke="#dddddd"/>'
        )
        parts.append(_svg_text(pad, y + LANE_H * 0.62, ln.label))
        for x0, x1, group in _merge_bars(ln, x_of):
            w = max(1.0, x1 - x0)
            purposes = {s.purpose for s in group}
            used |= purposes
            purpose = purposes.pop() if len(purposes) == 1 else ""
            fill = PURPOSE_FILL.get(purpose, OTHER_FILL)
            is_compiled = all(s.kind == "compiled" for s in group)
            compiled = compiled or is_compiled
            name = _short(group[0].op) if len(group) == 1 else f"{len(group)} ops"
            what = purpose or "/".join(sorted({s.purpose for s in group}))
            tip = (f"{name} ({what}{', compiled kernel' if is_compiled else ''}): "
                   f"{_f(group[0].start_us)} .. {_f(max(s.end_us for s in group))} us")
            stroke = (f'stroke="{COMPILED_STROKE}" stroke-width="1"' if is_compiled
                      else 'stroke="#ffffff" stroke-width="0.5"')
            parts.append(
                f'<rect class="{"host" if ln.is_host else "op"}" x="{x0:.1f}" y="{y + 4}" '
                f'width="{w:.1f}" '
                f'height="{LANE_H - 8}" fill="{fill}" {stroke}>'
                f"<title>{html.escape(tip)}</title></rect>"
            )
            label = _bar_label(name, w)
            if label:
                colour = "#222222" if purpose in DARK_TEXT else "#ffffff"
                parts.append(_svg_text(x0 + w / 2, y + LANE_H * 0.62 + 1, label, "middle",
                                       FONT, colour))
    # Time axis under the lanes.
    parts.append(
        f'<line x1="{x_of(t0):.1f}" y1="{bottom}" x2="{x_of(t0 + span):.1f}" y2="{bottom}" '
        'stroke="#555555"/>'
    )
    for t in _ticks(t0, t0 + span) if tl.lanes else []:
        x = x_of(t)
        parts.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" '
                     'stroke="#555555"/>')
        parts.append(_svg_text(x, bottom + 17, f"{t:g}", "middle", FONT - 1))
    legend_y = bottom + 36
    lx = pad
    legend = [(PURPOSE_LEGEND[p], PURPOSE_FILL[p], "") for p in PURPOSE_FILL if p in used]
    if compiled:
        legend.append(("compiled kernel (outlined)", "#ffffff", COMPILED_STROKE))
    if tl.overlaps():
        legend.append(("streams overlap", OVERLAP_FILL, ""))
    for label, fill, stroke in legend:
        item_w = 15 + int(_text_w(label, FONT - 1)) + 14
        if lx > pad and lx + item_w > WIDTH:  # the legend wraps rather than run off the edge
            lx, legend_y, height = pad, legend_y + 18, height + 18
        outline = f' stroke="{stroke}"' if stroke else ""
        parts.append(f'<rect x="{lx}" y="{legend_y - 10}" width="11" height="11" '
                     f'fill="{fill}"{outline}/>')
        parts.append(_svg_text(lx + 15, legend_y, label, size=FONT - 1))
        lx += item_w
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height + 4}" '
        f'viewBox="0 0 {WIDTH} {height + 4}">'
        f'<rect width="100%" height="100%" fill="#ffffff"/>' + "".join(parts) + "</svg>"
    )
