"""A FusionPlan drawn: kernels as coloured clusters of aten nodes, refusals as red edges.

Everything here reads the plan's plain data (`FusionPlan.to_dict()`), never the IR and never
the scheduler, so a plan saved as JSON and loaded back draws the same picture and text:

- graphviz (`to_dot` / `to_svg`): one cluster per kernel, coloured by its kind, labelled with
  its cost (bytes moved, simulated us); its aten nodes inside. A solid edge is a buffer one
  kernel writes and another reads; it starts at the aten node that writes it and ends at the
  reading kernel's border (the plan says which kernel reads a buffer, not which of its nodes).
  A red dashed edge is a fusion a guardrail refused, labelled with the guardrail and its
  numbers ("max_fusion_size: 3 nodes > 2"); fusions a rule refused (two templates, an extern)
  are structural and many, so they are drawn (grey, dotted, the rule's name) only with
  `rule_edges=True`. Combo kernels (one launch) get an outer cluster.
- rich (`to_rich`): a tree, kernels -> aten nodes, then the refusals. Its plain rendering is the
  text twin (`text/plain`) tests compare exactly.
"""

from __future__ import annotations

from typing import Any

from ..backend.allocator import format_bytes
from ..compiler.config import SETTINGS
from .display import View
from .graphviz_render import digraph, dot_to_svg, html_text, quote
from .trace_format import rich_text

MAX_KERNELS = 60  # kernels drawn; the rest are counted in a note
MAX_NODES_PER_KERNEL = 12  # aten nodes drawn inside one cluster
MAX_REFUSALS = 40  # refused edges drawn and listed
# Fill of a kernel cluster by its kind (6-digit hex: see graphviz_render.py).
KIND_FILL = {
    "template": "#dbe9f6", "reduction": "#fde2c4", "pointwise": "#dff2d8", "extern": "#e6e6e6",
}
KIND_BORDER = {
    "template": "#4c78a8", "reduction": "#e07b00", "pointwise": "#3c8c3c", "extern": "#777777",
}
REFUSED = "#cc2222"
RULE_REFUSED = "#999999"
# A decision whose `rule` names a config setting was made by a guardrail, not a fusion rule.
GUARDRAILS = frozenset(SETTINGS)


def plan_data(plan) -> dict:
    """The plan as plain data: a FusionPlan (through `to_dict`) or an already-plain dict."""
    if isinstance(plan, dict):
        return plan
    if hasattr(plan, "to_dict"):
        return plan.to_dict()
    raise TypeError(f"expected a FusionPlan or its to_dict(), got {type(plan).__name__}; get "
                    "one from mtia_lab.compiler.schedule(ir) or COMPILED[-1].plan")


def fmt_us(us: float) -> str:
    return f"{us:.2f} us"


def op_name(aten_node: str) -> str:
    """'mm_1: aten.mm.default' -> 'mm'; a label without a target stays as it is."""
    target = aten_node.split(": ", 1)[-1]
    return target.removeprefix("aten.").removesuffix(".default")


def refusals(data: dict) -> list[dict]:
    """Decisions that said no between nodes that ended in different kernels (and launches):
    `FusionPlan.refusals()` on plain data."""
    home = {n: g["index"] for g in data["groups"] for n in g["nodes"]}
    combo_of = {g: i for i, combo in enumerate(data["combos"]) for g in combo}
    out = []
    for d in data["decisions"]:
        a, b = home.get(d["first"][0]), home.get(d["second"][0])
        if d["fused"] or a == b or (a in combo_of and combo_of.get(a) == combo_of.get(b)):
            continue
        out.append(d)
    return out


def reason_of(d: dict) -> str:
    """The decision's reason, always starting with the rule or guardrail that said it."""
    reason = d["reason"]
    return reason if reason.startswith(d["rule"]) else f"{d['rule']}: {reason}"


def side(nodes, limit: int = 6) -> str:
    """One side of a decision: 'a+b+c', or 'a+b+...+z (40 nodes)' when long."""
    if len(nodes) <= limit:
        return "+".join(nodes)
    return f"{'+'.join(nodes[:2])}+...+{nodes[-1]} ({len(nodes)} nodes)"


def headline(data: dict) -> str:
    b, a = data["before"], data["after"]
    return (f"fusion plan {data['name']!r}: {b['kernels']} -> {a['kernels']} kernels, "
            f"{b['bytes_moved']:,} -> {a['bytes_moved']:,} bytes moved, "
            f"{fmt_us(b['time_us'])} -> {fmt_us(a['time_us'])} simulated")


