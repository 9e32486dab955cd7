"""Explore a trace: filter, sort, page, and open one event to see everything it recorded.

Two forms over the same rows (formatted by trace_pages.py):

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
from ..trace.events import ALL_KINDS, KINDS, PHASES, OpEvent, Trace, require_trace
from .display import View, text_html, widget_bundle
from .layout_render import render_svg
from .svg_html import svg_img_html
from .trace_format import (
    op_short,
    tensor_brief,
)
from .trace_pages import (
    ALL,
    PAGE_SIZE,
    SORTS,
    check_paging,
    event_details,
    page_html,
    page_text,
    page_title,
    scrolling_pre,
    select_rows,
)


class TraceTable(View):
    """One page of a trace's events, static: what the explorer shows without a front end."""

    def __init__(self, trace: Trace, *, page: int = 0, page_size: int = PAGE_SIZE,
                 sort: str = "order", times: bool = True, **filters) -> None:
        require_trace(trace, "trace_table")
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


class TraceExplorer(widgets.VBox):
    """The live explorer (see the module doc); `explorer.rows`, `.selected`, `.details` and
    `.layout_record` are its state."""

    def __init__(self, trace: Trace, page_size: int = PAGE_SIZE, times: bool = True) -> None:
        require_trace(trace, "trace_explorer")
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
        self.status.value = html.escape(page_title(self.rows, self.page, self.page_size,
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
            self.detail_html.value = scrolling_pre(self.details)
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
                           self.selected) + (scrolling_pre(self.details) if self.details else "")
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
