"""Our fusion plan beside TorchInductor's real plan for the device, every difference named.

Reads a `Comparison` (compare/plans.py). Inductor's launches, every one in the
wrapper's order, are shown as the groups of OUR aten nodes they hold (placed from Inductor's
own records, compare/launches.py), so the two lists line up; a launch that holds none of our
nodes (a layout copy of a convolution's input) says which of ours it computes a part of. A
kernel whose node group is the same in both plans is marked `=`. Below them, launch by launch,
every Inductor launch that is not one of our kernels, with the rule of ours that explains it
-- "(ours)" for a departure on purpose -- or UNEXPLAINED. Bytes and time of both sides come
from our cost model (Inductor's groups priced as we price ours), and the bytes our kernels
keep on chip (SRAM) are shown: that traffic moves at 2.7 TB/s instead of LPDDR5's 204.8 GB/s
on MTIA v2.
"""

from __future__ import annotations

from typing import Any

from . import palette
from .display import View
from .fusion_data import KIND_BORDER, fmt_us
from .graphviz_render import digraph, dot_to_svg, html_text, quote
from .trace_format import rich_text

MAX_KERNELS = 40  # kernels listed per side
MAX_NODES_SHOWN = 8  # node names written out per kernel


def _nodes(nodes, limit: int = MAX_NODES_SHOWN, part_of: tuple = ()) -> str:
    if not nodes:
        return f"(none of ours; part of {', '.join(part_of[:limit])})" if part_of \
            else "(no node of ours)"
    shown = ", ".join(nodes[:limit])
    return shown + (f", ... {len(nodes) - limit} more" if len(nodes) > limit else "")


