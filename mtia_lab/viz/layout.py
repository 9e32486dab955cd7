"""Stride-layout views: a tensor's logical elements drawn over its storage.

`layout_view(t)` returns a `LayoutView` of the `StridedLayout` record (mtia_lab/inspect/layout.py),
drawn as text, SVG and rich by layout_render.py; `.widget()` opens the interactive
`LayoutExplorer` (layout_widget.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..inspect.layout import StridedLayout, layout_of, strided_layout
from .display import View
from .layout_render import MAX_CELLS, render_rich, render_svg, render_text
from .layout_widget import LayoutExplorer


class LayoutView(View):
    """A `StridedLayout` rendered as text, SVG and rich."""

    def __init__(self, record: StridedLayout, max_cells: int = MAX_CELLS) -> None:
        self.record = record
        self.max_cells = max_cells

    def to_text(self) -> str:
        return render_text(self.record, self.max_cells)

    def to_svg(self) -> str:
        return render_svg(self.record, self.max_cells)

    def to_rich(self) -> Any:
        return render_rich(self.record, self.max_cells)

    def widget(self):
        """The interactive explorer, starting from this layout's numbers."""
        r = self.record
        return LayoutExplorer(r.size, r.stride, r.storage_offset, r.storage_len, name=r.name,
                              dtype=r.dtype, device=r.device, others=r.others)


def layout_view(tensor: torch.Tensor | StridedLayout, name: str = "t", **others: torch.Tensor):
    """The stride layout of a CPU or mtia_sim tensor; keyword tensors are other views to
    check for a shared storage: `layout_view(x.t(), "xt", x=x)`."""
    if isinstance(tensor, StridedLayout):
        return LayoutView(tensor)
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"layout_view(tensor): expected a tensor or a StridedLayout, got "
                        f"{type(tensor).__name__}; for plain numbers use layout_view_from(size, "
                        "stride, storage_offset)")
    return LayoutView(layout_of(tensor, name, others))


def layout_view_from(
    size: Sequence[int], stride: Sequence[int], storage_offset: int = 0,
    storage_len: int | None = None, name: str = "t",
) -> LayoutView:
    """A layout from plain numbers (no tensor needed); see inspect.layout.strided_layout."""
    return LayoutView(strided_layout(size, stride, storage_offset, storage_len, name=name))
