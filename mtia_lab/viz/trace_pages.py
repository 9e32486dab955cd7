"""A trace's events as pages: which rows a filter and a sort keep, one page of them as a
fixed-width text table or an HTML table, and one event in full.

Plain functions of the records, shared by the static `TraceTable` and the live
`TraceExplorer` (trace_explorer.py): the widget only chooses what to show, these say how.
"""

from __future__ import annotations

import html

from ..trace.events import OpEvent, Trace
from . import palette
from .text_fit import NOTEBOOK_WIDTH, abbreviate, wrap_line, wrap_text
from .trace_format import (
    fmt_bytes,
    fmt_host,
    fmt_sim,
    format_bytes,
    op_short,
    short_source,
    tensor_brief,
    tensor_detail,
)

PAGE_SIZE = 25
SORTS = {  # label -> (key, reverse)
    "order": (None, False),
    "simulated time": (lambda e: e.sim_us, True),
    "host time": (lambda e: e.host_ns, True),
    "bytes": (lambda e: sum(t.nbytes for t in e.inputs) + sum(t.nbytes for t in e.outputs),
              True),
    "allocated": (lambda e: e.allocated, True),
    "op": (lambda e: e.op, False),
}
ALL = "(all)"


def select_rows(trace: Trace, sort: str = "order", **filters) -> list[OpEvent]:
    """The events matching `filters` (see Trace.filter), sorted: one pass plus one sort."""
    if sort not in SORTS:
        raise ValueError(f"sort={sort!r}: use one of {', '.join(SORTS)}")
    rows = trace.filter(**filters).events if any(v is not None for v in filters.values()) \
        else list(trace.events)
    key, reverse = SORTS[sort]
    if key is not None:
        rows.sort(key=key, reverse=reverse)  # stable: ties keep the order they ran in
    return rows


# -- one page as text and HTML ---------------------------------------------------------------
COLUMNS = ("#", "op", "kind", "phase", "module", "inputs -> outputs", "sim", "host")


def row_cells(e: OpEvent, times: bool = True) -> list[str]:
    ins = ", ".join(tensor_brief(t) for t in e.inputs)
    outs = ", ".join(tensor_brief(t) for t in e.outputs)
    number = f"r{e.rank}:{e.index}" if hasattr(e, "rank") else str(e.index)  # distributed
    cells = [number, op_short(e.op), e.kind, e.phase, e.module or "-",
             f"{ins} -> {outs}", fmt_sim(e.sim_us if e.sim_start_us is not None else None)]
    return cells + [fmt_host(e.host_ns)] if times else cells


