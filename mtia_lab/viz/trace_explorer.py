"""Explore a trace: filter, sort, page, and open one event to see everything it recorded.

Two forms over the same rows:

- `TraceTable` (static): one page of events as a fixed-width text table and an HTML table.
  It is what a saved notebook, nbval and a reader without a kernel see.
- `TraceExplorer` (an ipywidgets box, opt-in): dropdowns filter by op, kind, phase, module and
  device; a sort; prev/next pages; the page as an HTML table (columns aligned, nothing cut: it
  scrolls sideways in a narrow notebook); an event chooser; the chosen event's details
  (dispatch path, tensors with shapes and strides, memory, times, source line) and the stride
  layout of one of its tensors (viz/layout_render.py). The details follow the filters: a filter or a
  page turn that hides the open event opens the first one shown instead. Its own bundle
  carries the static table too, for every place without a widget front end.

Big traces stay quick: a filter or sort change is one pass over the events (plus a sort);
turning a page only formats that page's rows. The state tests read is plain attributes:
`rows` (the filtered, sorted events), `page`, `page_rows`, `selected`, `details`,
`layout_record`; `event.value` is the position (in `rows`) of the open event.
"""

from __future__ import annotations

import html
from collections import Counter
from typing import Any

import anywidget
import ipywidgets as widgets
import traitlets

from ..inspect.layout import LayoutError, StridedLayout, layout_from_record
from ..trace.events import ALL_KINDS, KINDS, PHASES, OpEvent, Trace
from . import palette
from .display import View, text_html, widget_bundle
from .layout_render import render_svg
from .svg_html import svg_img_html
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
    lines = wrap_line(_page_title(rows, page, page_size, total), width)
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
    heading = f"<p>{html.escape(_page_title(rows, page, page_size, total))}</p>" if title else ""
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


def _page_title(rows: list, page: int, page_size: int, total: int | None) -> str:
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


class TraceTable(View):
    """One page of a trace's events, static: what the explorer shows without a front end."""

    def __init__(self, trace: Trace, *, page: int = 0, page_size: int = PAGE_SIZE,
                 sort: str = "order", times: bool = True, **filters) -> None:
        check_paging(page, page_size)
        self.trace, self.page, self.page_size, self.times = trace, page, page_size, times
        self.sort, self.filters = sort, filters
        self.rows = select_rows(trace, sort, **filters)

    def to_text(self) -> str:
        return page_text(self.rows, self.page, self.page_size, self.times, len(self.trace))

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        bundle = {"text/plain": self.to_text(),
                  "text/html": page_html(self.rows, self.page, self.page_size, self.times,
                                         len(self.trace))}
        return {k: v for k, v in bundle.items()
                if (include is None or k in include) and (exclude is None or k not in exclude)}

    def widget(self) -> TraceExplorer:
        """The live explorer over the same trace, filters and sort."""
        explorer = TraceExplorer(self.trace, page_size=self.page_size, times=self.times)
        explorer.set_filters(sort=self.sort, **self.filters)
        return explorer


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


