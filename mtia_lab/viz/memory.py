"""The device memory snapshot drawn: segments and the blocks the caching allocator carved.

Reads only the recorded snapshot (mtia_lab/inspect/memory.py), so a snapshot saved as JSON
draws the same later. Three renderings:

- graphviz: one HTML table per segment (stacked in address order, grouped by device): a header
  with its address, pool and size, then its blocks left to right in address order, each a cell
  as wide as log2 of its size (a 512 B block next to a 2 MiB remainder stays visible), orange
  when allocated (with the op and the user's source line that asked for it), grey when cached
  (file names without folders, a notebook cell's line as `In [5], line 3`);
  every block cell is a table port (`PORT="b<i>"`) so later diagrams can point at a block;
- text: one line per block, fixed columns, compared exactly by tests;
- rich: the same as a table.
"""

from __future__ import annotations

import math
from typing import Any

from ..backend.runtime.allocator import format_bytes
from ..inspect.memory import BlockInfo, MemorySnapshot, SegmentInfo
from . import palette
from .display import View
from .graphviz_render import digraph, dot_to_svg, html_text, quote
from .trace_format import short_source

ALLOCATED_FILL = palette.ALLOCATED.hex
FREE_FILL = palette.FREE.hex
HEADER_FILL = palette.SEGMENT_HEADER.hex
PRIVATE_HEADER_FILL = palette.PRIVATE_POOL_HEADER.hex  # segments of a graph's private pool
MAX_SEGMENTS = 32
MAX_BLOCKS = 64  # per segment; the rest is summarised
BLOCKS_PER_ROW = 8


class MemoryView(View):
    """A memory snapshot as a diagram, text and a rich table."""

    def __init__(
        self, snapshot: MemorySnapshot, max_segments: int = MAX_SEGMENTS,
        max_blocks: int = MAX_BLOCKS,
    ) -> None:
        self.snapshot = snapshot
        self.max_segments = max_segments
        self.max_blocks = max_blocks

    def to_text(self) -> str:
        return render_text(self.snapshot, self.max_segments, self.max_blocks)

    def to_dot(self) -> str:
        return render_dot(self.snapshot, self.max_segments, self.max_blocks)

    def to_svg(self) -> str:
        return dot_to_svg(self.to_dot())

    def details(self) -> dict[str, dict]:
        """Segments by DOT name (`seg_<address>`): its blocks, what asked for each and where
        (what a click shows in explore())."""
        out = {}
        for seg in self.snapshot.segments[:self.max_segments]:
            rows = []
            for b in seg.blocks[:self.max_blocks]:
                what = (f"{format_bytes(b.size)} allocated ({b.requested_size:,} B requested) by "
                        f"{b.op or 'an unknown op'}"
                        + (f" at {short_source(b.source)}" if b.source else "")
                        if b.allocated else f"{format_bytes(b.size)} cached, free")
                rows.append([f"+{b.offset:#x}", what])
            if len(seg.blocks) > self.max_blocks:
                rows.append(["...", _hidden_note(seg.blocks[self.max_blocks:])])
            out[f"seg_{seg.address:x}"] = {"title": segment_title(seg), "rows": rows}
        return out

    def to_rich(self) -> Any:
        return render_rich(self.snapshot, self.max_segments, self.max_blocks)


def memory_view(snapshot=None, device=None, **limits: int) -> MemoryView:
    """A view of `snapshot` (torch.mtia_sim.memory_snapshot()'s list, or a MemorySnapshot);
    without one, of the allocator's state now (all devices, or `device`)."""
    if snapshot is None:
        import torch

        snapshot = torch.mtia_sim.memory_snapshot(device)
    return MemoryView(MemorySnapshot.from_snapshot(snapshot), **limits)


def headline(s: MemorySnapshot) -> str:
    in_use = sum(1 for b in s.blocks if b.allocated)
    count = len(s.segments)
    return (
        f"memory snapshot: {count} segment{'' if count == 1 else 's'}, "
        f"{format_bytes(s.reserved)} reserved, {format_bytes(s.allocated)} allocated "
        f"({format_bytes(s.requested)} requested), {in_use} block{'' if in_use == 1 else 's'} "
        "in use"
    )


