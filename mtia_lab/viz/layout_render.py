"""The renderers of a `StridedLayout` record (mtia_lab/inspect/layout.py): text, SVG and rich.
What the `LayoutView` (layout.py) and the interactive `LayoutExplorer` (layout_widget.py) both
draw; a module of its own so those two import it, not each other.

- text: the cell each element reads as a grid, then the storage as rows of cells with how
  many elements read each (`.` never); fixed width, compared exactly by tests;
- SVG: the logical grid above a row of storage boxes (one colour per storage cell: an element
  box has the colour of the cell it reads, so every view of one storage, and every element an
  `expand` points at one cell, match the cell they read; unread cells white and dashed, cells
  read several times outlined and marked `xN`), lines from elements to cells for small
  tensors, bars under the storage for the other views that share it; beyond `max_cells` cells
  it shows a window around the cells read;
- rich: the same text with the cell colours, for the terminal.
"""

from __future__ import annotations

import colorsys
import html
import itertools
import math
from collections.abc import Sequence
from typing import Any

from ..inspect.layout import StridedLayout

MAX_CELLS = 256  # storage cells drawn; a window around the cells read beyond this
ROW_CELLS = 16  # storage cells per text line
SVG_ROW_CELLS = 32  # storage boxes per SVG row
MAX_GRID = 16  # logical rows and columns shown per grid (the rest elided)
MAX_SLICES = 4  # 2-D slices of a >2-D tensor shown
MAX_LINES = 64  # elements up to which the SVG draws a line from each element to its cell
UNREAD_FILL = "#ffffff"
TEXT_COLOUR = "#222222"


# -- shared pieces ---------------------------------------------------------------------------
def cell_colour(cell: int) -> str:
    """A light colour per storage cell; the golden-ratio hue walk keeps neighbours distinct.
    Elements take the colour of the cell they read (not of their own position), so two views
    of one storage, drawn apart, colour the same memory the same way."""
    hue = (cell * 0.618033988749895) % 1.0
    r, g, b = colorsys.hsv_to_rgb(hue, 0.35, 0.97)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def summary_lines(r: StridedLayout) -> list[str]:
    """The header every rendering starts with."""
    once, several, never = r.read_counts
    dense = "non-overlapping and dense" if r.is_non_overlapping_and_dense else "not dense"
    lines = [
        f"{r.name}: size {_tup(r.size)}, stride {_tup(r.stride)}, storage offset "
        f"{r.storage_offset}, {r.dtype} on {r.device}",
        f"memory format: {r.memory_format}; {dense}",
        f"storage: {r.storage_len} cell{'' if r.storage_len == 1 else 's'}; read once: {once}; "
        f"read by several: {several}; never read: {never}",
    ]
    if r.numel:
        gaps = len(r.gaps)
        lines.append(f"cells read: {r.span[0]}..{r.span[1]}; gaps inside that span: {gaps}")
    dims = r.broadcast_dims
    lines.append(f"broadcast (stride 0) dims: {', '.join(map(str, dims)) if dims else 'none'}")
    if r.others:
        shared = ", ".join(f"{o.name} ({r.shared_cells(o)} cells in common)" for o in r.others)
        lines.append(f"shares storage with: {shared}")
    return lines


def storage_window(r: StridedLayout, limit: int, align: int) -> tuple[int, int]:
    """[start, stop) of the storage cells shown: all of them, or `limit` cells starting at
    the first cell read (aligned down to `align`)."""
    if r.storage_len <= limit:
        return 0, r.storage_len
    first = r.span[0] if r.span else r.storage_offset
    start = min(first - first % align, r.storage_len - limit)
    return max(start, 0), max(start, 0) + limit


def _tup(values: Sequence[int]) -> str:
    return "(" + ", ".join(map(str, values)) + ("," if len(values) == 1 else "") + ")"


Grid = tuple[tuple[int, ...], list[list[int | None]], list[int | None], list[int | None]]


