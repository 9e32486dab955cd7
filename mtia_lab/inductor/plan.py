"""Inductor's plan for a graph, as the project's `FusionPlan` record.

The same record our scheduler writes (mtia_lab/records/plan.py), so every view and check
that reads a FusionPlan (fusion_graph, the decisions table, assert_single_kernel, the guardrail
playground, plan_compare) reads Inductor's real plan too. How Inductor's facts fill it:

    groups      one KernelGroup per kernel Inductor generated (a Triton kernel, or an extern
                ATen call); `nodes` are the FX nodes of the graph Inductor lowered (its post-grad
                graph), each attributed to the one kernel that computes it by the node's
                identity in the kernel's `origins`; kind "pointwise" / "reduction" / "extern"
    decisions   one FusionDecision per pair Inductor asked about (fusion_observer.py): fused, or
                refused with `rule` (the guardrail's config name, or Inductor's reason as a
                slug) and `reason` (its WhyNoFuse text and the numbers compared)
    combos      the groups each combo-kernel launch packs (config.combo_kernels)
    cost        KernelCost from Inductor's own estimates of each scheduler node (bytes read and
                written, estimate_flops), priced by our roofline (backend/runtime/cost.py)
    sizes       what each kernel runs over, as Inductor's sympy sizes printed ("32*s0")
    symbols     under dynamic shapes, each size symbol: the input size it stands for and its
                value when traced, the sizes Inductor's estimates (bytes, times) are made at
    ir          an `InductorGraph`: the FX graph, the kernels' names and Triton sources

Departures, on purpose: Inductor has no "round" for combo decisions (-1 here, as in ours), and
its per-node byte estimates can differ from what a launch moves at run time (triton_launch.py
prices launches from the kernel's own estimate).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from ..backend.runtime.cost import KernelCost
from ..backend.runtime.device_state import RUNTIME
from ..records.input_names import user_name
from ..records.plan import (
    DEVICE_COPY_LAUNCH,
    FusionDecision,
    FusionPlan,
    KernelGroup,
    PlanTotals,
)
from ..source import node_source
from . import _compat
from .fusion_observer import Collector, rule_of
from .kernels import _jit_source, _order, describe, fx_origins

_GEMM = ("mm", "addmm", "bmm", "baddbmm", "convolution", "_scaled_mm")


@dataclass
class InductorGraph:
    """What a FusionPlan of Inductor's carries besides the records: the graph and sources."""

    gm: torch.fx.GraphModule | None
    kernel_names: dict[int, str] = field(default_factory=dict)  # group index -> kernel name
    sources: dict[str, str] = field(default_factory=dict)  # kernel name -> @triton.jit source
    kernels_of: dict[str, tuple[int, ...]] = field(default_factory=dict)  # FX node -> groups
    # Each launch's computed FX nodes (the `origins` of its buffers: inlined nodes included)
    # and the FX nodes whose value it writes (its buffers' `origin_node`): which launch holds
    # which node, read from Inductor's records (compare/launches.py aligns by these).
    origins: dict[int, tuple[str, ...]] = field(default_factory=dict)
    values: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # Each buffer's own origins (a launch's are the union over its buffers): what a launch
    # reading that buffer inherits, not what it computes again.
    buffer_origins: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Buffer -> the buffers it writes in place (`get_mutation_names`: a scatter's zero-out
    # and indexed stores into the copy of its input, a fallback's `scatter_reduce_`): such a
    # buffer holds no value of its own (no `origin_node`), the one it mutates does.
    mutations: dict[str, tuple[str, ...]] = field(default_factory=dict)
    wrapper: str = ""  # the generated wrapper's code, when the compile captured it

    def source(self, name: str) -> str:
        return self.sources[name]

    def plan_detail(self) -> None:
        """No per-buffer detail (compiler/plan_detail.py reads our scheduler's IR): views of
        Inductor's plan draw from the records alone, as for a plan saved without detail."""
        return None


# Extern nodes whose codegen is host code in the wrapper, no kernel (torch/_inductor/ir.py):
# DynamicScalar reads an unbacked symbol (`u0 = buf.item()`, codegen_dynamic_scalar),
# AssertScalar checks it (`if not (u0 >= 1): raise`, from `aten._assert_scalar`: a
# `torch._check` on a computed tensor), and DynamicSelectStorageOffset / DynamicSliceSize
# compute a size from one. Each is an ExternKernelSchedulerNode that the wrapper never launches.
_HOST_CODE = ("DynamicScalar", "AssertScalar", "DynamicSelectStorageOffset", "DynamicSliceSize")


def _kind(snode) -> str:
    name = type(snode).__name__
    if name == "NopKernelSchedulerNode" or type(getattr(snode, "node", None)).__name__ in (
            "MultiOutput", "ReinterpretView", *_HOST_CODE):
        return "nop"  # no launch: a tuple element of an extern's result, a view, host code
    if name == "ExternKernelSchedulerNode":
        return "extern"
    try:
        return "reduction" if snode.is_reduction() else "pointwise"
    except Exception:
        return "pointwise"


def _cost(snode, kind: str) -> KernelCost:
    """Inductor's own estimates for one scheduler node (fused or not)."""
    try:
        read, written = snode.get_read_buffer_sizes(), snode.get_write_buffer_sizes()
    except Exception:
        read = written = 0
    try:
        flops = snode.estimate_flops() or 0
    except Exception:
        flops = 0
    low = False
    for sub in snode.get_nodes():
        layout = getattr(getattr(sub, "node", None), "layout", None)
        if getattr(layout, "dtype", None) in (torch.bfloat16, torch.float16):
            low = True
    gemm = kind == "extern" and any(
        g in str(getattr(getattr(snode, "node", None), "python_kernel_name", "")) for g in _GEMM)
    if gemm:
        return KernelCost(float(flops), 0.0, read, written, 0, low)
    vector = float(flops) if flops else float(written // 4)
    reduction = bool(getattr(snode, "is_reduction", lambda: False)())
    return KernelCost(0.0, vector, read, written, 0, low, reduction=reduction)


def _sizes(snode, kind: str) -> tuple:
    """What a kernel runs over, as Inductor's own sizes (sympy, symbols kept): a Triton
    kernel's (numel,) or (numel, reduction numel), an extern kernel's output shape."""
    try:
        if kind == "extern":
            node = snode.node  # an ATen fallback's result is its first output (MultiOutput)
            outputs = getattr(node, "outputs", None) or [node]
            return tuple(outputs[0].get_size())
        _, (numel, rnumel) = snode.group
    except Exception:  # no single size Inductor can tell
        return ()
    return (numel,) if rnumel == 1 else (numel, rnumel)


# A size of a device tensor, or of its inner host tensor (`._inner`, the same number).
_SIZE_OF = re.compile(r"^(.*?)(?:\._inner)?\.(size|stride)\(\)\[(\d+)\]$")


def source_text(source: str) -> str:
    """Dynamo's source of a size as the user writes it: "L['x'].size()[0]" -> "x.size(0)"
    (and "L['x']._inner.size()[0]", the same size read from the device tensor's host bytes)."""
    found = _SIZE_OF.match(source)
    if not found:
        return user_name(source)
    base, what, dim = found.groups()
    return f"{user_name(base)}.{what}({dim})"


def _symbols(exprs) -> dict[str, str]:
    """Each size symbol of a dynamic-shape plan -> what it stands for (FusionPlan.symbols)."""
    out = {}
    for name, (sources, hint) in _compat.size_symbols(exprs).items():
        where = [source_text(sources[0])] if sources else []
        when = f"{hint} when traced" if hint is not None else "data-dependent (known at run time)"
        out[name] = ", ".join([*where, when])
    return out


def _names(snode) -> tuple[str, ...]:
    return tuple(o.name for o in fx_origins([snode]))


def _values(snode, by_name: dict) -> tuple[str, ...]:
    """The FX nodes whose value a launch writes: its buffers' `origin_node` (Inductor sets
    it on the buffer a node's lowering returned), and, for an extern with several outputs,
    the tuple elements (MultiOutput) that take its outputs apart."""
    if _is_device_copy(snode):
        return _copied_values(snode, by_name)
    found = []
    for sub in snode.get_nodes():
        node = getattr(sub, "node", None)
        for part in [node, *(getattr(node, "outputs", None) or ())]:
            origin = getattr(part, "origin_node", None) if part is not None else None
            if origin is not None and origin.name in by_name:
                found.append(origin.name)
    return tuple(dict.fromkeys(found))


def _mutated(node) -> tuple[str, ...]:
    """The buffers an IR node writes in place (Inductor's `get_mutation_names`)."""
    try:
        return tuple(node.get_mutation_names())
    except NotImplementedError:
        return ()


def _is_device_copy(snode) -> bool:
    """A copy between devices (Inductor's DeviceCopy): its wrapper line names no kernel."""
    return type(getattr(snode, "node", None)).__name__ == "DeviceCopy"


_COPY_TARGETS = ("aten.copy.default", "aten._to_copy.default", "prims.device_put.default")


def _copied_values(snode, by_name: dict) -> tuple[str, ...]:
    """The FX nodes a DeviceCopy's buffer holds the value of: the copies (`copy(self, src)`,
    `_to_copy`, `device_put`) of the host tensor it moves. Its buffer names no origin node,
    and its origins also list the nodes being lowered when Inductor made it (its readers)."""
    moved = {getattr(i, "get_name", lambda: "")() for i in getattr(snode.node, "inputs", ())}
    found = []
    for name in sorted(n.name for n in snode.node.origins if n.name in by_name):
        node = by_name[name]
        if str(node.target) in _COPY_TARGETS and any(
                isinstance(a, torch.fx.Node) and a.name in moved for a in node.args):
            found.append(name)
    return tuple(found)


def build_plan(c: Collector) -> FusionPlan:
    """The FusionPlan of one collected scheduler (see the module docstring)."""
    profile = RUNTIME.device().profile
    name_of: dict[int, str] = {}  # id(scheduler sub-node) -> kernel name
    combo_names: dict[int, list[str]] = {}  # id(combo node) -> its launches' names, in order
    info_sources: dict[str, str] = {}
    for kname, snodes, src in c.kernels:
        info_sources[kname] = _jit_source(src, kname)
        for s in snodes:
            if type(s).__name__ == "ForeachKernelSchedulerNode":
                combo_names.setdefault(id(s), []).append(kname)
            else:
                for sub in s.get_nodes():
                    name_of[id(sub)] = kname
    launches = []  # (scheduler node, kind) per kernel, codegen order; combos by sub-kernel
    combo_members: list[list] = []
    for snode in c.final:
        kind = _kind(snode)
        if kind == "nop":
            continue
        if type(snode).__name__ == "ForeachKernelSchedulerNode":
            subs = list(snode.get_subkernel_nodes())
            start = len(launches)
            launches.extend((s, _kind(s)) for s in subs)
            by_sub = {id(s): start + i for i, s in enumerate(subs)}
            parts = [p for p in c.partitions if p and id(p[0]) in by_sub] or [subs]
            names = combo_names.get(id(snode), [])
            for j, part in enumerate(parts):
                combo_members.append([by_sub[id(s)] for s in part if id(s) in by_sub])
                for s in part:
                    for sub in s.get_nodes():
                        name_of.setdefault(id(sub), names[j] if j < len(names) else "")
                    if j < len(names):
                        for sub in s.get_nodes():
                            name_of[id(sub)] = names[j]
            continue
        launches.append((snode, kind))
    origin_sets = [set(_names(s)) for s, _ in launches]
    graph = next((o.graph for s, _ in launches for o in fx_origins([s])), None)
    home: dict[str, int] = {}
    kernels_of: dict[str, list[int]] = {}
    for i, names in enumerate(origin_sets):
        for name in names:
            kernels_of.setdefault(name, []).append(i)
    for name, where in kernels_of.items():  # the most specific kernel naming it (fewest origins)
        home[name] = min(where, key=lambda i: (len(origin_sets[i]), i))
    by_name = {n.name: n for n in graph.nodes} if graph is not None else {}
    groups: list[KernelGroup] = []
    sizes = [_sizes(snode, kind) for snode, kind in launches]
    info = InductorGraph(getattr(graph, "owning_module", None))
    info.sources.update(info_sources)
    for i, (snode, kind) in enumerate(launches):
        own = sorted((n for n in origin_sets[i] if home[n] == i),
                     key=lambda n: _order(by_name[n]) if n in by_name else (1 << 30, n))
        fx = [by_name[n] for n in own if n in by_name]
        reads = tuple(sorted(d.name for d in snode.read_writes.reads))
        writes = tuple(sorted(snode.get_buffer_names()))
        cost = _cost(snode, kind)
        groups.append(KernelGroup(
            i, tuple(own), kind, reads, writes, cost, cost.duration_us(profile),
            tuple(describe(n) for n in fx), tuple(dict.fromkeys(
                s for s in (node_source(n) for n in fx) if s)), tuple(map(str, sizes[i]))))
        kname = next((name_of[id(sub)] for sub in snode.get_nodes()
                      if name_of.get(id(sub))), None)
        if kname is None and kind == "extern":
            kname = (DEVICE_COPY_LAUNCH if _is_device_copy(snode) else
                     str(getattr(snode.node, "python_kernel_name", "") or snode.get_name()))
        info.kernel_names[i] = kname or snode.get_name()
    info.kernels_of = {n: tuple(w) for n, w in kernels_of.items()}
    info.origins = {i: tuple(sorted(names)) for i, names in enumerate(origin_sets)}
    info.values = {i: _values(snode, by_name) for i, (snode, _) in enumerate(launches)}
    info.buffer_origins = {sub.node.get_name(): tuple(sorted(o.name for o in sub.node.origins))
                           for snode, _ in launches for sub in snode.get_nodes()
                           if getattr(sub, "node", None) is not None
                           and getattr(sub.node, "origins", None)}
    info.mutations = {sub.node.get_name(): _mutated(sub.node)
                      for snode, _ in launches for sub in snode.get_nodes()
                      if getattr(sub, "node", None) is not None and _mutated(sub.node)}
    decisions = _decisions(c, by_name)
    before_costs = [_cost(s, _kind(s)) for s in c.before if _kind(s) != "nop"]
    before = PlanTotals(len(before_costs), sum(x.bytes_read + x.bytes_written
                                               for x in before_costs),
                        sum(x.duration_us(profile) for x in before_costs))
    combos = [tuple(m) for m in combo_members if len(m) > 1]
    after_time = _after_time(groups, combos, profile)
    after = PlanTotals(len(groups) - sum(len(m) - 1 for m in combos),
                       sum(g.bytes_moved for g in groups), after_time)
    kept = {n for g in groups for n in g.nodes}
    views = tuple(n.name for n in (graph.nodes if graph is not None else ())
                  if n.op == "call_function" and n.name not in kept)
    settings = dict(c.settings, engine="inductor")
    return FusionPlan(c.name, groups, decisions, before, after, combos, settings, views, info,
                      symbols=_symbols(e for group in sizes for e in group))


def _after_time(groups, combos, profile) -> float:
    in_combo = {i for m in combos for i in m}
    total = sum(g.duration_us for g in groups if g.index not in in_combo)
    for members in combos:
        cost = KernelCost()
        for i in members:
            cost = cost + groups[i].cost
        total += cost.duration_us(profile)
    return total


def _decisions(c: Collector, by_name: dict) -> list[FusionDecision]:
    out: list[FusionDecision] = []
    seen = set()
    for a in c.asked:
        first, second = _names(a.node1), _names(a.node2)
        if not first or not second:
            continue
        rule = "fused" if a.fused else rule_of(a.why)
        reason = "Inductor fused them" if a.fused else a.text
        if a.numbers:
            reason = f"{reason} ({a.numbers})"
        key = (first, second, a.fused, rule)
        if key in seen:
            continue
        seen.add(key)
        fx = [by_name[n] for n in first + second if n in by_name]
        out.append(FusionDecision(first, second, a.fused, rule, reason, int(a.score or 0),
                                  a.round, tuple(describe(n) for n in fx),
                                  tuple(dict.fromkeys(s for s in map(node_source, fx) if s))))
    for part, node, count, extra, limit in c.combo_splits:
        first = tuple(n for s in part for n in _names(s))
        second = _names(node)
        out.append(FusionDecision(
            first, second, False, "combo_kernel_max_num_args",
            f"combo kernel split: {count} + {extra} = {count + extra} args > "
            f"combo_kernel_max_num_args={limit}", 0, -1))
    return out
