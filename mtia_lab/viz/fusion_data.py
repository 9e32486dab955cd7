"""A FusionPlan's plain data (`FusionPlan.to_dict()`) in words and colours: what both of its
renderings, the view (fusion_graph.py) and the graphviz picture (fusion_dot.py), say the same
way. A module of its own so the two import it, not each other."""

from __future__ import annotations

from ..backend.runtime.allocator import format_bytes
from . import palette

# Fill of a kernel cluster by its kind (6-digit hex: see graphviz_render.py).
KIND_FILL = {
    "template": palette.TEMPLATE_FILL.hex, "reduction": palette.REDUCTION_FILL.hex,
    "pointwise": palette.POINTWISE_FILL.hex, "extern": palette.EXTERN_FILL.hex,
}
KIND_BORDER = {
    "template": palette.TEMPLATE_BORDER.hex, "reduction": palette.REDUCTION_BORDER.hex,
    "pointwise": palette.POINTWISE_BORDER.hex, "extern": palette.EXTERN_BORDER.hex,
}
REFUSED = palette.REFUSED.hex
MODULE_BOX = "module "  # DOT name of a collapsed module's box: "module model.block"
RULE_REFUSED = palette.RULE_REFUSED.hex


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


def over(g: dict, data: dict) -> str:
    """" over s0 x 32": what a kernel runs over, in a plan of symbolic sizes (else "")."""
    sizes = g.get("sizes") or ()
    return f" over {' x '.join(sizes)}" if sizes and data.get("symbols") else ""


def kernel_line(g: dict, combo: int | None = None, sizes: str = "") -> str:
    cost = g["cost"]
    moved = cost["bytes_read"] + cost["bytes_written"]
    launch = f", combo launch {combo}" if combo is not None else ""
    return (f"kernel {g['index']} ({g['kind']}{sizes}{launch}): "
            f"{_count(len(g['nodes']), 'node')}, "
            f"{format_bytes(moved)} moved ({cost['bytes_read']:,} read, "
            f"{cost['bytes_written']:,} written), {fmt_us(g['duration_us'])}")


def buffer_name(data: dict, buf: str) -> str:
    """A buffer as the user calls it (`fc1.weight`, `x`) when it is a graph input they named,
    else the graph's own name for it."""
    found = data.get("detail", {}).get("buffers", {}).get(buf, {})
    return found.get("user_name") or buf


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
