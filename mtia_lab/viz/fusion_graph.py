"""A FusionPlan drawn: kernels as coloured clusters of aten nodes, refusals as red edges.

Everything here reads the plan's plain data (`FusionPlan.to_dict()`), never the IR and never
the scheduler, so a plan saved as JSON and loaded back draws the same picture and text:

- graphviz (`to_dot` / `to_svg`, drawn by fusion_dot.py; the words and colours both renderings
  use are fusion_data.py's): one cluster per kernel, coloured by its kind, labelled with its
  cost; its ops inside, with the dataflow between them. A thin edge stays inside a kernel (on
  chip); a thick one is a buffer written to memory and read by another
  kernel. Graph inputs carry the user's names (`x`, `fc1.weight`). A red dashed edge (R1, R2...)
  is a fusion a guardrail refused, explained in the legend; fusions a rule refused are drawn
  (grey, dotted) only with `rule_edges=True`. Combo kernels (one launch) get an outer cluster.
  `explore()` adds pan, zoom, hover and the details of a click (`details()`).
- rich (`to_rich`): a tree, kernels -> aten nodes, then the refusals. Its plain rendering is the
  text twin (`text/plain`) tests compare exactly.
"""

from __future__ import annotations

from typing import Any

from ..records.plan import symbols_text
from .display import View
from .fusion_data import (
    MODULE_BOX,
    buffer_name,
    headline,
    kernel_line,
    over,
    plan_data,
    reason_of,
    refusals,
    side,
)
from .fusion_dot import FusionDot, fusion_details
from .graphviz_render import dot_to_svg
from .trace_format import rich_text

MAX_KERNELS = 60  # kernels drawn; the rest are counted in a note
MAX_NODES_PER_KERNEL = 12  # aten nodes drawn inside one cluster
MAX_REFUSALS = 40  # refused edges drawn and listed
class FusionGraph(View):
    """A FusionPlan as a graphviz picture and a rich tree (with its plain-text twin)."""

    width = 100

    def __init__(self, plan, *, max_kernels: int = MAX_KERNELS,
                 max_nodes: int = MAX_NODES_PER_KERNEL, max_refusals: int = MAX_REFUSALS,
                 rule_edges: bool = False, width: int = 100, collapse: int | None = None,
                 expanded=()) -> None:
        for name, value in (("max_kernels", max_kernels), ("max_nodes", max_nodes),
                            ("max_refusals", max_refusals)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}: expected an int >= 1")
        self.data = plan_data(plan)
        self.max_kernels, self.max_nodes, self.max_refusals = max_kernels, max_nodes, max_refusals
        self.width, self.rule_edges = width, rule_edges
        if collapse is not None and (not isinstance(collapse, int) or collapse < 1):
            raise ValueError(f"collapse={collapse!r}: expected None or a module depth >= 1 "
                             "(2 draws `model.block` as one box, `model.block.attn` too)")
        self.collapse, self.expanded = collapse, frozenset(expanded)

    # -- the tree (terminal and text twin) ------------------------------------------------------
    def to_rich(self) -> Any:
        from rich.text import Text
        from rich.tree import Tree

        def add(parent, text: str):  # Text, not markup: "[mm+add]" is data, not a style
            return parent.add(Text(text))

        data = self.data
        tree = Tree(Text(headline(data)))
        if data.get("symbols"):
            add(tree, symbols_text(data["symbols"]))
        combo_of = {g: i for i, combo in enumerate(data["combos"]) for g in combo}
        groups = data["groups"]
        for g in groups[:self.max_kernels]:
            branch = add(tree, kernel_line(g, combo_of.get(g["index"]), over(g, data)))
            labels = g["aten_nodes"] or g["nodes"]
            for label in labels[:self.max_nodes]:
                add(branch, label)
            if len(labels) > self.max_nodes:
                add(branch, f"... {len(labels) - self.max_nodes} more nodes")
            reads = [buffer_name(data, b) for b in g["inputs"]]
            add(branch, f"reads {', '.join(reads) or '-'}; writes "
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
        return FusionDot(self).dot()

    def expand(self, module: str) -> FusionGraph:
        """The same view with one more collapsed module drawn open."""
        return FusionGraph(self.data, max_kernels=self.max_kernels, max_nodes=self.max_nodes,
                           max_refusals=self.max_refusals, rule_edges=self.rule_edges,
                           width=self.width, collapse=self.collapse,
                           expanded=self.expanded | {module})

    def explore(self, height: int = 600):
        """The picture as a live widget (see View.explore); a click on a collapsed module
        (`collapse=`) opens it in place."""
        explorer = super().explore(height)
        current = [self]

        def open_module(name: str):
            if not name.startswith(MODULE_BOX):
                return None
            current[0] = current[0].expand(name.removeprefix(MODULE_BOX))
            return current[0].to_svg(), current[0].details()

        explorer.on_select = open_module
        return explorer

    def details(self) -> dict[str, dict]:
        """Kernels, nodes and inputs by DOT name: what a click shows in `explore()`."""
        box_of = FusionDot(self).box_of
        return fusion_details(self.data, self.max_kernels, self.max_nodes, box_of)

    def to_svg(self) -> str:
        return dot_to_svg(self.to_dot())


def fusion_graph(plan, **kwargs) -> FusionGraph:
    """The view of a FusionPlan (or its `to_dict()`): display it, or `.to_text()` / `.to_svg()`."""
    return FusionGraph(plan, **kwargs)
