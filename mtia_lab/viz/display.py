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

import html
from typing import Any

from .diagram_widget import DiagramExplorer
from .graphviz_render import DotError, GraphvizNotFound
from .svg_html import svg_figure_html


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