class PlanCompare(View):
    """A `Comparison` as a table, both kernel lists, the differences, and a picture."""

    def __init__(self, comparison, *, max_kernels: int = MAX_KERNELS, width: int = 100) -> None:
        if not hasattr(comparison, "ours") or not hasattr(comparison, "differences"):
            raise TypeError(
                f"expected a mtia_lab.compare.Comparison, got {type(comparison).__name__}; get "
                "one from mtia_lab.compare.compare(fn, *args) or compare_compiled()")
        self.name = comparison.name
        ours, theirs, priced = comparison.ours, comparison.inductor, comparison.priced
        self.ours = [(g.kind, tuple(g.nodes), g.bytes_moved, g.duration_us) for g in ours.groups]
        # Every launch of Inductor's, in the wrapper's order: one that holds none of our
        # nodes is shown with the nodes it computes a part of (a layout copy, a bias add).
        launches = getattr(getattr(comparison, "placed", None), "launches", None)
        self.part_of = {i: tuple(launch.part_of) for i, launch in enumerate(launches or ())}
        self.kernel_names = {i: launch.name for i, launch in enumerate(launches or ())}
        # A value both recompute is shown in each launch computing it (computed_groups).
        groups = getattr(comparison, "computed_groups", None) or comparison.groups
        self.theirs = [(g.kind, nodes, g.bytes_moved, g.duration_us)
                       for g, nodes in zip(theirs.groups, groups, strict=True)]
        self.totals = {
            "mtia_lab": (ours.after.kernels, ours.after.bytes_moved, ours.sram_bytes,
                         ours.after.time_us),
            "Inductor": (theirs.after.kernels, priced.bytes_moved, priced.sram_bytes,
                         priced.time_us),
        }
        self.differences = [(str(d), d.explained or d.not_modelled)
                            for d in comparison.differences]
        self.notes = tuple(getattr(ours, "notes", ()))  # Inductor checks we leave out
        self.identical, self.of = comparison.identical, comparison.inductor_kernels
        self.max_kernels, self.width = max_kernels, width
        self.same = {k[1] for k in self.ours} & {k[1] for k in self.theirs}

    def rows(self) -> list[tuple[str, str, str]]:
        """(what, mtia_lab, Inductor): the numbers a test or a reader compares."""
        (ok, ob, osr, ot), (ik, ib, isr, it) = self.totals["mtia_lab"], self.totals["Inductor"]
        return [("kernels", str(ok), str(ik)), ("bytes moved", f"{ob:,}", f"{ib:,}"),
                ("kept on chip", f"{osr:,}", f"{isr:,}"),
                ("simulated", fmt_us(ot), fmt_us(it)),
                ("same groups", str(self.identical), f"of {self.of}")]

    def to_rich(self) -> Any:
        from rich import box
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        totals = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for column in ("", "mtia_lab", "Inductor"):
            totals.add_column(column, justify="left" if not column else "right")
        for row in self.rows():
            totals.add_row(*row)
        parts: list[Any] = [Text(f"{self.name}: mtia_lab vs Inductor's plan for the device; "
                                 "bytes and time by the mtia_lab cost model (on-chip bytes at "
                                 "SRAM bandwidth)"), totals]
        for side, kernels in (("mtia_lab", self.ours), ("Inductor", self.theirs)):
            table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=f"{side} kernels",
                          title_justify="left")
            for column, justify in (("#", "right"), ("", "left"), ("type", "left"),
                                    ("bytes", "right"), ("sim", "right"), ("nodes", "left")):
                table.add_column(column, justify=justify, overflow="fold")
            for i, (kind, nodes, moved, us) in enumerate(kernels[:self.max_kernels]):
                part_of = self.part_of.get(i, ()) if side == "Inductor" else ()
                table.add_row(str(i), "=" if nodes in self.same else "", kind, f"{moved:,}",
                              fmt_us(us), Text(_nodes(nodes, part_of=part_of)))
            if len(kernels) > self.max_kernels:
                table.add_row("", "", f"... {len(kernels) - self.max_kernels} more", "", "", "")
            parts.append(table)
        parts.append(Text("=: the same node group is one kernel in both plans; Inductor's "
                          "bytes and times per kernel are its own estimates"))
        unexplained = sum(1 for _, ok in self.differences if not ok)
        parts.append(Text(f"differences: {len(self.differences)} ({unexplained} unexplained), "
                          "launch by launch (Inductor's launch numbers above)"))
        for text, _ in self.differences:
            parts.append(Text(f"  {text}"))
        if self.notes:
            parts.append(Text("Inductor checks our scheduler leaves out: "
                              + ", ".join(n.split(":")[0] for n in self.notes)
                              + " (FusionPlan.notes says why)"))
        return Group(*parts)

    def to_text(self) -> str:
        return rich_text(self.to_rich(), self.width)

    def to_dot(self) -> str:
        body = ['node [shape="plaintext"];']
        for side, kernels in (("mtia_lab", self.ours), ("Inductor", self.theirs)):
            kernels_shown = kernels[:self.max_kernels]
            count, moved, _sram, us = self.totals[side]
            body.append(f"subgraph cluster_{side} {{")
            body.append(f"  label={quote(f'{side}: {count} kernels, {moved:,} B, {fmt_us(us)}')};")
            body.append('  style="rounded"; color="#555555";')
            ids = []
            for i, (kind, nodes, moved_k, us_k) in enumerate(kernels_shown):
                part_of = self.part_of.get(i, ()) if side == "Inductor" else ()
                border = KIND_BORDER.get(kind, "#555555")
                fill = palette.SAME_IN_BOTH.hex if nodes in self.same else "#ffffff"
                label = (f'<<table border="1" cellborder="0" cellspacing="0" color="{border}" '
                         f'bgcolor="{fill}"><tr><td><b>{i}</b> {html_text(kind)}</td></tr>'
                         f'<tr><td>{html_text(_nodes(nodes, 4, part_of))}</td></tr>'
                         f'<tr><td>{moved_k:,} B, {html_text(fmt_us(us_k))}</td></tr></table>>')
                ids.append(f"{side}_{i}")
                body.append(f"  {quote(ids[-1])} [label={label}];")
            if len(kernels) > len(kernels_shown):
                ids.append(f"{side}_more")
                body.append(f"  {quote(ids[-1])} [label="
                            f"{quote(f'... {len(kernels) - len(kernels_shown)} more')}];")
            for a, b in zip(ids, ids[1:], strict=False):  # kernels in launch order
                body.append(f'  {quote(a)} -> {quote(b)} [color="#999999"];')
            body.append("}")
        same = palette.SAME_IN_BOTH.word
        note = (f"{same}: the same group in both plans" if self.same else
                "no kernel computes the same group in both plans")
        return digraph(body, name=self.name, label=note, labelloc="b")

    def to_svg(self) -> str:
        return dot_to_svg(self.to_dot())

    def details(self) -> dict[str, dict]:
        """Each side's kernels by DOT name (`mtia_lab_3`, `Inductor_0`): all their nodes, cost,
        and whether the other plan has the same group (what a click shows in explore())."""
        out = {}
        for side, kernels in (("mtia_lab", self.ours), ("Inductor", self.theirs)):
            for i, (kind, nodes, moved, us) in enumerate(kernels[:self.max_kernels]):
                name = self.kernel_names.get(i, "") if side == "Inductor" else ""
                out[f"{side}_{i}"] = {"title": f"{side} kernel {i} ({kind})", "rows": [
                    ["nodes", ", ".join(nodes) or _nodes(nodes, part_of=self.part_of.get(i, ()))],
                    *([["launches", name]] if name else []),
                    ["memory", f"{moved:,} B moved"],
                    ["simulated", fmt_us(us)],
                    ["other plan", "the same group is one kernel there too"
                     if nodes in self.same else "grouped differently there"]]}
        return out


def plan_compare(comparison, **kwargs) -> PlanCompare:
    """The side-by-side view of a mtia_lab.compare.Comparison."""
    return PlanCompare(comparison, **kwargs)