def _grids(r: StridedLayout) -> list[Grid]:
    """The logical tensor as 2-D grids of cell numbers: (index of the slice in the leading
    dims, rows, row ids, col ids); rows and columns past MAX_GRID become one elided (None)."""
    cells = r.cells.view(r.size) if r.numel else r.cells
    if r.ndim == 0:
        return [((), [[int(r.cells[0])]], [0], [0])]
    if r.ndim == 1:
        cells, lead = cells.view(1, -1), [()]
    else:
        lead = list(itertools.islice(itertools.product(*map(range, r.size[:-2])), MAX_SLICES))
    out = []
    for ix in lead:
        plane = cells[ix] if r.ndim > 2 else cells
        nrows, ncols = plane.shape
        row_ids, col_ids = _elide(nrows), _elide(ncols)
        rows = [[None if i is None or j is None else int(plane[i, j]) for j in col_ids]
                for i in row_ids]
        out.append((ix, rows, row_ids, col_ids))
    return out


def _slice_label(r: StridedLayout, lead: tuple[int, ...]) -> str:
    """'[1, 0, :, :]' for a slice of a >2-D tensor; '' otherwise."""
    return f"[{', '.join(map(str, lead))}, :, :]" if r.ndim > 2 else ""


def _more_slices(r: StridedLayout) -> int:
    return max(0, math.prod(r.size[:-2]) - MAX_SLICES) if r.ndim > 2 and r.numel else 0


def _elide(n: int) -> list[int | None]:
    if n <= MAX_GRID:
        return list(range(n))
    half = MAX_GRID // 2
    return list(range(half)) + [None] + list(range(n - half + 1, n))


# -- text ------------------------------------------------------------------------------------
# One intermediate form lowers to both text and rich: lines of (text, colour or None) pieces.
Piece = tuple[str, "str | None"]


def render_text(r: StridedLayout, max_cells: int = MAX_CELLS) -> str:
    return "\n".join("".join(text for text, _ in line) for line in text_pieces(r, max_cells))


def text_pieces(r: StridedLayout, max_cells: int = MAX_CELLS) -> list[list[Piece]]:
    """The text rendering as pieces; numbers that stand for a cell carry its element colour."""
    start, stop = storage_window(r, max_cells, ROW_CELLS)
    lines: list[list[Piece]] = [[(line, None)] for line in summary_lines(r)]
    across = {0: "a 0-d tensor: one element", 1: "columns: index"}.get(
        r.ndim, "rows: index of dim -2, columns: dim -1"
    )
    lines += [[], [(f"storage cell read by each element ({across}):", None)]]
    if r.numel == 0:
        lines.append([("  (no elements)", None)])
    biggest = max([r.storage_len - 1, 0, *(n - 1 for n in r.size)])
    width = max(3, len(str(biggest)) + 1)
    for lead, rows, row_ids, col_ids in (_grids(r) if r.numel else []):
        if r.ndim > 2:
            lines.append([(_slice_label(r, lead), None)])
        if r.ndim == 0:
            lines.append([("  () -> ", None), (str(rows[0][0]), cell_colour(rows[0][0]))])
            continue
        head = "" if r.ndim == 1 else " " * (width + 4)
        lines.append([(head + "".join(_fmt(j, width) for j in col_ids), None)])
        for i, row in zip(row_ids, rows, strict=True):
            line: list[Piece] = [("" if r.ndim == 1 else "  " + _fmt(i, width) + " |", None)]
            for j, cell in zip(col_ids, row, strict=True):
                text = _fmt(cell, width)
                if cell is None or i is None or j is None:
                    line.append((text, None))
                    continue
                pad = len(text) - len(str(cell))
                line += [(text[:pad], None), (text[pad:], cell_colour(cell))]
            lines.append(line)
    if _more_slices(r):
        lines.append([(f"... ({_more_slices(r)} more slices)", None)])
    lines += [[], [("reads per storage cell (. = never read):", None)]]
    if r.storage_len == 0:
        lines.append([("  (the storage is empty)", None)])
    if start > 0:
        lines.append([(f"  ... cells 0..{start - 1} not shown", None)])
    most = int(r.reads[start:stop].max()) if stop > start else 0
    cwidth = max(3, len(str(max(stop - 1, most, 0))) + 1)
    for row_start in range(start, stop, ROW_CELLS):
        ids = range(row_start, min(row_start + ROW_CELLS, stop))
        lines.append([("  cell " + "".join(f"{c:>{cwidth}}" for c in ids), None)])
        line = [(" reads ", None)]
        for c in ids:
            n = int(r.reads[c])
            text = f"{n if n else '.':>{cwidth}}"
            line += [(text[:-len(str(n))], None), (str(n), cell_colour(c))] if n else [(text, None)]
        lines.append(line)
    if stop < r.storage_len:
        lines.append([(f"  ... cells {stop}..{r.storage_len - 1} not shown", None)])
    return lines


