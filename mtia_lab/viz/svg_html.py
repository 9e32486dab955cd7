"""A picture (SVG) as notebook HTML: an inline `<img>`, and for a picture wider than the
notebook column, a scrolling window at its drawn size. Views (display.py) and the live diagram
widget (diagram_widget.py) both show pictures this way; a module of its own so neither imports
the other for it."""

from __future__ import annotations

import base64
import html
import re


def svg_img_html(svg: str, alt: str = "") -> str:
    """`<img>` with the SVG inline as base64: displays in saved and untrusted notebooks."""
    data = base64.b64encode(svg.encode()).decode()
    return f'<img src="data:image/svg+xml;base64,{data}" alt="{html.escape(alt)}"/>'


# JupyterLab's notebook column is about 830-950 px wide at a 1280 px window; it scales a wider
# <img> down (max-width: 100%), and a 1750 px diagram then shows 7 px text. A wider picture is
# shown at its drawn size instead, in a box that scrolls both ways and is at most WINDOW_PX
# tall: it opens on the picture's top-left corner with both scroll bars on screen (not 4,000 px
# further down), under a caption that names it (Graphviz centres the title, which a narrow
# column would cut).
WIDE_PX = 900
WINDOW_PX = 640
_SVG_WIDTH = re.compile(r'<svg\b[^>]*?\swidth="([\d.]+)(pt|px)?"')


def svg_width_px(svg: str) -> float | None:
    """The drawn width of an SVG in CSS px (Graphviz writes pt: 1 pt = 4/3 px)."""
    found = _SVG_WIDTH.search(svg)
    if not found:
        return None
    return float(found.group(1)) * (4 / 3 if found.group(2) == "pt" else 1)


def svg_figure_html(svg: str, alt: str = "") -> str:
    """`svg_img_html`, and for a picture wider than the notebook column, at its drawn size in a
    scrolling window under a caption (see WIDE_PX): text stays at the size it was drawn."""
    img = svg_img_html(svg, alt)
    width = svg_width_px(svg)
    if width is None or width <= WIDE_PX:
        return img
    caption = (f"{alt + ': ' if alt else ''}{width:.0f} px wide, shown at full size: scroll "
               "inside the box (or .explore() to pan and zoom)")
    return ('<div class="mtia-wide-diagram">'
            '<div class="mtia-wide-caption" style="font-family:monospace;font-size:12px;'
            f'margin-bottom:4px">{html.escape(caption)}</div>'
            f'<div class="mtia-wide-window" style="overflow: auto; max-width: 100%; '
            f'max-height: {WINDOW_PX}px">'
            + img.replace("<img ", '<img style="max-width: none" ', 1) + "</div></div>")