class TraceExplorer(widgets.VBox):
    """The live explorer (see the module doc); `explorer.rows`, `.selected`, `.details` and
    `.layout_record` are its state."""

    def __init__(self, trace: Trace, page_size: int = PAGE_SIZE, times: bool = True) -> None:
        check_paging(0, page_size)
        self.trace, self.page_size, self.times = trace, page_size, times
        self.rows: list[OpEvent] = list(trace.events)
        self.page = 0
        self.selected: OpEvent | None = None
        self.details = ""
        self.layout_record: StridedLayout | None = None
        self._call_sizes: Counter | None = None
        ops, modules = _options(trace)
        wide = widgets.Layout(width="300px")
        self.op = widgets.Dropdown(options=[ALL, *ops], description="op", layout=wide)
        kinds = [*KINDS] + [k for k in ALL_KINDS[len(KINDS):] if any(
            e.kind == k for e in trace.events)]  # "compiled" only when the trace has some
        kinds += sorted({e.kind for e in trace.events} - set(kinds))  # "collective", "wait"
        self.kind = widgets.Dropdown(options=[ALL, *kinds], description="kind", layout=wide)
        self.phase = widgets.Dropdown(options=[ALL, *PHASES], description="phase", layout=wide)
        self.module = widgets.Dropdown(options=[ALL, *modules], description="module",
                                       layout=wide)
        # Values are ALL or a device index: a Dropdown whose value is None shows an empty box.
        self.device = widgets.Dropdown(
            options=[(ALL, ALL)] + [(f"mtia_sim:{d}", d) for d in trace.devices()],
            value=ALL, description="device", layout=wide)
        self.sort = widgets.Dropdown(options=list(SORTS), description="sort", layout=wide)
        ranks = trace.ranks() if hasattr(trace, "ranks") else []  # a RankedTrace (distributed)
        self.rank = widgets.Dropdown(
            options=[(ALL, ALL)] + [(f"rank {r}", r) for r in ranks], value=ALL,
            description="rank", layout=wide if ranks else widgets.Layout(display="none"))
        self.prev = widgets.Button(description="< prev", layout=widgets.Layout(width="80px"))
        self.next = widgets.Button(description="next >", layout=widgets.Layout(width="80px"))
        self.status = widgets.HTML()
        self.table = ClickableRows(layout=widgets.Layout(width="100%"))
        self.table.add_class("mtia-trace-rows")
        self.table.observe(self._row_clicked, names="clicked")
        self.add_class("mtia-trace-explorer")  # a stable hook for browser tests and CSS
        self.event = widgets.Dropdown(options=[], description="event",
                                      layout=widgets.Layout(width="620px"))
        self.event.add_class("mtia-trace-event")
        self.tensor = widgets.Dropdown(options=[], description="tensor",
                                       layout=widgets.Layout(width="620px"))
        self.detail_html = widgets.HTML(layout=widgets.Layout(width="100%"))
        self.picture = widgets.HTML()
        for control in (self.op, self.kind, self.phase, self.module, self.device, self.sort,
                        self.rank):
            control.observe(self._refilter, names="value")
        self.prev.on_click(lambda _: self.turn(-1))
        self.next.on_click(lambda _: self.turn(+1))
        self.event.observe(self._select, names="value")
        self.tensor.observe(self._show_layout, names="value")
        filters = widgets.HBox([widgets.VBox([self.op, self.kind, self.phase]),
                                widgets.VBox([self.module, self.device, self.sort]),
                                widgets.VBox([self.rank])])
        pager = widgets.HBox([self.prev, self.next, self.status])
        super().__init__([filters, pager, self.table, self.event, self.detail_html,
                          self.tensor, self.picture])
        self._show_page()

    # -- filtering and paging: O(n) per filter change, O(page) per page turn ---------------
    def set_filters(self, sort: str | None = None, **filters) -> None:
        """Set several filters at once (one refilter): `set_filters(op="aten::mm", device=0)`."""
        controls = {"op": self.op, "kind": self.kind, "phase": self.phase,
                    "module": self.module, "device": self.device}
        if self.rank.options[1:]:
            controls["rank"] = self.rank
        unknown = set(filters) - set(controls)
        if unknown:
            raise TypeError(f"unknown filter {sorted(unknown)}; use {sorted(controls)}")
        if sort is not None:
            controls["sort"] = self.sort
            filters["sort"] = sort
        for name, value in filters.items():  # quietly, then one refilter
            controls[name].unobserve(self._refilter, names="value")
            try:
                controls[name].value = ALL if value is None else value
            except Exception as exc:  # traitlets' TraitError: say what the choices are
                raise ValueError(f"{name}={value!r} is not in this trace; choose from "
                                 f"{[o for o in controls[name].options]}") from exc
            finally:
                controls[name].observe(self._refilter, names="value")
        self._refilter()

    def filters(self) -> dict[str, Any]:
        def value(control):
            return None if control.value == ALL else control.value

        chosen = {"op": value(self.op), "kind": value(self.kind), "phase": value(self.phase),
                  "module": value(self.module), "device": value(self.device)}
        if self.rank.options[1:]:
            chosen["rank"] = value(self.rank)
        return chosen

    def _refilter(self, change=None) -> None:
        self.rows = select_rows(self.trace, self.sort.value, **self.filters())
        self.page = 0
        self._show_page()

    @property
    def pages(self) -> int:
        return max(1, -(-len(self.rows) // self.page_size))

    @property
    def page_rows(self) -> list[OpEvent]:
        return self.rows[self.page * self.page_size:(self.page + 1) * self.page_size]

    def turn(self, step: int) -> None:
        """Go `step` pages forward (negative: back), staying within the pages there are."""
        self.page = min(max(self.page + step, 0), self.pages - 1)
        self._show_page()

    def _show_page(self, keep: int | None = None) -> None:
        """Draw the page; open the event at position `keep`, else the open event if this page
        shows it, else the page's first event (the details follow what is listed)."""
        start = self.page * self.page_size
        shown = self.page_rows
        options = [(_event_label(e), start + n) for n, e in enumerate(shown)]
        if keep is None:
            keep = next((start + n for n, e in enumerate(shown) if e is self.selected),
                        start if shown else None)
        self.event.unobserve(self._select, names="value")
        self.event.options = options
        self.event.value = keep
        self.event.observe(self._select, names="value")
        self.prev.disabled = self.page == 0
        self.next.disabled = self.page >= self.pages - 1
        self.status.value = html.escape(_page_title(self.rows, self.page, self.page_size,
                                                    len(self.trace)))
        self._open(keep)

    # -- one event -------------------------------------------------------------------------
    def select(self, index: int) -> None:
        """Show the event whose `.index` is `index` (turning to its page if it is listed)."""
        for position, e in enumerate(self.rows):
            if e.index == index:
                self.page = position // self.page_size
                self._show_page(keep=position)
                return
        raise ValueError(f"event #{index} is not among the {len(self.rows)} events the "
                         "filters keep; clear the filters (set_filters(op=None, ...)) first")

    def _select(self, change) -> None:
        self._open(change["new"])

    def _row_clicked(self, change) -> None:
        """A click on a row of the table: open that event, as choosing it in `event` does."""
        position = change["new"]
        if position < 0:
            return
        self.table.clicked = -1  # ready for the next click, even on the same row
        if any(value == position for _, value in self.event.options):
            self.event.value = position

    def _open(self, position: int | None) -> None:
        if position is None:  # nothing matches the filters
            self.selected, self.details = None, ""
            self.detail_html.value = text_html("no event matches these filters")
            self.tensor.options = []
        else:
            e = self.selected = self.rows[position]
            if self._call_sizes is None:  # one pass, the first time an event is opened
                self._call_sizes = Counter(ev.call_id for ev in self.trace.events)
            self.details = event_details(e, self._call_sizes[e.call_id])
            self.detail_html.value = _scrolling_pre(self.details)
            choices = [(f"in{i} {tensor_brief(t)}", ("in", i)) for i, t in enumerate(e.inputs)]
            choices += [(f"out{i} {tensor_brief(t)}", ("out", i))
                        for i, t in enumerate(e.outputs)]
            self.tensor.unobserve(self._show_layout, names="value")
            self.tensor.options = choices
            self.tensor.value = choices[0][1] if choices else None
            self.tensor.observe(self._show_layout, names="value")
        self.table.value = page_html(self.rows, self.page, self.page_size, self.times,
                                     len(self.trace), self.selected, title=False)
        self._show_layout()

    def _show_layout(self, change=None) -> None:
        self.layout_record = None
        if self.selected is None or self.tensor.value is None:
            self.picture.value = ""
            return
        side, i = self.tensor.value
        record = (self.selected.inputs if side == "in" else self.selected.outputs)[i]
        try:
            self.layout_record = layout_from_record(record, f"{side}{i}")
        except (LayoutError, AttributeError) as exc:
            self.picture.value = text_html(f"no layout drawn: {exc}")
            return
        self.picture.value = svg_img_html(render_svg(self.layout_record), "stride layout")

    # -- without a widget front end --------------------------------------------------------
    def to_text(self) -> str:
        return page_text(self.rows, self.page, self.page_size, self.times, len(self.trace))

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs) -> dict:
        """The live widget, and its static form beside it: the page as text and as an HTML
        table with the open event's details (what a saved notebook, nbconvert HTML or
        GitHub show)."""
        static = page_html(self.rows, self.page, self.page_size, self.times, len(self.trace),
                           self.selected) + (_scrolling_pre(self.details) if self.details else "")
        return widget_bundle(self, self.to_text(), static, include, exclude)


class ClickableRows(anywidget.AnyWidget):
    """An HTML table whose rows (`<tr data-position=N>`) report a click: `clicked` becomes N.
    ipywidgets' HTML widget shows the table but cannot tell the kernel about a click."""

    _esm = """
    function render({ model, el }) {
      const draw = () => { el.innerHTML = model.get("value"); };
      draw();
      model.on("change:value", draw);
      el.style.cursor = "pointer";
      el.addEventListener("click", (event) => {
        const row = event.target.closest("tr[data-position]");
        if (!row) return;
        model.set("clicked", Number(row.dataset.position));
        model.save_changes();
      });
    }
    export default { render };
    """
    value = traitlets.Unicode("").tag(sync=True)
    clicked = traitlets.Int(-1).tag(sync=True)


def _scrolling_pre(text: str) -> str:
    """Text in the code font (aligned columns) whose long lines scroll sideways rather than
    break inside a word."""
    return ('<div style="overflow-x:auto;max-width:100%"><pre style="white-space:pre;'
            'font-family:monospace">'
            f"{html.escape(text)}</pre></div>")


def _event_label(e: OpEvent) -> str:
    where = f"  {e.module}" if e.module else ""
    return f"#{e.index} {op_short(e.op)} [{e.kind}, {e.phase}]{where}"


def _options(trace: Trace) -> tuple[list[str], list[str]]:
    """The ops (sorted) and module paths, with every parent path ("MLP" for "MLP.fc1"), since
    a module filter keeps the submodules' events too."""
    ops = sorted({e.op for e in trace.events})
    modules: dict[str, None] = {}
    for path in dict.fromkeys(e.module for e in trace.events if e.module):
        parts = path.split(".")
        for n in range(1, len(parts) + 1):
            modules.setdefault(".".join(parts[:n]))
    return ops, list(modules)


def trace_table(trace: Trace, **options) -> TraceTable:
    """One page of a trace's events as a static table (`.widget()` for the live explorer)."""
    return TraceTable(trace, **options)


def trace_explorer(trace: Trace, **options) -> TraceExplorer:
    """The live trace explorer (ipywidgets)."""
    return TraceExplorer(trace, **options)