def _fmt(value: int | None, width: int) -> str:
    return f"{'...' if value is None else value:>{width}}"


# -- SVG -------------------------------------------------------------------------------------
def render_svg(r: StridedLayout, max_cells: int = MAX_CELLS) -> str:
    start, stop = storage_window(r, max_cells, SVG_ROW_CELLS)
    digits = len(str(max(stop - 1, int(r.cells.max()) if r.numel else 0, 0)))
    cw, ch, pad, lm = max(30, 7 * digits + 10), 22, 12, 80  # cell size, padding, left margin
    row_cells = max(8, min(SVG_ROW_CELLS, 960 // cw // 8 * 8))  # storage boxes per row
    parts: list[str] = []
    header = summary_lines(r)
    y = pad
    for line in header:
        y += 14
        parts.append(_text(pad, y, line, size=12))
    y += 14
    # Logical grids: each element a box showing the cell it reads, in its own colour.
    element_boxes: dict[int, tuple[float, float]] = {}  # flat index -> bottom centre
    grid_right = pad
    for lead, rows, row_ids, col_ids in (_grids(r) if r.numel else []):
        if r.ndim > 2:
            y += 14
            parts.append(_text(pad, y, _slice_label(r, lead), size=11))
        y += 16
        for ci, j in enumerate(col_ids):  # column indices above the grid
            if r.ndim and j is not None:
                parts.append(_text(lm + ci * cw + cw / 2, y - 4, str(j), anchor="middle", size=10))
        for i, row in zip(row_ids, rows, strict=True):
            for ci, (j, cell) in enumerate(zip(col_ids, row, strict=True)):
                x = lm + ci * cw
                if cell is None:
                    parts.append(_text(x + cw / 2, y + ch * 0.7, "...", anchor="middle"))
                    continue
                flat = _flat(r, lead, i, j)
                parts.append(
                    f'<rect class="element" x="{x}" y="{y}" width="{cw}" height="{ch}" '
                    f'fill="{cell_colour(cell)}" stroke="#555555">'
                    f"<title>{html.escape(r.name)}{_tup(r.index_of(flat))} reads cell {cell}"
                    "</title></rect>"
                )
                parts.append(_text(x + cw / 2, y + ch * 0.7, str(cell), anchor="middle"))
                element_boxes[flat] = (x + cw / 2, y + ch)
                grid_right = max(grid_right, x + cw)
            row_label = "" if i is None or r.ndim < 2 else str(i)
            parts.append(_text(lm - 6, y + ch * 0.7, row_label, anchor="end", size=10))
            y += ch
    if _more_slices(r):
        y += 16
        parts.append(_text(pad, y, f"... ({_more_slices(r)} more slices)", size=11))
    # Storage: one box per cell shown.
    y += 60
    parts.append(_text(lm - 6, y + ch * 0.7, "storage", anchor="end", size=11))
    if start > 0:
        parts.append(_text(pad, y - 24, f"cells 0..{start - 1} not shown", size=10))
    cell_pos: dict[int, tuple[float, float]] = {}
    storage_top = y
    for c in range(start, stop):
        k = c - start
        x = lm + (k % row_cells) * cw
        cy = storage_top + (k // row_cells) * (ch + 30 + 8 * len(r.others))
        n = int(r.reads[c])
        fill = cell_colour(c) if n else UNREAD_FILL
        extra = ' stroke-dasharray="3,2"' if n == 0 else ""
        stroke, sw = ("#000000", 2.5) if n > 1 else ("#777777", 1)
        what = "never read" if n == 0 else f"read by {n} element{'s' if n > 1 else ''}"
        parts.append(
            f'<rect class="storage-cell" x="{x}" y="{cy}" width="{cw}" height="{ch}" '
            f'fill="{fill}" stroke="{stroke}" stroke-width="{sw}"{extra}>'
            f"<title>cell {c}: {what}</title></rect>"
        )
        parts.append(_text(x + cw / 2, cy + ch * 0.7, str(c), anchor="middle", size=10))
        if n > 1:
            parts.append(_text(x + cw / 2, cy + ch + 11, f"x{n}", anchor="middle", size=10))
        if c == r.storage_offset:
            parts.append(_text(x + 2, cy - 3, "offset", size=10))
        for oi, other in enumerate(r.others):
            if c < other.storage_len and int(other.reads[c]):
                by = cy + ch + 14 + 8 * oi
                parts.append(
                    f'<rect class="shared" x="{x + 2}" y="{by}" width="{cw - 4}" height="5" '
                    f'fill="#555555"><title>{html.escape(other.name)} reads cell {c}</title>'
                    "</rect>"
                )
        cell_pos[c] = (x + cw / 2, cy)
    rows_used = max(1, -(-(stop - start) // row_cells))
    y = storage_top + rows_used * (ch + 30 + 8 * len(r.others))
    for oi, other in enumerate(r.others):
        parts.append(
            _text(lm - 6, storage_top + ch + 20 + 8 * oi, f"{other.name} reads", anchor="end",
                  size=10)
        )
    if stop < r.storage_len:
        parts.append(_text(pad, y, f"cells {stop}..{r.storage_len - 1} not shown", size=10))
        y += 14
    # Lines from each element to its cell, while they stay readable.
    lines = []
    if r.numel <= MAX_LINES and stop - start <= row_cells:
        for flat, (ex, ey) in element_boxes.items():
            cell = int(r.cells[flat])
            if cell in cell_pos:
                sx, sy = cell_pos[cell]
                lines.append(
                    f'<line class="reads" x1="{ex}" y1="{ey}" x2="{sx}" y2="{sy}" '
                    f'stroke="#888888" stroke-width="0.8"/>'
                )
    width = max(grid_right, lm + min(stop - start, row_cells) * cw) + pad
    width = max(width, 9 + 6.6 * max(len(line) for line in header))
    height = y + pad
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="Helvetica, Arial, sans-serif">\n'
        f'<rect class="background" x="0" y="0" width="{width:.0f}" height="{height:.0f}" '
        'fill="#ffffff"/>\n' + "\n".join(lines + parts) + "\n</svg>\n"
    )


def _flat(r: StridedLayout, lead: tuple[int, ...], i: int, j: int) -> int:
    """Row-major flat index of grid entry (i, j) of the slice at `lead`."""
    if r.ndim == 0:
        return 0
    if r.ndim == 1:
        return j
    flat = 0
    for idx, n in zip((*lead, i, j), r.size, strict=True):
        flat = flat * n + idx
    return flat


def _text(x: float, y: float, text: str, anchor: str = "start", size: int = 11) -> str:
    return (
        f'<text x="{x:g}" y="{y:g}" font-size="{size}" text-anchor="{anchor}" '
        f'fill="{TEXT_COLOUR}">{html.escape(text)}</text>'
    )


# -- rich ------------------------------------------------------------------------------------
def render_rich(r: StridedLayout, max_cells: int = MAX_CELLS) -> Any:
    """The text rendering, each number that names a cell on that cell's colour."""
    from rich.text import Text

    out = Text()
    for n, line in enumerate(text_pieces(r, max_cells)):
        if n:
            out.append("\n")
        for text, colour in line:
            out.append(text, style=f"#000000 on {colour}" if colour else ("bold" if n == 0 else ""))
    return out
