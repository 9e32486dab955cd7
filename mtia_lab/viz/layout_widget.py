"""LayoutExplorer: change size, stride, offset and storage length; see the layout at once.

An ipywidgets box: four inputs, a message line and the picture. Every change rebuilds the
`StridedLayout` from the numbers (inspect/layout.py) and redraws it; a combination that would
read outside the storage shows LayoutError's message (which element, which cell, the fix)
instead of a picture. The state a test or a notebook reads is `explorer.record` (the current
layout, or None) and `explorer.error` (the message, or "").

A live widget does not survive a saved notebook reopened without its kernel ("model not
found"), so notebooks show `layout_view(...)` by default and open this with `.widget()`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import ipywidgets as widgets

from ..inspect.layout import LayoutError, StridedLayout, strided_layout
from .display import svg_img_html
from .layout import render_svg, summary_lines


class LayoutExplorer(widgets.VBox):
    """Interactive stride layout over a storage of `storage_len` cells."""

    def __init__(
        self, size: Sequence[int] = (3, 4), stride: Sequence[int] = (4, 1),
        storage_offset: int = 0, storage_len: int | None = None,
    ) -> None:
        if storage_len is None:
            storage_len = strided_layout(size, stride, storage_offset).storage_len
        self.size = widgets.Text(_join(size), description="size", continuous_update=False)
        self.stride = widgets.Text(_join(stride), description="stride", continuous_update=False)
        self.offset = widgets.IntText(storage_offset, description="offset")
        self.storage_len = widgets.IntText(storage_len, description="storage")
        self.message = widgets.HTML()
        self.picture = widgets.HTML()
        self.record: StridedLayout | None = None
        self.error = ""
        for control in (self.size, self.stride, self.offset, self.storage_len):
            control.observe(self._update, names="value")
        inputs = widgets.HBox([widgets.VBox([self.size, self.stride]),
                               widgets.VBox([self.offset, self.storage_len])])
        super().__init__([inputs, self.message, self.picture])
        self._update()

    def _update(self, change=None) -> None:
        try:
            self.record = strided_layout(
                _parse(self.size.value, "size"), _parse(self.stride.value, "stride"),
                self.offset.value, self.storage_len.value, name="t",
            )
        except LayoutError as exc:
            self.record, self.error = None, str(exc)
            self.message.value = f'<pre style="color:#b00020">{html.escape(self.error)}</pre>'
            self.picture.value = ""
            return
        self.error = ""
        self.message.value = f"<pre>{html.escape(chr(10).join(summary_lines(self.record)))}</pre>"
        self.picture.value = svg_img_html(render_svg(self.record), "stride layout")


def _join(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in values)


def _parse(text: str, what: str) -> tuple[int, ...]:
    """'3, 4' -> (3, 4); '' -> () (a 0-d tensor)."""
    items = [item.strip() for item in text.replace("(", "").replace(")", "").split(",")]
    try:
        return tuple(int(item) for item in items if item)
    except ValueError:
        raise LayoutError(
            f"{what} {text!r} is not a list of whole numbers: write them separated by commas, "
            "like 3, 4"
        ) from None
