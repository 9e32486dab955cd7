"""The clock calibration as a picture: predicted against measured, one point a kernel.

A log-log scatter of a `Calibration` (mtia_lab/calibration/): each priced kernel at (measured,
predicted) microseconds, the diagonal where they agree and the band within 1.5x shaded; eager
ops and Inductor's kernels in two colours. The text twin is the report's summary and its
misses (calibration/report.py), so terminal, notebook and saved notebook say the same.
"""

from __future__ import annotations

import html
import math

from ..calibration.pricing import TARGET_RATIO, Calibration
from ..calibration.report import summary, table
from . import palette
from .display import View

WIDTH, HEIGHT, MARGIN = 560, 460, 60
SOURCE_COLOURS = {"eager": palette.EAGER_POINT.hex, "inductor": palette.INDUCTOR_POINT.hex}
SOURCE_LABELS = {"eager": "eager ops", "inductor": "Inductor kernels"}


class CalibrationView(View):
    """Predicted against measured device time for every priced kernel of one GPU."""

    def __init__(self, calibration: Calibration, clock: str = "device") -> None:
        self.calibration = calibration
        self.clock = clock

    def to_text(self) -> str:
        return "\n".join(summary(self.calibration) + table(self.calibration))

    def to_svg(self) -> str:
        rows = self.calibration.priced(self.clock)
        values = [v for r in rows for v in (r.measured_us, r.predicted_us)]
        low = 10 ** math.floor(math.log10(min(values)))
        high = 10 ** math.ceil(math.log10(max(values)))
        span = math.log10(high) - math.log10(low)
        plot_w, plot_h = WIDTH - 2 * MARGIN, HEIGHT - 2 * MARGIN

        def x(us: float) -> float:
            return MARGIN + (math.log10(us) - math.log10(low)) / span * plot_w

        def y(us: float) -> float:
            return HEIGHT - MARGIN - (math.log10(us) - math.log10(low)) / span * plot_h

        parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
                 f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">',
                 f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
        band = [(low, low / TARGET_RATIO), (high, high / TARGET_RATIO),
                (high, high * TARGET_RATIO), (low, low * TARGET_RATIO)]
        parts.append(f'<clipPath id="plot"><rect x="{MARGIN}" y="{MARGIN}" width="{plot_w}" '
                     f'height="{plot_h}"/></clipPath>')
        points = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in band)
        parts.append(f'<polygon clip-path="url(#plot)" fill="{palette.WITHIN_BAND.hex}" '
                     f'points="{points}"/>')
        parts.append(f'<line x1="{x(low):.1f}" y1="{y(low):.1f}" x2="{x(high):.1f}" '
                     f'y2="{y(high):.1f}" stroke="{palette.AGREEMENT_LINE.hex}" '
                     'stroke-dasharray="4 3"/>')
        for decade in range(round(math.log10(low)), round(math.log10(high)) + 1):
            us = 10.0 ** decade
            label = f"{us:g}"
            parts.append(f'<line x1="{x(us):.1f}" y1="{HEIGHT - MARGIN}" x2="{x(us):.1f}" '
                         f'y2="{HEIGHT - MARGIN + 4}" stroke="black"/>'
                         f'<text x="{x(us):.1f}" y="{HEIGHT - MARGIN + 16}" '
                         f'text-anchor="middle">{label}</text>')
            parts.append(f'<line x1="{MARGIN - 4}" y1="{y(us):.1f}" x2="{MARGIN}" '
                         f'y2="{y(us):.1f}" stroke="black"/>'
                         f'<text x="{MARGIN - 6}" y="{y(us) + 4:.1f}" '
                         f'text-anchor="end">{label}</text>')
        parts.append(f'<rect x="{MARGIN}" y="{MARGIN}" width="{plot_w}" height="{plot_h}" '
                     'fill="none" stroke="black"/>')
        for row in rows:
            colour = SOURCE_COLOURS[row.source]
            title = html.escape(f"{row.name}: measured {row.measured_us:.1f} us, predicted "
                                f"{row.predicted_us:.1f} us ({row.bound})")
            parts.append(f'<circle cx="{x(row.measured_us):.1f}" cy="{y(row.predicted_us):.1f}" '
                         f'r="3.5" fill="{colour}" fill-opacity="0.75"><title>{title}</title>'
                         '</circle>')
        env = self.calibration.measurements.environment
        share = self.calibration.share_within(TARGET_RATIO, self.clock)
        title = (f"{env['gpu']}: {self.clock} time of {len(rows)} kernels, {share:.0%} within "
                 f"{TARGET_RATIO}x (shaded)")
        parts.append(f'<text x="{MARGIN}" y="{MARGIN - 24}" font-size="13">'
                     f'{html.escape(title)}</text>')
        for i, (source, colour) in enumerate(SOURCE_COLOURS.items()):
            parts.append(f'<circle cx="{MARGIN + 8 + 110 * i}" cy="{MARGIN - 9}" r="4" '
                         f'fill="{colour}"/><text x="{MARGIN + 16 + 110 * i}" '
                         f'y="{MARGIN - 5}">{SOURCE_LABELS[source]}</text>')
        parts.append(f'<text x="{MARGIN + plot_w / 2}" y="{HEIGHT - 18}" text-anchor="middle">'
                     'measured on the GPU (us)</text>')
        parts.append(f'<text transform="translate(16 {MARGIN + plot_h / 2}) rotate(-90)" '
                     'text-anchor="middle">predicted by the cost model (us)</text>')
        parts.append("</svg>")
        return "\n".join(parts)


def calibration_view(chip: str = "h100", clock: str = "device") -> CalibrationView:
    """The stored measurements of `chip` ("h100", "h200") re-priced, as a view."""
    from ..calibration import compare

    if clock not in ("device", "loop"):
        raise ValueError(f"clock must be 'device' or 'loop', not {clock!r}")
    return CalibrationView(compare(chip), clock)