def kernel_line(g: dict, combo: int | None = None) -> str:
    cost = g["cost"]
    moved = cost["bytes_read"] + cost["bytes_written"]
    launch = f", combo launch {combo}" if combo is not None else ""
    return (f"kernel {g['index']} ({g['kind']}{launch}): {_count(len(g['nodes']), 'node')}, "
            f"{format_bytes(moved)} moved ({cost['bytes_read']:,} read, "
            f"{cost['bytes_written']:,} written), {fmt_us(g['duration_us'])}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


class FusionGraph(View):
    """A FusionPlan as a graphviz picture and a rich tree (with its plain-text twin)."""

    width = 100

    def __init__(self, plan, *, max_kernels: int = MAX_KERNELS,
                 max_nodes: int = MAX_NODES_PER_KERNEL, max_refusals: int = MAX_REFUSALS,
                 rule_edges: bool = False, width: int = 100) -> None:
        for name, value in (("max_kernels", max_kernels), ("max_nodes", max_nodes),
                            ("max_refusals", max_refusals)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}: expected an int >= 1")
        self.data = plan_data(plan)
        self.max_kernels, self.max_nodes, self.max_refusals = max_kernels, max_nodes, max_refusals
        self.width, self.rule_edges = width, rule_edges

    # -- the tree (terminal and text twin) ------------------------------------------------------
    def to_rich(self) -> Any:
        from rich.text import Text
        from rich.tree import Tree

        def add(parent, text: str):  # Text, not markup: "[mm+add]" is data, not a style
            return parent.add(Text(text))

        data = self.data
        tree = Tree(Text(headline(data)))
        combo_of = {g: i for i, combo in enumerate(data["combos"]) for g in combo}
        groups = data["groups"]
        for g in groups[:self.max_kernels]:
            branch = add(tree, kernel_line(g, combo_of.get(g["index"])))
            labels = g["aten_nodes"] or g["nodes"]
            for label in labels[:self.max_nodes]:
                add(branch, label)
            if len(labels) > self.max_nodes:
                add(branch, f"... {len(labels) - self.max_nodes} more nodes")
            add(branch, f"reads {', '.join(g['inputs']) or '-'}; writes "
                       f"{', '.join(g['outputs']) or '-'}")
        if len(groups) > self.max_kernels:
            add(tree, f"... {len(groups) - self.max_kernels} more kernels")
        refused = refusals(data)
        if refused:
            branch = add(tree, f"refused fusions ({len(refused)})")
            for d in refused[:self.max_refusals]:
                add(branch, f"[{side(d['first'])}] x [{side(d['second'])}]: {reason_of(d)}")
            if len(refused) > self.max_refusals:
                add(branch, f"... {len(refused) - self.max_refusals} more")
        return tree

    def to_text(self) -> str:
        return rich_text(self.to_rich(), self.width)

    # -- the picture -----------------------------------------------------------------------------
    def to_dot(self) -> str:
        data = self.data
        groups = data["groups"][:self.max_kernels]
        shown = {g["index"] for g in groups}
        node_id: dict[str, str] = {}  # scheduler node -> DOT id
        anchor: dict[int, str] = {}  # kernel -> one node inside its cluster (edge endpoints)
        writer: dict[str, str] = {}  # buffer -> DOT id of the node (or kernel) that writes it
        clusters: dict[int, list[str]] = {}
        for g in groups:
            lines, names = self._cluster(g, node_id)
            clusters[g["index"]] = lines
            anchor[g["index"]] = names[0]
            for buf in g["outputs"]:  # a buffer is named after the node writing it, if shown
                writer[buf] = node_id.get(buf, names[-1])
        body = ['compound="true";', 'ranksep="0.3";', 'node [shape="plaintext"];']
        in_combo = {g: i for i, combo in enumerate(data["combos"]) for g in combo}
        for index, lines in clusters.items():
            if index not in in_combo:
                body += lines
        for i, combo in enumerate(data["combos"]):
            members = [clusters[g] for g in combo if g in clusters]
            if not members:
                continue
            body.append(f"subgraph cluster_combo_{i} {{")
            body += [f'  label={quote(f"combo launch {i}: {len(combo)} kernels")};',
                     '  style="dashed"; color="#555555";']
            for lines in members:
                body += ["  " + line for line in lines]
            body.append("}")
        body += self._inputs_and_edges(groups, anchor, writer)
        body += self._refused_edges(shown, anchor)
        hidden = len(data["groups"]) - len(groups)
        if hidden:
            body.append(f'more [shape="note", label={quote(f"... {hidden} more kernels")}];')
        return digraph(body, name=data["name"], label=headline(data), labelloc="t")

    def _cluster(self, g: dict, node_id: dict[str, str]) -> tuple[list[str], list[str]]:
        index, kind = g["index"], g["kind"]
        fill, border = KIND_FILL.get(kind, "#f2f2f2"), KIND_BORDER.get(kind, "#555555")
        cost = g["cost"]
        moved = cost["bytes_read"] + cost["bytes_written"]
        label = (f'<<table border="0" cellborder="0" cellspacing="0">'
                 f'<tr><td><b>kernel {index}</b> ({html_text(kind)})</td></tr>'
                 f'<tr><td>{html_text(format_bytes(moved))} moved, '
                 f'{html_text(fmt_us(g["duration_us"]))}</td></tr></table>>')
        lines = [f"subgraph cluster_k{index} {{",
                 f'  label={label}; style="filled,rounded"; fillcolor="{fill}"; '
                 f'color="{border}";']
        labels = list(g["aten_nodes"] or g["nodes"])
        names = []
        for node, text in list(zip(g["nodes"], labels, strict=True))[:self.max_nodes]:
            nid = node_id[node] = f"n_{node}"
            names.append(nid)
            op = op_name(text)
            second = "" if op == node else f"<tr><td>{html_text(op)}</td></tr>"
            row = (f'<<table border="1" cellborder="0" cellspacing="0" bgcolor="#ffffff" '
                   f'color="{border}"><tr><td><b>{html_text(node)}</b></td></tr>{second}'
                   '</table>>')
            lines.append(f"  {quote(nid)} [label={row}];")
        extra = len(labels) - self.max_nodes
        if extra > 0:
            nid = f"more_k{index}"
            names.append(nid)
            lines.append(f'  {quote(nid)} [label={quote(f"... {extra} more nodes")}];')
        for a, b in zip(names, names[1:], strict=False):  # graph order, top to bottom
            lines.append(f'  {quote(a)} -> {quote(b)} [style="invis"];')
        lines.append("}")
        return lines, names

    def _inputs_and_edges(self, groups, anchor, writer) -> list[str]:
        lines = []
        inputs = [b for g in groups for b in g["inputs"] if b not in writer]
        for buf in dict.fromkeys(inputs):
            lines.append(f'{quote("in_" + buf)} [shape="ellipse", style="filled", '
                         f'fillcolor="#f7f7f7", color="#999999", label={quote(buf)}];')
        for g in groups:
            for buf in g["inputs"]:
                src = writer.get(buf, "in_" + buf)
                lines.append(f'{quote(src)} -> {quote(anchor[g["index"]])} '
                             f'[lhead="cluster_k{g["index"]}", label={quote(buf)}];')
        return lines

    def _refused_edges(self, shown: set[int], anchor: dict[int, str]) -> list[str]:
        home = {n: g["index"] for g in self.data["groups"] for n in g["nodes"]}
        latest: dict[tuple[int, int], dict] = {}  # one edge per pair: the latest refusal
        for d in refusals(self.data):
            pair = (home[d["first"][0]], home[d["second"][0]])
            wanted = d["rule"] in GUARDRAILS or self.rule_edges
            if wanted and pair[0] in shown and pair[1] in shown:
                latest[pair] = d
        lines = []
        for (a, b), d in list(latest.items())[:self.max_refusals]:
            guardrail = d["rule"] in GUARDRAILS
            colour = REFUSED if guardrail else RULE_REFUSED
            label = "refused: " + (reason_of(d) if guardrail else d["rule"])
            lines.append(
                f'{quote(anchor[a])} -> {quote(anchor[b])} [ltail="cluster_k{a}", '
                f'lhead="cluster_k{b}", style="{"dashed" if guardrail else "dotted"}", '
                f'color="{colour}", fontcolor="{colour}", constraint="false", dir="none", '
                f'label={quote(label)}];')
        return lines

    def to_svg(self) -> str:
        return dot_to_svg(self.to_dot())


def fusion_graph(plan, **kwargs) -> FusionGraph:
    """The view of a FusionPlan (or its `to_dict()`): display it, or `.to_text()` / `.to_svg()`."""
    return FusionGraph(plan, **kwargs)