def segment_title(seg: SegmentInfo) -> str:
    return (
        f"segment {seg.address:#x} on mtia_sim:{seg.device}, {seg.segment_type} pool, "
        f"{format_bytes(seg.total_size)}, {segment_usage(seg)}"
    )


def segment_usage(seg: SegmentInfo) -> str:
    """Which pool the segment serves and how many of its blocks tensors hold."""
    pool = "shared cache" if tuple(seg.pool_id) == (0, 0) else f"private pool {tuple(seg.pool_id)}"
    used = sum(1 for b in seg.blocks if b.allocated)
    return f"{pool}: {used} of {len(seg.blocks)} blocks allocated"


def _shown(items: tuple, limit: int) -> tuple[tuple, int]:
    return items[:limit], max(0, len(items) - limit)


def _hidden_note(hidden: tuple[BlockInfo, ...]) -> str:
    used = sum(1 for b in hidden if b.allocated)
    total = format_bytes(sum(b.size for b in hidden))
    return f"... {len(hidden)} more blocks ({used} allocated, {total})"


# -- text ------------------------------------------------------------------------------------
def render_text(
    s: MemorySnapshot, max_segments: int = MAX_SEGMENTS, max_blocks: int = MAX_BLOCKS
) -> str:
    lines = [headline(s)]
    segments, more = _shown(s.segments, max_segments)
    for seg in segments:
        lines += ["", segment_title(seg)]
        columns = f"  {'offset':>10}  {'size':>11}  {'state':<9}  {'requested':>11}  op / source"
        lines.append(columns)
        blocks, _ = _shown(seg.blocks, max_blocks)
        for b in blocks:
            state = "allocated" if b.allocated else "free"
            requested = format_bytes(b.requested_size) if b.allocated else ""
            who = "  ".join(x for x in (b.op, short_source(b.source)) if x)
            lines.append(
                f"  {f'+{b.offset:#08x}':>10}  {format_bytes(b.size):>11}  {state:<9}  "
                f"{requested:>11}  {who}".rstrip()
            )
        if len(seg.blocks) > max_blocks:
            lines.append("  " + _hidden_note(seg.blocks[max_blocks:]))
    if more:
        lines += ["", f"... {more} more segments not shown"]
    return "\n".join(lines)


# -- graphviz --------------------------------------------------------------------------------
def block_width(size: int) -> int:
    """Cell width in points: grows with log2(size), so small blocks stay visible."""
    return round(44 + 10 * math.log2(max(size, 512) / 512))


def render_dot(
    s: MemorySnapshot, max_segments: int = MAX_SEGMENTS, max_blocks: int = MAX_BLOCKS
) -> str:
    segments, more = _shown(s.segments, max_segments)
    body = [f"label={quote(headline(s))}; labelloc=t;", "node [shape=plaintext];"]
    for device in sorted({seg.device for seg in segments}):
        body.append(f"subgraph cluster_dev{device} {{")
        body.append(f'  label="mtia_sim:{device}"; color="#888888";')
        names = []
        for seg in (x for x in segments if x.device == device):
            name = f"seg_{seg.address:x}"
            names.append(name)
            body.append(f"  {name} [label=<{_segment_table(seg, max_blocks)}>];")
        # Invisible edges stack the segments top to bottom in address order.
        body += [f"  {a} -> {b} [style=invis];" for a, b in zip(names, names[1:], strict=False)]
        body.append("}")
    if more:
        body.append(f'more [shape=plaintext, label="... {more} more segments not shown"];')
    return digraph(body, name="memory", rankdir="TB")


