"""LayoutExplorer: change size, stride, offset and storage length; see the layout at once.

An ipywidgets box: four inputs, a message line and the picture. Every change rebuilds the
`StridedLayout` from the numbers (inspect/layout.py) and redraws it; a combination that would
read outside the storage shows LayoutError's message (which element, which cell, the fix)
instead of a picture. The state a test or a notebook reads is `explorer.record` (the current
layout, or None) and `explorer.error` (the message, or ""). The summary lines are drawn once,
in the picture; the message line shows only a refusal.

A live widget does not survive a saved notebook reopened without its kernel ("model not
found"), so notebooks show `layout_view(...)` by default and open this with `.widget()`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import ipywidgets as widgets

from ..inspect.layout import LayoutError, StridedLayout, strided_layout
from .display import text_html, widget_bundle
from .layout_render import render_svg, render_text
from .svg_html import svg_img_html


class LayoutExplorer(widgets.VBox):
    """Interactive stride layout over a storage of `storage_len` cells of tensor `name` (its
    dtype and device named in the picture, as the tensor it started from)."""

    def __init__(
        self, size: Sequence[int] = (3, 4), stride: Sequence[int] = (4, 1),
        storage_offset: int = 0, storage_len: int | None = None, *, name: str = "t",
        dtype: str = "float32", device: str = "cpu",
        others: tuple[StridedLayout, ...] = (),
    ) -> None:
        if storage_len is None:
            storage_len = strided_layout(size, stride, storage_offset).storage_len
        self.name, self.dtype, self.device, self.others = name, dtype, device, others
        field = widgets.Layout(width="240px")
        self.size = widgets.Text(_join(size), description="size", continuous_update=False,
                                 layout=field)
        self.stride = widgets.Text(_join(stride), description="stride",
                                   continuous_update=False, layout=field)
        self.offset = widgets.IntText(storage_offset, description="offset", layout=field)
        self.storage_len = widgets.IntText(storage_len, description="storage", layout=field)
        self.message = widgets.HTML()  # only a refusal: the picture carries the summary
        self.message.add_class("mtia-layout-message")
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
            self.record = StridedLayout(
                _parse(self.size.value, "size"), _parse(self.stride.value, "stride"),
                self.offset.value, self.storage_len.value, self.name, self.dtype,
                self.device, others=self.others,
            )
        except LayoutError as exc:
            self.record, self.error = None, str(exc)
            self.message.value = f'<pre style="color:#b00020">{html.escape(self.error)}</pre>'
            self.picture.value = ""
            return
        self.error = ""
        self.message.value = ""
        self.picture.value = svg_img_html(render_svg(self.record), "stride layout")

    def to_text(self) -> str:
        if self.record is None:
            return f"layout explorer: {self.error}"
        return render_text(self.record)

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs) -> dict:
        """The widget, and its static form: the picture (or the refusal) and the text twin."""
        static = self.picture.value if self.record is not None else text_html(self.to_text())
        return widget_bundle(self, self.to_text(), static, include, exclude)


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