def page_text(rows: list[OpEvent], page: int, page_size: int, times: bool = True,
              total: int | None = None, width: int = NOTEBOOK_WIDTH) -> str:
    """A fixed-width table of one page (the text twin of the explorer), at most `width`
    characters wide: the widest columns narrow first (see _column_widths), and a cell longer
    than its column ends in a visible `...`."""
    chosen = rows[page * page_size:(page + 1) * page_size]
    header = list(COLUMNS if times else COLUMNS[:-1])
    table = [header] + [row_cells(e, times) for e in chosen]
    widths = _column_widths(table, width)
    right = NUMBER_COLUMNS
    lines = wrap_line(page_title(rows, page, page_size, total), width)
    for n, row in enumerate(table):
        cells = [abbreviate(cell, w) for cell, w in zip(row, widths, strict=True)]
        lines.append("  ".join(
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


# Columns that give way when a page is too wide, in order, each down to its minimum.
_NARROWING = ((5, 24), (1, 16), (4, 10), (5, 14), (1, 10))  # (column, minimum width)


def _column_widths(table: list[list[str]], width: int) -> list[int]:
    """Each column's width: its longest cell, narrowed (inputs -> outputs first, then op and
    module) until the table fits in `width` with two spaces between columns."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for column, minimum in _NARROWING:
        excess = sum(widths) + 2 * (len(widths) - 1) - width
        if excess <= 0:
            break
        widths[column] = max(min(widths[column], minimum), widths[column] - excess)
    return widths


NUMBER_COLUMNS = {0, 6, 7}  # right-aligned, never wrapped (a number stays with its unit)


def page_html(rows: list[OpEvent], page: int, page_size: int, times: bool = True,
              total: int | None = None, selected: OpEvent | None = None,
              title: bool = True) -> str:
    """The same page as an HTML table (fallbacks in red, views grey, the open event on a
    yellow ground), under its title line unless `title=False` (the explorer has a status
    line). Nothing is clipped: a table wider than the notebook scrolls sideways."""
    chosen = rows[page * page_size:(page + 1) * page_size]
    columns = COLUMNS if times else COLUMNS[:-1]
    head = "".join(
        f'<th style="text-align:{"right" if i in NUMBER_COLUMNS else "left"};'
        f'padding:1px 8px 1px 0;border-bottom:1px solid #999999">{html.escape(c)}</th>'
        for i, c in enumerate(columns))
    body = []
    for position, e in enumerate(chosen, start=page * page_size):
        colour = {"fallback": palette.FALLBACK_LINE.hex,
                  "view": palette.VIEW_ROW.hex}.get(e.kind, "inherit")
        ground = f";background:{palette.SELECTED_ROW.hex}" if e is selected else ""
        tip = html.escape(f"{e.call} at {short_source(e.source)}"
                          + (f" -- {e.reason}" if e.reason else ""))
        cells = "".join(
            f'<td style="padding:1px 8px 1px 0;vertical-align:top;{_align(i)}">'
            f"{html.escape(c)}</td>" for i, c in enumerate(row_cells(e, times)))
        body.append(f'<tr data-position="{position}" style="color:{colour}{ground}" '
                    f'title="{tip}">{cells}</tr>')
    heading = f"<p>{html.escape(page_title(rows, page, page_size, total))}</p>" if title else ""
    return (
        f"<div>{heading}"
        '<div style="overflow-x:auto;max-width:100%">'
        '<table style="font-family:monospace;font-size:12px;border-collapse:collapse">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div></div>"
    )


def _align(column: int) -> str:
    """Numbers right, names left, said explicitly: JupyterLab's own CSS right-aligns every
    cell of a rendered HTML table."""
    return "text-align:right;white-space:nowrap" if column in NUMBER_COLUMNS else \
        "text-align:left"


def page_title(rows: list, page: int, page_size: int, total: int | None) -> str:
    pages = max(1, -(-len(rows) // page_size))
    matched = f"{len(rows)} events" + (f" of {total}" if total is not None else "")
    first, last = page * page_size, min((page + 1) * page_size, len(rows))
    # Row positions in the filtered list, counted from 1; the # column holds the event indices.
    return f"{matched}; page {page + 1} of {pages} (rows {first + 1}..{max(last, first + 1)})"


def check_paging(page, page_size) -> None:
    """A clear error for a page or page size that is not a usable int."""
    for name, value, low in (("page_size", page_size, 1), ("page", page, 0)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
        if value < low:
            raise ValueError(f"{name} must be at least {low}, got {value}")


# -- one event in full -----------------------------------------------------------------------
def event_details(e: OpEvent, call_size: int = 1, width: int = NOTEBOOK_WIDTH) -> str:
    """Everything one event recorded, as text wrapped between words at `width` columns."""
    served = e.kind + (f": {e.reason}" if e.reason else "")
    lines = [f"#{e.index} {e.op}  [{served}; {e.phase}]"]
    composite = f", composite: {call_size} aten ops" if call_size > 1 else ""
    lines.append(f"call: {e.call} (call {e.call_id}{composite})   module: {e.module or '-'}   "
                 f"source: {short_source(e.source) or '-'}")
    device = f"device: mtia_sim:{e.device}"
    if e.sim_start_us is None:
        device += "   no device work (simulated time 0)"
    else:
        device += (f"   stream {e.stream}   simulated {e.sim_start_us:.2f} .. "
                   f"{e.sim_end_us:.2f} us ({fmt_sim(e.sim_us)})")
    lines.append(device + f"   host {fmt_host(e.host_ns)}")
    lines.append(f"memory: allocated {format_bytes(e.allocated)}, freed {format_bytes(e.freed)}, "
                 f"device total after the op {format_bytes(e.device_bytes)}")
    lines.append(f"dispatch: {e.dispatch.route}")
    for i, keys in enumerate(e.dispatch.arg_keys):
        lines.append(f"  argument {i} keys: {', '.join(keys)}")
    lines.append("  walk over the merged key set, highest priority first:")
    lines += [f"    {step}" for step in e.dispatch.steps]
    for label, records in (("inputs", e.inputs), ("outputs", e.outputs)):
        lines.append(f"{label}:" + ("" if records else " none"))
        for i, t in enumerate(records):
            lines.append(f"  {label[:-4] if label == 'inputs' else 'out'}{i} "
                         f"{tensor_detail(t, f'{t.storage:#x}')}; elements {fmt_bytes(t.nbytes)}")
    return wrap_text("\n".join(lines), width, indent=4)


def scrolling_pre(text: str) -> str:
    """Text in the code font (aligned columns) whose long lines scroll sideways rather than
    break inside a word."""
    return ('<div style="overflow-x:auto;max-width:100%"><pre style="white-space:pre;'
            'font-family:monospace">'
            f"{html.escape(text)}</pre></div>")