def _segment_table(seg: SegmentInfo, max_blocks: int) -> str:
    blocks, _ = _shown(seg.blocks, max_blocks)
    hidden = seg.blocks[max_blocks:]
    cells = [_block_cell(i, b) for i, b in enumerate(blocks)]
    if hidden:
        cells.append(f'<TD BGCOLOR="#ffffff">{html_text(_hidden_note(hidden))}</TD>')
    rows = [cells[i : i + BLOCKS_PER_ROW] for i in range(0, len(cells), BLOCKS_PER_ROW)]
    span = max((len(r) for r in rows), default=1)
    private = tuple(seg.pool_id) != (0, 0)
    header = (
        f'<TR><TD COLSPAN="{span}" BGCOLOR="{PRIVATE_HEADER_FILL if private else HEADER_FILL}">'
        f"{html_text(f'{seg.address:#x}, {seg.segment_type} pool, ')}"
        f"{html_text(format_bytes(seg.total_size))}<BR/>"
        f"{html_text(segment_usage(seg))}</TD></TR>"
    )
    body = "".join(f"<TR>{''.join(r)}</TR>" for r in rows)
    return (
        '<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">'
        f"{header}{body}</TABLE>"
    )


def _block_cell(index: int, b: BlockInfo) -> str:
    if b.allocated:
        lines = [format_bytes(b.size), b.op or "(unknown op)"]
        if short_source(b.source):
            lines.append(short_source(b.source))
        where = f" at {short_source(b.source)}" if short_source(b.source) else ""
        tip = (
            f"+{b.offset:#x}: {format_bytes(b.size)} allocated ({b.requested_size} B "
            f"requested) by {b.op or 'an unknown op'}{where}"
        )
        fill = ALLOCATED_FILL
    else:
        lines, fill = [format_bytes(b.size), "free"], FREE_FILL
        tip = f"+{b.offset:#x}: {format_bytes(b.size)} cached, free"
    label = "<BR/>".join(html_text(x) for x in lines)
    return (
        f'<TD PORT="b{index}" WIDTH="{block_width(b.size)}" BGCOLOR="{fill}" '
        f'TOOLTIP="{html_text(tip)}">{label}</TD>'
    )


# -- rich ------------------------------------------------------------------------------------
def render_rich(
    s: MemorySnapshot, max_segments: int = MAX_SEGMENTS, max_blocks: int = MAX_BLOCKS
) -> Any:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    # Op names and source lines are data, not rich markup ("<ipython-input-1-[..]>" included).
    table = Table(title=Text(headline(s)), title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False, collapse_padding=True)
    # Numbers never wrap away from their unit nor get cut; the segment, op and source columns
    # fold instead (an op name on two lines still reads, "aten::_…" does not).
    segments, more = _shown(s.segments, max_segments)
    blocks = [b for seg in segments for b in seg.blocks[:max_blocks]]
    sources = any(b.source for b in blocks)  # no column of blanks when nothing was recorded
    longest_op = max((len(b.op) for b in blocks), default=2)
    for column, justify in (("segment", "left"), ("offset", "right"), ("size", "right"),
                            ("state", "left"), ("requested", "right"), ("op", "left"),
                            ("source", "left"))[:7 if sources else 6]:
        text = column in ("op", "source")
        table.add_column(column, justify=justify, no_wrap=not text,
                         overflow="fold" if text else "ellipsis",
                         min_width=min(longest_op, 14) if column == "op" else None)
    for seg in segments:
        # The segment's address, pool and size one per line, so none of them wraps.
        labels = [f"{seg.address:#x}", f"{seg.segment_type} pool", format_bytes(seg.total_size)]
        for i, b in enumerate(seg.blocks[:max_blocks]):
            label = labels[i] if i < len(labels) else ""
            if i == len(seg.blocks[:max_blocks]) - 1 and i < len(labels) - 1:
                label = "\n".join(labels[i:])  # fewer blocks than label lines
            table.add_row(
                label, f"+{b.offset:#x}", format_bytes(b.size),
                "allocated" if b.allocated else "free",
                format_bytes(b.requested_size) if b.allocated else "", Text(b.op),
                *([Text(short_source(b.source))] if sources else []),
                style=f"on {ALLOCATED_FILL}" if b.allocated else None,
            )
        if len(seg.blocks) > max_blocks:
            table.add_row("", "", "", _hidden_note(seg.blocks[max_blocks:]))
        table.add_section()
    if more:
        table.add_row(f"... {more} more segments")
    return table
