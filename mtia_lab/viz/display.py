"""How every mtia_lab view shows itself: terminal, notebook, saved notebook, nbval.

A view is a small object over recorded data with three renderings:

- `to_text()`: a fixed-width text twin. It is `text/plain` (so it must be stable: no
  `at 0x...` addresses, no timings that change run to run) and what tests compare exactly.
- `to_svg()`: a picture, or None. It goes out twice: as `image/svg+xml`, and as `text/html`
  holding `<img src="data:image/svg+xml;base64,...">`, because JupyterLab shows only the
  latter in a notebook it did not save itself and strips inline `<svg>` from untrusted HTML.
- `to_rich()`: a rich renderable for the terminal (`__rich__`).

Live widgets are opt-in (`view.widget()`): a widget saved in a notebook shows "Error
displaying widget" once the kernel is gone, so static output is the default.
If the picture cannot be drawn (say the renderer is missing), the notebook still gets the
text twin and the reason, never a broken image.
"""

from __future__ import annotations

import base64
import html
import re
from typing import Any

from .graphviz_render import DotError, GraphvizNotFound


def svg_img_html(svg: str, alt: str = "") -> str:
    """`<img>` with the SVG inline as base64: displays in saved and untrusted notebooks."""
    data = base64.b64encode(svg.encode()).decode()
    return f'<img src="data:image/svg+xml;base64,{data}" alt="{html.escape(alt)}"/>'


def widget_bundle(widget, text: str, static_html: str, include=None, exclude=None) -> dict:
    """A live widget's output bundle with its static form beside the widget view: `text/plain`
    (the text twin, not ipywidgets' `VBox(children=...)` repr) and `text/html` (the table or
    picture). A front end with widgets draws the widget; everything else (nbconvert without
    the widget state, GitHub, a JupyterLab that lost the model) shows the static form."""
    bundle = {"text/plain": text, "text/html": static_html}
    if widget._view_name is not None and widget.comm is not None:  # as ipywidgets' Widget does
        bundle["application/vnd.jupyter.widget-view+json"] = {
            "version_major": 2, "version_minor": 0, "model_id": widget.model_id}
    return {key: value for key, value in bundle.items()
            if (include is None or key in include) and (exclude is None or key not in exclude)}

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


def text_html(text: str) -> str:
    """The text twin as HTML (a <pre> block), for views without a picture."""
    return f"<pre>{html.escape(text)}</pre>"


class View:
    """Base class of views; subclasses implement `to_text`, and `to_svg` / `to_rich` if they
    have a picture or a better terminal form."""

    def to_text(self) -> str:
        raise NotImplementedError

    def to_svg(self) -> str | None:
        return None

    def to_rich(self) -> Any:
        from rich.text import Text

        return Text(self.to_text())

    # -- the protocols ------------------------------------------------------------------------
    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        text = self.to_text()
        bundle = {"text/plain": text}
        try:
            svg = self.to_svg()
        except (GraphvizNotFound, DotError) as exc:
            bundle["text/html"] = text_html(f"{text}\n\n(diagram not drawn: {exc})")
            svg = ""
        if svg is None:
            bundle["text/html"] = text_html(text)
        elif svg:
            bundle["image/svg+xml"] = svg
            alt = text.splitlines()[0] if text else type(self).__name__
            bundle["text/html"] = svg_figure_html(svg, alt)
        return {
            key: value for key, value in bundle.items()
            if (include is None or key in include) and (exclude is None or key not in exclude)
        }

    def __rich__(self) -> Any:
        return self.to_rich()

    def __repr__(self) -> str:
        return self.to_text()

    def details(self) -> dict[str, dict]:
        """What a click on a node or cluster shows in `explore()`: DOT name -> {"title",
        "rows": [[key, value], ...], "members": [names inside a cluster]}. None by default."""
        return {}

    def explore(self, height: int = 600):
        """The picture as a live widget in JupyterLab: pan, zoom, hover for a node's inputs and
        outputs, click for its details (`.selected` holds the last click). Opt-in: a saved
        notebook keeps the static picture of the view itself."""
        from .diagram_widget import DiagramExplorer

        svg = self.to_svg()
        if svg is None:
            raise ValueError(f"{type(self).__name__} has no picture to explore; use to_text()")
        return DiagramExplorer(svg, self.details(), text=self.to_text(), height=height)

    def save_svg(self, path: str) -> None:
        """Write the picture to a file (for slides, docs, or a browser)."""
        svg = self.to_svg()
        if svg is None:
            raise ValueError(f"{type(self).__name__} has no picture; use to_text() instead")
        with open(path, "w", encoding="utf-8") as f:
            f.write(svg)
