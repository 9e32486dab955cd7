"""The dataflow of a trace: ops, and the tensors that flow between them.

Drawn from the recorded events only (a trace loaded from JSON draws the same). A tensor is
matched between events by what the records say: its storage (device and simulated address)
and that storage's *version* -- the index of the last op that wrote it. So a storage freed and
reused later is a new tensor, and an in-place op makes a new version of the tensor it wrote.

- ops are boxes (fallbacks red, with the fallback's reason in the tooltip; backward ops lilac);
- tensors are ellipses (`f32[3, 8]`, the storage as s0, s1, ... in order of first use);
  tensors from outside the trace (inputs, parameters) are white;
- a view op does not move data, so it is drawn as what it is, an alias: a dashed edge from the
  view to its base, labelled with the op.

`Dataflow` is the record, `TraceGraph` renders it (text twin, DOT, SVG via the pinned
renderer). Large traces are cut to their first `max_events` events, with a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..trace.events import OpEvent, TensorRecord, Trace, require_trace
from . import palette
from .display import View
from .graphviz_render import digraph, dot_to_svg, html_text, quote
from .trace_format import StorageNames, op_short, short_source, tensor_brief, tensor_detail

MAX_EVENTS = 100
NATIVE_FILL = palette.NATIVE_OP.hex
FALLBACK_FILL = palette.FALLBACK_OP.hex
FALLBACK_LINE = palette.FALLBACK_LINE.hex
BACKWARD_FILL = palette.BACKWARD_OP.hex
FAILED_FILL = palette.FAILED_OP.hex
TENSOR_FILL = palette.TENSOR.hex
INPUT_FILL = palette.OUTSIDE_TENSOR.hex


@dataclass
class TensorNode:
    """One tensor value: a record at one version of its storage."""

    id: int
    record: TensorRecord
    storage: str  # "s3": stable name of the storage
    producer: int | None  # index of the event that wrote it; None: from outside the trace
    alias_of: int | None = None  # the tensor node this one is a view of
    alias_op: str = ""  # the view op that made it
    same_storage: bool = False  # read later through another view of what `producer` wrote

    @property
    def name(self) -> str:
        return f"t{self.id}"


@dataclass
class OpNode:
    """One (non-view) event and the tensor nodes it read and wrote."""

    event: OpEvent
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)


@dataclass
class Dataflow:
    """The graph of the first `shown` of `total` events of a trace."""

    ops: list[OpNode]
    tensors: list[TensorNode]
    total: int
    shown: int
    label: str = ""


def dataflow(trace: Trace, max_events: int = MAX_EVENTS) -> Dataflow:
    """Match every event's inputs to the tensors earlier events wrote (see the module doc)."""
    names = StorageNames()
    version: dict[tuple[str, int], int] = {}  # (device, storage) -> index of its last writer
    nodes: dict[tuple[TensorRecord, int], TensorNode] = {}
    tensors: list[TensorNode] = []
    ops: list[OpNode] = []

    def node(record: TensorRecord, producer: int | None, alias_of=None, alias_op="") -> TensorNode:
        made = TensorNode(len(tensors), record, names(record), producer, alias_of, alias_op)
        tensors.append(made)
        return made

    def read(record: TensorRecord) -> TensorNode:
        at = version.get((record.device, record.storage), -1)
        found = nodes.get((record, at))
        if found is None:  # from outside the trace, or another view of a storage an op wrote
            found = nodes[record, at] = node(record, at if at >= 0 else None)
            found.same_storage = at >= 0
        return found

    events = trace.events[:max_events]
    for e in events:
        if e.kind == "view" and e.inputs and e.outputs:
            base = read(e.inputs[0])
            for out in e.outputs:
                key = (out, version.get((out.device, out.storage), -1))
                if key not in nodes:
                    nodes[key] = node(out, None, base.id, e.op)
            continue
        op = OpNode(e, [read(t).id for t in e.inputs])
        for out in e.outputs:
            version[out.device, out.storage] = e.index
            made = nodes[out, e.index] = node(out, e.index)
            op.outputs.append(made.id)
        ops.append(op)
    return Dataflow(ops, tensors, len(trace.events), len(events),
                    trace.metadata.get("label") or "")


class TraceGraph(View):
    """A trace's dataflow as text, DOT and SVG."""

    def __init__(self, trace: Trace, max_events: int = MAX_EVENTS) -> None:
        self.graph = dataflow(trace, max_events)
        self.max_events = max_events

    def to_text(self) -> str:
        return render_text(self.graph)

    def to_dot(self) -> str:
        return render_dot(self.graph)

    def to_svg(self) -> str:
        return dot_to_svg(self.to_dot())

    def details(self) -> dict[str, dict]:
        """Ops (`e<index>`) and tensors (`t<id>`) by DOT name: what a click shows in explore()."""
        return render_details(self.graph)

    def to_rich(self) -> Any:
        from rich.text import Text

        text = Text()
        for n, line in enumerate(self.to_text().splitlines()):
            text.append(("\n" if n else "") + line,
                        style=f"bold {FALLBACK_LINE}" if "[fallback" in line else None)
        return text


def trace_graph(trace: Trace, max_events: int = MAX_EVENTS) -> TraceGraph:
    """The dataflow diagram of (the first `max_events` events of) a trace."""
    require_trace(trace, "trace_graph")
    return TraceGraph(trace, max_events)


