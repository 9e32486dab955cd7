"""A trace summarised: a table per aten op, and a tree per nn.Module (forward and backward).

Both read only the recorded events (a trace loaded from JSON summarises the same) and render
through rich, so one renderable gives the terminal (`__rich__`), the text twin (`text/plain`,
a fixed-width console without colour, which tests compare exactly) and notebook HTML.

Host wall times change at every run; the simulated times come from the cost model and do not.
`times=True` shows both, `times="sim"` only the simulated ones, `times=False` neither: use the
last two where output is compared (tests, nbval).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..records.display import register_view
from ..trace.events import ALL_KINDS, KINDS, Trace, require_trace
from . import palette
from .display import View
from .text_fit import ELLIPSIS, abbreviate
from .trace_format import (
    fmt_bytes,
    fmt_host,
    fmt_sim,
    format_bytes,
    op_short,
    rich_html,
    rich_text,
    short_sources,
)

MAX_ROWS = 40  # ops in the table; the rest summed in one line
FALLBACK_RED = palette.FALLBACK_LINE.hex  # fallback rows, as the explorer's table marks them
OP_MIN = 16  # the op column is never narrower (longer names end in "...")
MAX_TREE_OPS = 12  # op lines under one module
MAX_TREE_CHILDREN = 24  # submodules shown under one module; the rest summed in one line
SORTS = ("sim", "host", "count", "op")
Times = bool | str


def _check_times(times: Times) -> tuple[bool, bool]:
    """(show host times, show simulated times)."""
    if times is True or times is False:
        return times, times
    if times == "sim":
        return False, True
    raise ValueError(f"times={times!r}: use True (host and simulated), 'sim' or False")


@dataclass
class OpRow:
    """One aten op, added up; `composite` counts its events that belong to a call that became
    several aten ops (F.linear -> t + addmm), `backward` those autograd ran."""

    op: str
    count: int = 0
    kinds: Counter = field(default_factory=Counter)
    composite: int = 0
    backward: int = 0
    host_ns: int = 0
    sim_us: float = 0.0
    nbytes: int = 0  # bytes read and written: inputs' and outputs' own elements
    allocated: int = 0


def op_rows(trace: Trace) -> list[OpRow]:
    """One row per aten op, in the order the ops first ran (one pass, then one per call)."""
    call_sizes = Counter(e.call_id for e in trace.events)
    rows: dict[str, OpRow] = {}
    for e in trace.events:
        row = rows.get(e.op)
        if row is None:
            row = rows[e.op] = OpRow(e.op)
        row.count += 1
        row.kinds[e.kind] += 1
        row.composite += call_sizes[e.call_id] > 1
        row.backward += e.phase == "backward"
        row.host_ns += e.host_ns
        if e.sim_start_us is not None:
            row.sim_us += e.sim_end_us - e.sim_start_us
        row.nbytes += sum(t.nbytes for t in e.inputs) + sum(t.nbytes for t in e.outputs)
        row.allocated += e.allocated
    return list(rows.values())


def sort_rows(rows: list[OpRow], sort: str) -> list[OpRow]:
    keys = {
        "sim": lambda r: (-r.sim_us, -r.count, r.op),
        "host": lambda r: (-r.host_ns, r.op),
        "count": lambda r: (-r.count, r.op),
        "op": lambda r: r.op,
    }
    if sort not in keys:
        raise ValueError(f"sort={sort!r}: use one of {', '.join(SORTS)}")
    return sorted(rows, key=keys[sort])


def headline(trace: Trace, show_host: bool, show_sim: bool) -> str:
    """'trace "step": 28 events (native 11, view 16, fallback 1), 9 ops, 14 calls ...': the
    kinds count events (they add up to the events), ops are distinct aten ops."""
    kinds = Counter(e.kind for e in trace.events)
    parts = ", ".join(f"{k} {kinds[k]}" for k in ALL_KINDS if kinds[k])
    calls = len({e.call_id for e in trace.events})
    ops = len({e.op for e in trace.events})
    label = trace.metadata.get("label") or ""
    if not trace.events:
        return (f"trace{' ' + repr(label) if label else ''}: no op reached the mtia_sim device "
                "(the code ran on the CPU only, or did no tensor work): move tensors with "
                ".to(\"mtia_sim\") to trace them")
    text = (f"trace{' ' + repr(label) if label else ''}: {len(trace.events)} events"
            f"{' (' + parts + ')' if parts else ''}, {ops} ops, {calls} calls")
    backward = sum(e.phase == "backward" for e in trace.events)
    if backward:
        text += f", {backward} in backward"
    if show_host:
        text += f"; host {fmt_host(trace.host_ns())}"
    if show_sim:
        text += f"; simulated {fmt_sim(trace.sim_us())}"
    text += f"; allocated {format_bytes(trace.allocated())}"
    if trace.metadata.get("error"):
        text += f"\nstopped by an error: {trace.metadata['error']}"
    return text


class _RichView(View):
    """A view whose one rich renderable gives the text twin, the terminal and the HTML."""

    width = 100

    def to_text(self) -> str:
        return rich_text(self.to_rich(), self.width)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        bundle = {"text/plain": self.to_text(), "text/html": rich_html(self.to_rich(), self.width)}
        return {
            key: value for key, value in bundle.items()
            if (include is None or key in include) and (exclude is None or key not in exclude)
        }


class TraceSummary(_RichView):
    """Per aten op: events, how they were served, host and simulated time, bytes moved."""

    def __init__(self, trace: Trace, *, times: Times = True, sort: str = "sim",
                 max_rows: int = MAX_ROWS, width: int = 100) -> None:
        self.show_host, self.show_sim = _check_times(times)
        self.trace, self.max_rows, self.width = trace, max_rows, width
        self.rows = sort_rows(op_rows(trace), sort)
        # Kind columns: always native/fallback/view; "compiled" when the trace has such events.
        self.kinds = [*KINDS] + [k for k in ALL_KINDS[len(KINDS):]
                                 if any(r.kinds[k] for r in self.rows)]

    def to_rich(self) -> Any:
        """The table, built for the width of the console that draws it (see _fit)."""
        return _Fitted(self._build)

    def _build(self, width: int) -> Any:
        """The table laid out for `width` columns (see _fit): at 160 every column; on a
        narrower console the least telling columns go first, and an op name longer than its
        column is abbreviated with a visible `...`. Numbers are never cut or wrapped (a
        "16.79 ..." would say something false), nor names split mid-word."""
        from rich import box
        from rich.console import Group
        from rich.markup import escape
        from rich.table import Table
        from rich.text import Text

        if not self.rows:
            return Text(headline(self.trace, self.show_host, self.show_sim))
        table = Table(
            box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
            show_footer=len(self.rows) > 1,
            caption_justify="left",
        )
        columns = ["op", "events", *self.kinds, "comp.", "bwd"]
        columns += ["host"] if self.show_host else []
        columns += ["sim"] if self.show_sim else []
        columns += ["bytes", "alloc"]
        total = self._total()
        footer = self._cells(total, "total")
        hidden = self.rows[self.max_rows:]
        rest = OpRow(f"... {len(hidden)} more ops")
        for r in hidden:
            _add(rest, r)
        names = [op_short(r.op) for r in self.rows[:self.max_rows]]
        names += [rest.op] if hidden else []
        keep, op_width = self._fit(columns, footer, names, width)
        notes = {"comp.": "comp.: events of calls that became several aten ops (F.linear -> t, "
                          "addmm)", "bwd": "bwd: run by autograd", "bytes": "bytes: read and "
                          "written"}
        table.caption = "; ".join(notes[columns[n]] for n in keep if columns[n] in notes)
        for n in keep:
            name = columns[n]
            table.add_column(name, justify="left" if name == "op" else "right",
                             footer=footer[n], no_wrap=True,
                             width=op_width if name == "op" else None)
        for row in self.rows[:self.max_rows]:
            style = f"bold {FALLBACK_RED}" if row.kinds["fallback"] else None
            cells = self._cells(row, escape(abbreviate(op_short(row.op), op_width)))
            table.add_row(*[cells[n] for n in keep], style=style)
        if hidden:
            cells = self._cells(rest, abbreviate(rest.op, op_width))
            table.add_row(*[cells[n] for n in keep], style="dim")
        parts: list[Any] = [Text(headline(self.trace, self.show_host, self.show_sim)), table]
        for op, reason in sorted(self.trace.fallbacks().items()):
            parts.append(Text(f"fallback {op_short(op)}: {reason}", style=FALLBACK_RED))
        return Group(*parts)

    def _fit(self, columns: list[str], footer: list[str], names: list[str],
             width: int) -> tuple[list[int], int]:
        """(positions of the columns shown, width of the op column) at `width`. Columns go
        until the table fits with the op column at least OP_MIN wide: first the count
        columns that are all zero, then comp., bwd, alloc, host and bytes. The op column
        then takes the room left, up to its longest name."""
        rows = [self._cells(r, "") for r in self.rows[:self.max_rows]]
        size = {n: max(len(columns[n]), len(footer[n]), *(len(r[n]) for r in rows))
                for n in range(len(columns))}
        longest = max(len(name) for name in [*names, "total"])
        op_min = min(longest, OP_MIN)
        keep = list(range(len(columns)))
        order = [n for n in keep if footer[n] == "."]  # all-zero counts first
        order += [columns.index(c) for c in ("comp.", "bwd", "alloc", "host", "bytes")
                  if c in columns and columns.index(c) not in order]

        def room() -> int:  # for the op column: rich draws 2 characters per column besides
            return width - sum(size[k] for k in keep if k) - 2 * len(keep)

        for n in order:
            if room() >= op_min:
                break
            keep.remove(n)
        return keep, max(len(ELLIPSIS) + 1, min(longest, room()))

    def _total(self) -> OpRow:
        total = OpRow("total")
        for r in self.rows:
            _add(total, r)
        return total

    def _cells(self, row: OpRow, name: str) -> list[str]:
        cells = [name, str(row.count)] + [_n(row.kinds[k]) for k in self.kinds]
        cells += [_n(row.composite), _n(row.backward)]
        cells += [fmt_host(row.host_ns)] if self.show_host else []
        cells += [fmt_sim(row.sim_us)] if self.show_sim else []
        return cells + [fmt_bytes(row.nbytes), fmt_bytes(row.allocated)]


class _Fitted:
    """A renderable built when rich knows the width it will be drawn at."""

    def __init__(self, build) -> None:
        self.build = build

    def __rich_console__(self, console, options):
        yield self.build(options.max_width)


def _n(count: int) -> str:
    return str(count) if count else "."


def _add_event(into: OpRow, e, nbytes: int) -> None:
    into.count += 1
    into.kinds[e.kind] += 1
    into.backward += e.phase == "backward"
    into.host_ns += e.host_ns
    if e.sim_start_us is not None:
        into.sim_us += e.sim_end_us - e.sim_start_us
    into.nbytes += nbytes
    into.allocated += e.allocated


def _add(into: OpRow, row: OpRow) -> None:
    into.count += row.count
    into.kinds.update(row.kinds)
    into.composite += row.composite
    into.backward += row.backward
    into.host_ns += row.host_ns
    into.sim_us += row.sim_us
    into.nbytes += row.nbytes
    into.allocated += row.allocated


# -- the module tree --------------------------------------------------------------------------
@dataclass
class ModuleNode:
    """One nn.Module path in one phase: its own events by op, and its submodules."""

    name: str  # last part of the path, "fc1"
    path: str  # "MLP.fc1"
    ops: dict[str, OpRow] = field(default_factory=dict)
    children: dict[str, ModuleNode] = field(default_factory=dict)
    total: OpRow = field(default_factory=lambda: OpRow(""))  # itself and all below
    sources: Counter = field(default_factory=Counter)  # source line -> events


OUTSIDE = "(outside any module)"


def module_tree(trace: Trace) -> dict[str, ModuleNode]:
    """phase -> root node whose children are the top-level modules (one pass over events)."""
    roots: dict[str, ModuleNode] = {}
    nodes: dict[tuple[str, str], list[ModuleNode]] = {}  # (phase, path) -> chain from root
    for e in trace.events:
        chain = nodes.get((e.phase, e.module))
        if chain is None:
            root = roots.get(e.phase)
            if root is None:
                root = roots[e.phase] = ModuleNode(e.phase, "")
            chain, node = [root], root
            parts = e.module.split(".") if e.module else [OUTSIDE]
            for i, part in enumerate(parts):
                child = node.children.get(part)
                if child is None:
                    path = ".".join(parts[:i + 1]) if e.module else ""
                    child = node.children[part] = ModuleNode(part, path)
                chain.append(child)
                node = child
            nodes[e.phase, e.module] = chain
        leaf = chain[-1]
        row = leaf.ops.get(e.op)
        if row is None:
            row = leaf.ops[e.op] = OpRow(e.op)
        nbytes = sum(t.nbytes for t in e.inputs) + sum(t.nbytes for t in e.outputs)
        _add_event(row, e, nbytes)
        for node in chain:
            _add_event(node.total, e, nbytes)
        if e.source:
            leaf.sources[e.source] += 1
    return {phase: roots[phase] for phase in ("forward", "backward") if phase in roots}


class TraceTree(_RichView):
    """The trace grouped by nn.Module path, forward and backward apart."""

    def __init__(self, trace: Trace, *, times: Times = True, max_ops: int = MAX_TREE_OPS,
                 width: int = 100) -> None:
        self.show_host, self.show_sim = _check_times(times)
        self.trace, self.max_ops, self.width = trace, max_ops, width
        self.roots = module_tree(trace)

    def to_rich(self) -> Any:
        from rich.markup import escape
        from rich.text import Text
        from rich.tree import Tree

        # Labels, error text, ops and module names are data: never rich markup ("[/]" would
        # raise, "[link=javascript:...]" would become a link in the HTML).
        tree = Tree(Text(headline(self.trace, self.show_host, self.show_sim)))
        for phase, root in self.roots.items():
            self._grow(tree.add(f"[bold]{escape(phase)}[/bold]  {self._figures(root.total)}"),
                       root)
        return tree

    def _grow(self, branch, node: ModuleNode) -> None:
        from rich.markup import escape

        children = list(node.children.values())
        for child in children[:MAX_TREE_CHILDREN]:
            where = ""
            if child.sources:
                where = "  @ " + short_sources([s for s, _ in child.sources.most_common(2)])
            label = f"[bold cyan]{escape(child.name)}[/]  {self._figures(child.total)}"
            self._grow(branch.add(label + escape(where)), child)
        if len(children) > MAX_TREE_CHILDREN:
            rest = OpRow("")
            for child in children[MAX_TREE_CHILDREN:]:
                _add(rest, child.total)
            branch.add(f"[dim]... {len(children) - MAX_TREE_CHILDREN} more modules  "
                       f"{self._figures(rest)}[/]")
        rows = sorted(node.ops.values(), key=lambda r: (-r.sim_us, -r.count, r.op))
        for row in rows[:self.max_ops]:
            style = FALLBACK_RED if row.kinds["fallback"] else "dim" if row.kinds["view"] else ""
            text = f"{escape(op_short(row.op))} x{row.count}  {self._figures(row, kinds=True)}"
            branch.add(f"[{style}]{text}[/]" if style else text)
        if len(rows) > self.max_ops:
            branch.add(f"[dim]... {len(rows) - self.max_ops} more ops[/]")

    def _figures(self, row: OpRow, kinds: bool = False) -> str:
        if kinds:
            parts = ["/".join(k for k in ALL_KINDS if row.kinds[k])]
        else:
            parts = [f"{row.count} event{'' if row.count == 1 else 's'}"]
            served = ", ".join(f"{k} {row.kinds[k]}" for k in ALL_KINDS if row.kinds[k])
            parts[0] += f" ({served})" if served else ""
        if self.show_host:
            parts.append(f"host {fmt_host(row.host_ns)}")
        if self.show_sim:
            parts.append(f"sim {fmt_sim(row.sim_us)}")
        return "  ".join(parts)


def trace_summary(trace: Trace, **options) -> TraceSummary:
    """The per-op table of a trace: `trace_summary(t, times="sim", sort="count")`."""
    require_trace(trace, "trace_summary")
    return TraceSummary(trace, **options)


def trace_tree(trace: Trace, **options) -> TraceTree:
    """The trace as a tree of nn.Module paths, forward and backward."""
    require_trace(trace, "trace_tree")
    return TraceTree(trace, **options)


# How a Trace shows itself (Trace._repr_mimebundle_ and __rich__ look these up).
@register_view(Trace, "notebook")
def _notebook_view(trace: Trace) -> TraceSummary:
    return TraceSummary(trace, times="sim")  # saved outputs stay the same from run to run


@register_view(Trace, "terminal")
def _terminal_view(trace: Trace) -> TraceSummary:
    return TraceSummary(trace)
