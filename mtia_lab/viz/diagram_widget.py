"""DiagramExplorer: a kernel-rendered diagram you can pan, zoom, hover and click in JupyterLab.

An anywidget whose JavaScript (static/diagram.js, plain ES module, no build step, nothing from
a CDN) attaches behaviour to the SVG the kernel already drew with the pinned Graphviz: every
node, edge and cluster there carries a class and a `<title>` with its DOT name. The view sends
`details` keyed by those names (an op's shapes, strides, source line; a kernel's decision), so
the browser needs no Graphviz of its own.

`view.explore()` makes one (any View with a picture). A live widget does not survive a saved
notebook reopened without its kernel, so the static SVG/`<img>` stays the default output, and
the widget's own bundle carries it too (`text/html`) for exports that drop widget state.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from .svg_html import svg_figure_html

STATIC = Path(__file__).parent / "static"


class DiagramExplorer(anywidget.AnyWidget):
    """Pan/zoom/hover/click over an SVG; `selected` is the DOT name of the last click."""

    _esm = STATIC / "diagram.js"
    _css = STATIC / "diagram.css"

    svg = traitlets.Unicode("").tag(sync=True)
    # DOT name -> {"title": str, "rows": [[key, value], ...], "members": [node names]}
    details = traitlets.Dict().tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    message = traitlets.Unicode("").tag(sync=True)  # the kernel's answer to the last click
    height = traitlets.Int(600).tag(sync=True)  # the viewport's height cap in px

    def __init__(self, svg: str, details: dict[str, dict] | None = None, *, text: str = "",
                 height: int = 600) -> None:
        super().__init__(svg=svg, details=details or {}, height=height)
        self.text = text
        # Called with the DOT name of a click; may return a new (svg, details) to show
        # instead (e.g. a collapsed module drawn open).
        self.on_select: Callable[[str], tuple[str, dict] | None] | None = None

    @traitlets.observe("selected")
    def _on_select(self, change: dict[str, Any]) -> None:
        name = change["new"]
        if not name:
            self.message = ""
            return
        title = self.details.get(name, {}).get("title", name)
        redrawn = self.on_select(name) if self.on_select is not None else None
        if redrawn is not None:
            self.details, self.svg = redrawn[1], redrawn[0]
            self.message = f"the kernel has it: explorer.selected == {name!r}: drawn open"
            return
        self.message = f"the kernel has it: explorer.selected == {name!r} ({title})"

    def select(self, name: str) -> None:
        """Select a node or cluster by its DOT name, as a click would."""
        if name not in self.details and f"<title>{name}</title>" not in self.svg:
            known = ", ".join(list(self.details)[:8])
            raise KeyError(f"{name!r} is no node or cluster of this diagram (e.g. {known})")
        self.selected = name

    def _repr_mimebundle_(self, **kwargs) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        # What an export without widget state shows: the picture and its text twin.
        alt = self.text.splitlines()[0] if self.text else ""
        data["text/html"] = svg_figure_html(self.svg, alt)
        if self.text:
            data["text/plain"] = self.text
        return bundle