def headline(g: Dataflow) -> str:
    label = f" {g.label!r}" if g.label else ""
    text = (f"dataflow of trace{label}: {len(g.ops)} ops, "
            f"{sum(t.alias_of is not None for t in g.tensors)} views, {len(g.tensors)} tensors")
    if g.shown < g.total:
        text += (f"; first {g.shown} of {g.total} events drawn "
                 "(trace_graph(t, max_events=...), or t.filter(...) first)")
    return text


def _tensor_line(t: TensorNode, g: Dataflow) -> str:
    if t.alias_of is not None:
        origin = f"= {op_short(t.alias_op)}(t{t.alias_of}), an alias"
    elif t.producer is None:
        origin = "from outside the trace"
    elif t.same_storage:
        origin = f"its storage written by #{t.producer}"
    else:
        origin = f"written by #{t.producer}"
    return f"  {t.name:<5} {tensor_brief(t.record):<22} {t.storage:<4} {origin}"


def render_text(g: Dataflow) -> str:
    lines = [headline(g), "tensors:"]
    lines += [_tensor_line(t, g) for t in g.tensors]
    lines.append("ops:")
    for op in g.ops:
        e = op.event
        ins = ", ".join(f"t{i}" for i in op.inputs)
        outs = ", ".join(f"t{i}" for i in op.outputs)
        where = f"  {e.module}" if e.module else ""
        line = f"  #{e.index:<4} {op_short(e.op)} [{e.kind}/{e.phase}]{where}: ({ins}) -> ({outs})"
        if e.reason:
            line += f"  ({e.reason})"
        lines.append(line)
    return "\n".join(lines)


def render_dot(g: Dataflow) -> str:
    body = [f"label={quote(headline(g))};", 'labelloc="t";',
            'node [style="filled", color="#555555"];']
    for t in g.tensors:
        record = t.record
        tip = tensor_detail(record, t.storage)
        style = "filled,dashed" if t.alias_of is not None else "filled"
        fill = INPUT_FILL if t.producer is None and t.alias_of is None else TENSOR_FILL
        label = f"<{html_text(tensor_brief(record).removesuffix(' view'))}<BR/>" \
                f'<FONT POINT-SIZE="8">{t.name} {t.storage}</FONT>>'
        body.append(
            f"{t.name} [shape=ellipse, label={label}, fillcolor={quote(fill)}, "
            f"style={quote(style)}, tooltip={quote(tip)}, fontsize=\"9\"];"
        )
    for op in g.ops:
        e = op.event
        fill, line, width = NATIVE_FILL, "#555555", "1"
        if e.phase == "backward":
            fill = BACKWARD_FILL
        if e.kind == "fallback":
            fill, line, width = FALLBACK_FILL, FALLBACK_LINE, "2.5"
        if e.reason.startswith("raised"):
            fill, line, width = FAILED_FILL, FALLBACK_LINE, "2.5"
        what = f"#{e.index} {e.kind}" + (f" {e.module}" if e.module else "")
        tip = f"{e.op} [{e.kind}/{e.phase}] {e.call} at {short_source(e.source)}"
        if e.reason:
            tip += f" -- {e.reason}"
        label = (f"<<B>{html_text(op_short(e.op))}</B><BR/>"
                 f'<FONT POINT-SIZE="8">{html_text(what)}</FONT>>')
        body.append(
            f"e{e.index} [shape=box, style=\"filled,rounded\", label={label}, "
            f"fillcolor={quote(fill)}, color={quote(line)}, penwidth={quote(width)}, "
            f"tooltip={quote(tip)}];"
        )
        body += [f"t{i} -> e{e.index};" for i in op.inputs]
        body += [f"e{e.index} -> t{i};" for i in op.outputs]
    for t in g.tensors:
        if t.alias_of is not None:  # drawn base -> view so ranks flow down; arrow at the base
            body.append(
                f"t{t.alias_of} -> {t.name} [style=dashed, dir=back, color=\"#777777\", "
                f"label={quote(op_short(t.alias_op))}];"
            )
        elif t.same_storage:  # another view of a storage an op wrote: it wrote these bytes
            body.append(f"e{t.producer} -> {t.name} [style=dotted];")
    return digraph(body, name="dataflow")


def render_details(g: Dataflow) -> dict[str, dict]:
    tensors = {t.id: t for t in g.tensors}

    def describe(ids: list[int]) -> str:
        return "\n".join(f"t{i}: {tensor_detail(tensors[i].record, tensors[i].storage)}"
                         for i in ids) or "-"

    out: dict[str, dict] = {}
    for op in g.ops:
        e = op.event
        out[f"e{e.index}"] = {"title": f"#{e.index} {op_short(e.op)}", "rows": [
            ["op", e.op], ["served", f"{e.kind} ({e.phase})" + (f": {e.reason}" if e.reason
                                                                 else "")],
            ["module", e.module or "-"], ["call", e.call or "-"],
            ["source", short_source(e.source) or "-"],
            ["inputs", describe(op.inputs)], ["outputs", describe(op.outputs)],
        ]}
    for t in g.tensors:
        if t.alias_of is not None:
            origin = f"{op_short(t.alias_op)} of t{t.alias_of} (an alias: no data moved)"
        elif t.producer is None:
            origin = "from outside the trace"
        else:
            origin = f"written by #{t.producer}"
        out[t.name] = {"title": f"{t.name} {tensor_brief(t.record)}", "rows": [
            ["tensor", tensor_detail(t.record, t.storage)], ["origin", origin]]}
    return out
