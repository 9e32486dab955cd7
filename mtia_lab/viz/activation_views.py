"""Activation timelines and checkpoint trades drawn (reads records only; viz/display.py).

- `ActivationView`: the headline (peak, who holds it, the allocator's peak, simulated time),
  one row per saved-tensor event; the picture is two step lines over the events: activation
  bytes held by saved tensors (orange) and the device allocator's bytes above the baseline
  (blue), the forward / backward boundary dashed.
- `TradeView`: the variants of a step side by side, each against the first.
"""

from __future__ import annotations

import html

from ..backend.runtime.allocator import format_bytes
from ..instruments.activations import ActivationTimeline
from ..instruments.checkpointing import CheckpointTrade
from .display import View

MAX_ROWS = 40
WIDTH, HEIGHT, PAD = 640, 220, 48


def timeline_headline(t: ActivationTimeline) -> str:
    holders = ", ".join(f"{name} {format_bytes(n)}" for name, n in t.peak_holders[:4])
    more = len(t.peak_holders) - 4
    holders += f", {more} more" if more > 0 else ""
    lines = [
        f"activation timeline of {t.label}: {t.saved_count} tensors saved for backward; peak "
        f"{format_bytes(t.peak_bytes)} of activations held at once"
        + (f" ({holders})" if holders else ""),
        f"device allocator: peak {format_bytes(t.allocator_peak_bytes)} above the "
        f"{format_bytes(t.baseline_bytes)} baseline; simulated forward {t.forward_us:.2f} us, "
        f"backward {t.backward_us:.2f} us",
    ]
    if t.host_bytes:
        lines.append(f"{format_bytes(t.host_bytes)} of the saved activations are host tensors: "
                     "the compiled graph saved its inner (CPU) tensors, which the device "
                     "allocator does not count")
    return "\n".join(lines)


def render_text(t: ActivationTimeline, max_rows: int = MAX_ROWS) -> str:
    lines = [timeline_headline(t), "",
             f"  {'#':>3}  {'phase':<8}  {'event':<5}  {'tensor':>6}  {'producer':<24}  "
             f"{'shape':<12}  {'bytes':>10}  {'live':>10}  used by"]
    for e in t.events[:max_rows]:
        shape = "x".join(map(str, e.shape)) or "scalar"
        lines.append(f"  {e.index:>3}  {e.phase:<8}  {e.action:<5}  {e.tensor:>6}  "
                     f"{e.producer[:24]:<24}  {shape:<12}  {format_bytes(e.nbytes):>10}  "
                     f"{format_bytes(e.live_bytes):>10}  {e.node}".rstrip())
    if len(t.events) > max_rows:
        lines.append(f"  ... {len(t.events) - max_rows} more events")
    return "\n".join(lines)


def _polyline(values: list[float], top: float, color: str) -> str:
    n = max(len(values) - 1, 1)
    points = []
    for i, v in enumerate(values):
        x = PAD + (WIDTH - 2 * PAD) * i / n
        y = HEIGHT - PAD - (HEIGHT - 2 * PAD) * (v / top if top else 0)
        if points:
            points.append(f"{x:.1f},{points[-1].split(',')[1]}")  # a step, not a slope
        points.append(f"{x:.1f},{y:.1f}")
    return (f'<polyline points="{" ".join(points)}" fill="none" stroke="{color}" '
            'stroke-width="2"/>')


def render_svg(t: ActivationTimeline) -> str:
    live = [e.live_bytes for e in t.events]
    device = [max(e.allocated_bytes - t.baseline_bytes, 0) for e in t.events]
    top = max(live + device + [1])
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'font-family="Helvetica" font-size="11">',
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
             f'<text x="{PAD}" y="16" font-size="12">{html.escape(t.label)}</text>',
             f'<text x="{PAD}" y="32" fill="#e07b00">saved activations, peak '
             f'{format_bytes(t.peak_bytes)}</text>',
             f'<text x="{PAD + 220}" y="32" fill="#4c78a8">device allocator above the baseline, '
             f'peak {format_bytes(t.allocator_peak_bytes)}</text>',
             f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
             'stroke="#444"/>',
             f'<text x="{PAD}" y="{HEIGHT - PAD + 30}">saved-tensor events, in order</text>',
             f'<text x="4" y="{PAD + 4}">{format_bytes(top)}</text>']
    boundary = next((e.index for e in t.events if e.phase == "backward"), None)
    if boundary is not None and len(t.events) > 1:
        x = PAD + (WIDTH - 2 * PAD) * boundary / (len(t.events) - 1)
        parts += [f'<line x1="{x:.1f}" y1="{PAD}" x2="{x:.1f}" y2="{HEIGHT - PAD}" '
                  'stroke="#888" stroke-dasharray="4 3"/>',
                  f'<text x="{x + 4:.1f}" y="{HEIGHT - PAD + 16}">backward -></text>']
    if t.events:
        parts += [_polyline(device, top, "#4c78a8"), _polyline(live, top, "#e07b00")]
    parts.append("</svg>")
    return "\n".join(parts)


class ActivationView(View):
    """An ActivationTimeline as text, picture and rich."""

    def __init__(self, timeline: ActivationTimeline, max_rows: int = MAX_ROWS) -> None:
        self.timeline, self.max_rows = timeline, max_rows

    def to_text(self) -> str:
        return render_text(self.timeline, self.max_rows)

    def to_svg(self) -> str:
        return render_svg(self.timeline)


def trade_text(trade: CheckpointTrade) -> str:
    ref = trade.rows[0]
    lines = [f"checkpoint trade, against {ref.variant!r}: memory saved vs work recomputed "
             "(simulated clock, priced flops)", "",
             f"  {'variant':<16}  {'saved peak':>11}  {'device peak':>11}  {'memory saved':>12}"
             f"  {'backward us':>11}  {'+us':>8}  {'recomputed flops':>16}"]
    for row in trade.rows:
        saved, extra_us, extra_flops = trade.saved_vs_recomputed(row.variant)
        lines.append(f"  {row.variant[:16]:<16}  {format_bytes(row.saved_peak_bytes):>11}  "
                     f"{format_bytes(row.allocator_peak_bytes):>11}  "
                     f"{format_bytes(saved) if saved >= 0 else '-' + format_bytes(-saved):>12}  "
                     f"{row.backward_us:>11.2f}  {extra_us:>+8.2f}  {extra_flops:>16,.0f}")
    lines += ["", "saved peak: what autograd's saved-tensor hooks saw (selective checkpointing "
              "keeps its MUST_SAVE results in its own cache, out of the hooks' sight); "
              "device peak: the allocator's max_memory_allocated above the baseline"]
    return "\n".join(lines)


class TradeView(View):
    def __init__(self, trade: CheckpointTrade) -> None:
        self.trade = trade

    def to_text(self) -> str:
        return trade_text(self.trade)


def activation_view(timeline: ActivationTimeline, **kwargs) -> ActivationView:
    _require(timeline, ActivationTimeline, "activation_view(timeline)",
             "mtia_lab.instruments.activation_timeline(step)")
    return ActivationView(timeline, **kwargs)


def trade_view(trade: CheckpointTrade) -> TradeView:
    _require(trade, CheckpointTrade, "trade_view(trade)",
             "mtia_lab.instruments.checkpoint_trade(variants, ...)")
    return TradeView(trade)


def _require(value, kind: type, where: str, source: str) -> None:
    if not isinstance(value, kind):
        article = "an" if kind.__name__[0] in "AEIOU" else "a"
        raise TypeError(f"{where}: expected {article} {kind.__name__} (from {source}), "
                        f"got {type(value).__name__}")
