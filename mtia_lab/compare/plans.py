"""Our plan beside Inductor's real plan for the device, launch by launch, each difference named.

The "Inductor" side is what TorchInductor really does for mtia_sim (mtia_lab/inductor: Triton
scheduling, matmuls as extern calls, the device's keep-list): `device_plan` compiles the very
aten graph our plan ran on, so both sides start from one graph and one decomposition rule, and
keeps the wrapper Inductor generated. Inductor re-decomposes and rewrites the graph (gelu into
erf and muls, addmm into mm + a bias add, attention into SDPA's math); launches.py places each
of our nodes on the one launch that holds it, from Inductor's own records (the launches'
origins, the values their buffers hold, the wrapper's launches), and keeps the launches that
hold none of our nodes (a layout copy of a convolution's input). `Comparison.check()` raises
when that alignment is incomplete.

For every Inductor launch whose node group is not one of ours, `Difference` lists our kernels
that hold its nodes and the rules of ours that split or joined them (from our plan's decisions).
A difference is *explained* when each of those rules is a departure we make on purpose
(rules.DEPARTURES, shown as "(ours)"); *not modelled* when each is a part of Inductor the
scheduler leaves out on purpose and names (rules.NOT_MODELLED: a peeled convolution bias's
launch); otherwise it is shown as unexplained: a place where our scheduler claims to follow
Inductor and does not. A departure explains only while it is on: with computed_once off, a
value Inductor recomputes in each reader and ours stores once is `stored_by_us_only`, not
computed_once (our recompute rule missed it).

Inductor runs under the values of our guardrails that it has too (records/guardrails.py:
`as_inductor_config`). The scheduling-time benchmark's helper (`common_graph`) is in
scheduler_timing.py: it is not the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.fx

from .. import _compat
from .._compat import size_hint
from ..backend.runtime.device_state import RUNTIME
from ..compiler import config, plans_for
from ..compiler.aot import COMPILED, CompiledGraph
from ..compiler.ir import TRAINING, FusedSchedulerNode, Kind
from ..compiler.lowering import pointwise_cat
from ..compiler.pricing import kernel_cost
from ..compiler.rules import DEPARTURES, NOT_MODELLED
from ..compiler.scatter import copy_name as scatter_copy_name
from ..inductor import _compat as inductor_compat
from ..inductor import inductor_plan
from ..records.guardrails import as_inductor_config
from ..records.plan import FusionPlan
from .launches import Attribution, Launch, attribute, our_names, roots


def _device_graph(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of our graph that runs on mtia_sim: the backend ran it on host tensors
    (factories.host_devices wrote `device=cpu` into it, and `torch.tensor([...],
    device=x.device)` in the user's code is a host tensor constant); give those back to the
    device. A constant that eager could have left on the host stays there: a 0-dim one
    (`index[0] = 5`), one only used as an index (`x[:, torch.tensor([1])]`) or copied or moved
    (`table.to(x.device)`); Inductor copies the first and the last to the device in a launch
    of their own and indexes by the second with aten.index.

    Its views become reshapes: the copy goes through Inductor's decompositions again, and
    where they give a tensor other strides than ours did (Inductor's `cat` drops an empty
    input and clones the other, keeping its strides), our view of it may not be a view there;
    Inductor itself traces `reshape`, which copies only when it must."""
    device = torch.device("mtia_sim", 0)
    with _compat.plain_graph_modules():  # Dynamo traces a plain GraphModule's forward
        copy = torch.fx.GraphModule(gm, copy_graph(gm.graph))
    for node in list(copy.graph.nodes):  # _constant_to may replace a get_attr
        if isinstance(node.kwargs.get("device"), torch.device) and \
                node.kwargs["device"].type == "cpu":
            node.update_kwarg("device", device)
        elif node.op == "get_attr":
            _constant_to(copy, node, device)
        elif node.target is torch.ops.aten.view.default:
            node.target = torch.ops.aten.reshape.default
    copy.recompile()
    return copy


_COPIES = {torch.ops.aten.lift_fresh_copy.default, torch.ops.aten.clone.default}
# Readers eager lets a host tensor meet device tensors in: the index lists of indexing, the
# source of a copy (`slot.copy_(table)`) and a move (`table.to(x.device)`).
_INDEXING = {torch.ops.aten.index.Tensor, torch.ops.aten.index_put.default,
             torch.ops.aten.index_put_.default, torch.ops.aten._unsafe_index.Tensor}
_COPYING = {torch.ops.aten.copy.default, torch.ops.aten.copy_.default}


def _read_as_data(constant: torch.fx.Node) -> bool:
    """Whether a constant is read (through copies of it) by something other than an index
    list, a copy or a move: as an operand that eager takes only on the other operands'
    device."""
    readers, seen = list(constant.users), set()
    while readers:
        reader = readers.pop()
        if reader in seen:
            continue
        seen.add(reader)
        source = reader.args[0] if reader.args else None
        if reader.target in _COPIES:
            readers.extend(reader.users)
        elif reader.target is torch.ops.aten._to_copy.default:
            continue
        elif reader.target in _COPYING:
            if source in seen | {constant}:
                return True  # the destination of the copy
        elif reader.target not in _INDEXING or source in seen | {constant}:
            return True  # data of an op, or the indexed tensor itself
    return False


def _constant_to(module: torch.nn.Module, constant: torch.fx.Node,
                 device: torch.device) -> None:
    """Move a host tensor constant of the copy to `device` unless eager could have left it on
    the host: a 0-dim one, or one only read as an index. An empty one becomes a factory
    (`_empty_factory`). (GraphModule gave the copy its own reference, so our graph keeps its
    host tensor.)"""
    *path, name = constant.target.split(".")
    owner = module.get_submodule(".".join(path))
    value = getattr(owner, name)
    if isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dim() > 0 \
            and _read_as_data(constant):
        if value.numel():
            setattr(owner, name, value.to(device))
        else:
            _empty_factory(constant, value, device)


def _empty_factory(constant: torch.fx.Node, value: torch.Tensor, device: torch.device) -> None:
    """An empty constant (a DynamicCache's `torch.tensor([])` keys) as `aten.empty` on `device`
    in the copy: it holds no values, so the factory is the same tensor. As a device tensor
    constant, Dynamo cannot trace it: its fake copy of a tensor with a 0-byte storage resizes
    the fake's storage to 0 (meta_utils.MetaConverter.meta_tensor), which a PrivateUse1 device
    must implement in C++ (resizePrivateUse1Bytes), and the module attribute is left opaque
    ('Failed to convert args/kwargs to proxy')."""
    graph = constant.graph
    with graph.inserting_before(constant):
        empty = graph.call_function(torch.ops.aten.empty.memory_format, (list(value.shape),),
                                    {"dtype": value.dtype, "device": device})
    empty.meta.update(constant.meta)
    constant.replace_all_uses_with(empty)
    graph.erase_node(constant)


def copy_graph(graph: torch.fx.Graph) -> torch.fx.Graph:
    new = torch.fx.Graph()
    out = new.graph_copy(graph, {})
    new.output(out)
    return new


def _inputs(gm: torch.fx.GraphModule) -> list[torch.Tensor]:
    """Device tensors shaped like the graph's inputs (indices 0: in range for any gather)."""
    gen = torch.Generator().manual_seed(0)
    args = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise ValueError(f"placeholder {node.name} has no tensor meta['val']")
        shape = tuple(size_hint(d) for d in val.shape)
        t = torch.randn(shape, generator=gen, dtype=val.dtype) if val.dtype.is_floating_point \
            else torch.zeros(shape, dtype=val.dtype)
        args.append(t.to("mtia_sim"))
    return args


def device_plan(gm: torch.fx.GraphModule, inductor_config: dict | None = None) -> FusionPlan:
    """Inductor's real plan (mtia_lab.inductor.inductor_plan) for our aten graph on mtia_sim,
    under the Inductor config values of our guardrails (and `inductor_config`, if given)."""
    settings = as_inductor_config(config.snapshot())
    if gm.meta.get(TRAINING):  # Inductor compiles our graph as an inference graph: as it
        settings["reorder_for_locality"] = False  # would the user's training graph, no reorder
    settings.update(inductor_config or {})
    graph = _device_graph(gm)
    plans: list[FusionPlan] = []
    _, codes = inductor_compat.run_and_get_code(
        lambda: plans.append(inductor_plan(graph.forward, *_inputs(gm), config=settings)))
    plan = plans[0]
    if codes and getattr(plan.ir, "wrapper", None) == "":
        plan.ir.wrapper = codes[0]  # what the launches are checked against (launches.py)
    return plan


def align(ours: FusionPlan, theirs: FusionPlan) -> Attribution:
    """Each of Inductor's launches as the group of OUR nodes it holds (launches.py: placed by
    Inductor's own records, every node of ours on exactly one launch)."""
    return attribute(ours, theirs, getattr(theirs.ir, "wrapper", "") or None)


@dataclass(frozen=True)
class Difference:
    """One Inductor kernel whose node group is not one of our kernels, and why."""

    inductor: tuple[str, ...]  # our nodes Inductor runs as one kernel
    ours: tuple[tuple[str, ...], ...]  # our kernels holding them (with what else they hold)
    rules: tuple[str, ...]  # our rules that split or joined them ("computed_once"...)
    reasons: tuple[str, ...]  # the decisions, as our records say them
    launch: int = -1  # which of Inductor's launches (its index in the wrapper's order)
    kernel: str = ""  # that launch's kernel name

    @property
    def explained(self) -> bool:
        return bool(self.rules) and all(r in DEPARTURES for r in self.rules)

    @property
    def not_modelled(self) -> bool:
        """Explained by a part of Inductor we leave out and name (rules.NOT_MODELLED): no
        departure of ours, and no claim to follow Inductor there either."""
        return bool(self.rules) and all(r in NOT_MODELLED for r in self.rules)

    def __str__(self) -> str:
        what = ("explained by " + ", ".join(f"{r} (ours)" for r in self.rules)
                if self.explained else "NOT MODELLED: " + ", ".join(self.rules)
                if self.not_modelled else
                "UNEXPLAINED: " + (", ".join(self.rules) or "no rule"))
        ours = " | ".join("+".join(g) for g in self.ours)
        where = f"launch {self.launch} " if self.launch >= 0 else ""
        return f"{where}Inductor [{'+'.join(self.inductor)}] vs ours [{ours}]: {what}"


def _decision_between(plan: FusionPlan, left: set, right: set, fused: bool):
    """The last decision of ours between a group inside `left` and one inside `right`."""
    found = None
    for d in plan.decisions:
        if d.fused is not fused or d.round < 0:
            continue
        a, b = set(d.first), set(d.second)
        if (a & left and b & right and not a & right and not b & left) or \
                (a & right and b & left and not a & left and not b & right):
            found = d
    return found


def launch_group(launch: Launch, ours: FusionPlan, placed: Attribution) -> tuple[str, ...]:
    """The group of our nodes a launch computes: those it holds, and the values it computes
    again that our plan recomputes too (computed_once=False). Inductor's records put a value
    it recomputes in several launches on the first of them only (`placed.recomputed`)."""
    ir = ours.ir
    again = set(launch.part_of) & placed.recomputed & set(ours.recomputed)
    wanted = set(launch.nodes)
    grew = True
    while grew:  # a value Inductor folded away (x * ones) brings in what it reads again
        size = len(wanted)
        wanted |= _read_again(again, wanted, ir)
        for name in reversed(ours.recomputed):  # computed nowhere: with each reader (folded)
            if name not in wanted and placed.how.get(name, "").startswith("absorbed") and any(
                    u in wanted for u in ir.users.get(ir.by_name[name].writes[0], ())):
                wanted.add(name)
        grew = len(wanted) > size
    if wanted == set(launch.nodes):
        return launch.nodes
    return tuple(n.name for n in ir.nodes if n.name in wanted)


def _read_again(again: set[str], held: set[str], ir) -> set[str]:
    """Of the recomputed values a launch's records name, those it computes: read by a node
    it holds, or by another such value (a weight's layout copy for a convolution names the
    convolution's input chain in its origins, but reads none of it)."""
    read: set[str] = set()
    grew = True
    while grew:
        grew = False
        for name in again - read:
            if any(u in held | read for u in ir.users.get(ir.by_name[name].writes[0], ())):
                read.add(name)
                grew = True
    return read


def _homes(ours: FusionPlan) -> dict[str, list]:
    """Our node -> the kernels of ours that compute it (several only for a recomputed one)."""
    homes: dict[str, list] = {}
    for g in ours.groups:
        for n in g.nodes:
            homes.setdefault(n, []).append(g)
    return homes


def _holder(homes: dict[str, list], name: str, wanted: set[str]):
    """The kernel of ours that computes `name` for a launch computing `wanted`: of the
    kernels recomputing it, the one sharing most of the launch's other nodes."""
    return max(homes[name], key=lambda g: len(set(g.nodes) & wanted))


def differences(ours: FusionPlan, theirs: FusionPlan,
                placed: Attribution) -> list[Difference]:
    """Every Inductor launch that is not one of our kernels, with the rules that explain it."""
    mine = {g.nodes for g in ours.groups}
    homes = _homes(ours)
    recomputed, merged = placed.recomputed, _merged(ours, theirs, placed)
    rewritten = _rewritten(ours, theirs, placed)
    once = _stored_once_rule(ours)  # computed_once, or stored_by_us_only with it off
    out = []
    for launch in placed.launches:
        group = launch_group(launch, ours, placed)
        if not group:
            out.append(_launch_of_its_own(ours, launch, launch.index in placed.pattern_only,
                                          _copies_a_piece(ours, launch, placed)))
            continue
        if group in mine:
            continue
        wanted = set(group)
        home = {n: _holder(homes, n, wanted) for n in group}
        holders = shown = list({home[n].index: home[n] for n in group}.values())
        rules: list[str] = []
        reasons: list[str] = []
        inlined = [h for h in holders if _inlined_into_readers(ours, placed, h, wanted)
                   or set(h.nodes) & wanted <= recomputed]
        if inlined and len(holders) - len(inlined) == 1:  # the rest is one kernel of ours
            rules.append(once)
            names = [n for h in inlined for n in h.nodes if n in wanted]
            stored = sorted({placed.stored_as[n] for n in names if n in placed.stored_as})
            reasons.append("Inductor computes " + ", ".join(names) + " inside the loop of "
                           "each reader " + (f"(and stores it as {', '.join(stored)})"
                                             if stored else "(never stored)")
                           + "; we compute a value with several readers once, in one kernel")
            holders = [h for h in holders if h not in inlined]
        pattern = [m for m in merged if m & wanted]
        split_by_pattern = len(holders) > 1 and pattern and _joined_by(pattern, holders)
        for i, a in enumerate(holders):  # split: which decision kept our kernels apart
            if split_by_pattern:
                rules.append("post_grad_pattern")
                reasons.append("Inductor rewrote " + "; ".join(
                    " + ".join(sorted(m)) for m in pattern) + " into one op (a post-grad "
                    "pattern) before scheduling")
                break
            for b in holders[i + 1:]:
                d = _decision_between(ours, set(a.nodes) & wanted, set(b.nodes) & wanted, False)
                rules.append(d.rule if d else "never_a_candidate")
                reasons.append(str(d) if d else f"[{'+'.join(a.nodes)}] and "
                               f"[{'+'.join(b.nodes)}] share no buffer: never a candidate")
        for holder in holders:  # joined: which decision brought in nodes Inductor keeps apart
            extra = set(holder.nodes) - wanted
            if extra and _scatter_halves(ours, placed, launch, wanted, extra):
                rules.append("scatter_in_two_launches")
                reasons.append(f"Inductor runs {', '.join(sorted(extra | wanted))} as a "
                               "scatter's two launches (the copy of its input, the indexed "
                               "stores with their index computed inline); ours is one kernel")
                continue
            if extra and extra <= recomputed and extra <= set(launch.part_of):
                rules.append(once)
                reasons.append(f"Inductor computes {', '.join(sorted(extra))} in this launch "
                               "too (inlined into each reader); we compute it once, here")
                continue
            if extra and _stored_nowhere(ours, placed, extra):
                rules.append(once)
                reasons.append(f"Inductor stores {', '.join(sorted(extra))} nowhere (each "
                               "reader computes it); we compute it once, in this kernel")
                continue
            if not extra:
                continue
            d = _decision_between(ours, set(holder.nodes) & wanted, extra, True)
            if d is not None and _into_rewritten(d, holder, rewritten):
                rules.append("post_grad_pattern")
                reasons.append(f"{d} -- Inductor rewrote " + "; ".join(
                    " + ".join(sorted(m)) for m in rewritten if m & set(holder.nodes))
                    + " into one op (a post-grad pattern) before scheduling")
            elif d is not None and _shares_only_recomputed(ours, placed, d):
                rules.append(once)
                reasons.append(f"{d} -- the only data they share is a value Inductor stores "
                               "nowhere (each reader computes it from its inputs); we store "
                               "it once, and its readers share it")
            elif d is not None:
                rules.append(d.rule)
                reasons.append(str(d))
        stored = wanted_recomputed_by_us_only(ours, placed, holders, wanted)
        if stored:
            rules.append("recomputed_in_each_reader")
            reasons.append(f"we recompute {', '.join(sorted(stored))} in each reader "
                           "(computed_once=False); Inductor stores it")
        again = wanted & recomputed - set(ours.recomputed)  # ours recomputes the others too
        if again:
            rules.append(once)
            reasons.append(f"Inductor computes {', '.join(sorted(again))} in more than one "
                           "kernel (inlined into each)")
        out.append(Difference(group, tuple(h.nodes for h in shown),
                              tuple(dict.fromkeys(rules)), tuple(dict.fromkeys(reasons)),
                              launch.index, launch.name))
    return out


def _scatter_halves(ours: FusionPlan, placed: Attribution, launch: Launch, wanted: set[str],
                    extra: set[str]) -> bool:
    """Are this launch and the nodes our kernel joins to it the two launches of one scatter
    of Inductor's: the copy of its input, which holds the scatter (its buffer's writer), and
    the indexed stores, part of it, which hold what they compute inline (the index: a
    sequence length minus one)? Our scatter is one kernel (scatter_in_two_launches)."""
    if ours.ir is None:
        return False
    scatters = {n for n in set(launch.part_of) | wanted if _one_kernel_scatter(ours, n)}
    for other in placed.launches:
        if other is launch or not extra <= set(other.nodes):
            continue
        if scatters & set(launch.part_of) & set(other.nodes) or \
                scatters & wanted & set(other.part_of):
            return True
    return False


def _one_kernel_scatter(ours: FusionPlan, name: str) -> bool:
    """Is `name` a scatter our plan runs as one kernel (scatter_in_two_launches)? Not one
    whose copy of its input is a node of its own (scatter_in_one_kernel=False, scatter.py)."""
    node = ours.ir.by_name.get(name)
    return node is not None and node.scatter and \
        scatter_copy_name(name) not in ours.ir.by_name


def _stored_once_rule(ours: FusionPlan) -> str:
    """The rule for a value Inductor computes in each reader and ours stores once: our
    departure computed_once while it is on; with it off (`computed_once=False`, recompute.py
    gives each reader its own copy of such a value), ours should have recomputed it too, and
    did not: `stored_by_us_only`, which no rule explains (our realize rule, not a departure)."""
    return "computed_once" if ours.settings.get("computed_once", True) else "stored_by_us_only"


def wanted_recomputed_by_us_only(ours: FusionPlan, placed: Attribution, holders,
                                 wanted: set[str]) -> set[str]:
    """Values our plan recomputes in each reader that Inductor computes in one launch and
    stores (our realize rule was wrong there: an unexplained difference)."""
    ours_again = {n for h in holders for n in h.nodes} & set(ours.recomputed)
    return {n for n in ours_again if n not in placed.recomputed
            and not placed.how.get(n, "").startswith("absorbed")}


def _inlined_into_readers(ours: FusionPlan, placed: Attribution, holder, wanted: set) -> bool:
    """Is `holder` a kernel of ours that Inductor never stores: each of its nodes computed
    inline in launches (`how` "computed", none written; this launch computes some of them),
    one of them read by several nodes?
    Inductor's lowering inlines such a value into every reader (should_realize_on_reuse says
    no); our computed_once departure gives it a kernel of its own. Nodes Inductor removed
    (a cast to the same dtype, absorbed with their kernel-mates) are stored nowhere either."""
    inside = set(holder.nodes) & wanted
    return bool(inside) and _stored_nowhere(ours, placed, inside)


def _shares_only_recomputed(ours: FusionPlan, placed: Attribution, decision) -> bool:
    """Did a horizontal fusion of ours join two kernels that share nothing but values Inductor
    stores nowhere? Their sharing exists by our computed_once departure."""
    if ours.ir is None or decision.rule != "horizontal":
        return False
    ir = ours.ir

    def touched(names) -> set[str]:
        return {b for n in names for b in (*ir.by_name[n].reads, *ir.by_name[n].writes)}

    shared = touched(decision.first) & touched(decision.second)
    producers = {ir.buffers[b].producer for b in shared}
    return bool(shared) and None not in producers and all(
        _stored_nowhere(ours, placed, {p}) for p in producers)


def _stored_nowhere(ours: FusionPlan, placed: Attribution, names: set[str]) -> bool:
    """Are `names` values no launch of Inductor's writes (computed inline, or removed), one
    of them read by several nodes of ours, or by a node on another launch? Inductor inlines
    such a value into each reader (recomputed by each launch that reads it, computed once
    where CSE finds it twice in one launch); we compute a value with several readers once,
    and where its kernel goes is our computed_once departure."""
    steps = [placed.how.get(n, "") for n in names]
    if "computed" not in steps or any(
            s != "computed" and not s.startswith("absorbed with") for s in steps):
        return False
    users = ours.ir.node_users() if ours.ir is not None else {}
    launch = {n: launch.index for launch in placed.launches for n in launch.nodes}
    return any(len(users.get(n, ())) > 1 or any(
        launch.get(u, -1) != launch.get(n, -1) for u in set(users.get(n, ())) - names)
        for n in names)


def _copies_a_piece(ours: FusionPlan, launch: Launch, placed: Attribution) -> bool:
    """Is `launch`, holding none of our nodes, a copy of a piece of a cat: a group of a combo
    (foreach) kernel copying the pieces (the cat on one of its groups), or a launch of its
    own computing part of the cat only? Inductor's ConcatKernel copies each piece that
    cannot be realized into its slice in a copy of its own (`ConcatKernel.realize_into`),
    and packs the copies in one ForeachKernelSchedulerNode where it can; our cat kernel
    copies every piece (the concat_kernel departure), so one launch holds the cat and the
    others nothing (ZAYA's cat of two projections, also read through views: two copies)."""
    gm = getattr(ours.ir, "gm", None)
    combo = next((c for c in placed.combos if launch.index in c), None)
    if gm is None or (combo is None and launch.nodes):
        return False
    fx = {n.name: n for n in gm.graph.nodes}
    packed = [m for m in placed.launches if m.index in combo] if combo is not None else [launch]
    return any(n in fx and fx[n].target is torch.ops.aten.cat.default
               and n in ours.ir.by_name and not pointwise_cat(ours.ir.by_name[n], ours.ir)
               for m in packed for n in (*m.nodes, *m.part_of))


def _launch_of_its_own(ours: FusionPlan, launch: Launch, pattern: bool = False,
                       piece_copy: bool = False) -> Difference:
    """A launch of Inductor's that holds none of our nodes, only parts of them. `pattern`: it
    computes only nodes a graph rewrite of Inductor's made (launches.py `pattern_only`): the
    launch exists because of the rewrite (post_grad_pattern), not a fusion decision.
    `piece_copy`: it copies a piece of a cat whose pieces our cat kernel copies together
    (`_copies_a_piece`: concat_kernel, ours)."""
    home = {n: g for g in ours.groups for n in g.nodes}
    holders = tuple({home[n].index: home[n].nodes for n in launch.part_of}.values())
    kinds = {home[n].kind for n in launch.part_of}
    scatter = ours.ir is not None and any(_one_kernel_scatter(ours, n) for n in launch.part_of)
    split = ours.ir is not None and any(
        ours.ir.by_name[n].splits > 1 for n in launch.part_of if n in ours.ir.by_name)
    rule = ("post_grad_pattern" if pattern else "concat_kernel" if piece_copy else
            _extern_part(ours, launch) if kinds & {"extern", "template"} else
            "scatter_in_two_launches" if scatter else
            "split_reductions" if split else "inductor_only_launch")
    reason = (f"{launch.name} computes part of {', '.join(launch.part_of) or 'nothing of ours'}"
              f" ({'/'.join(sorted(kinds))} in our plan)")
    if pattern:
        reason += (": it computes only nodes a pattern of Inductor's made (none from ours), "
                   "as SDPA's math adds `_safe_softmax`'s row check to a softmax it rewrote")
    elif piece_copy:
        reason += (": it copies a piece of a cat Inductor makes a ConcatKernel of, into its "
                   "slice; our cat kernel copies every piece")
    return Difference((), holders, (rule,), (reason,), launch.index, launch.name)


def _extern_part(ours: FusionPlan, launch: Launch) -> str:
    """The rule for a launch of Inductor's computing part of an extern of ours: our departure
    extern_in_triton while it is on; with it off (the layout copies of a convolution's
    operands are then ours too), what the launch is, a part of the op we do not model
    (rules.NOT_MODELLED): a convolution's bias Inductor peeled off the call and adds in a
    Triton kernel no reader of ours joins, or a layout copy of another extern's operand."""
    if ours.settings.get("extern_in_triton", True):
        return "extern_in_triton"
    gm = getattr(ours.ir, "gm", None)
    fx = {n.name: n for n in gm.graph.nodes} if gm is not None else {}
    biased = [fx[n] for n in launch.part_of if n in fx
              and fx[n].target is torch.ops.aten.convolution.default
              and len(fx[n].args) > 2 and fx[n].args[2] is not None]
    return "conv_bias_in_triton" if biased else "extern_operand_copy"


def _merged(ours: FusionPlan, theirs: FusionPlan, placed: Attribution) -> list[set[str]]:
    """Sets of our nodes that Inductor's post-grad patterns turned into one op (mm + add into
    addmm), or whose node a pattern removed (placed with its users): no fusion decision of
    anyone's, a rewrite of the graph."""
    out = _rewritten(ours, theirs)
    users = ours.ir.node_users()
    for name, step in placed.how.items():
        if step.startswith("absorbed"):
            out.append({name} | set(users.get(name, ())))
    return out


def _rewritten(ours: FusionPlan, theirs: FusionPlan,
               placed: Attribution | None = None) -> list[set[str]]:
    """Sets of our nodes a post-grad pattern of Inductor's turned into one op (mm + add into
    addmm: `fx_passes/post_grad.py` `addmm`), found by the op's origins, or (`placed`) by an
    extern of ours that no launch computes, absorbed by its users (the pattern's op named
    only the add)."""
    gm = getattr(theirs.ir, "gm", None)
    mine = our_names(ours.ir)
    out: list[set[str]] = []
    for node in gm.graph.nodes if gm is not None else ():
        found = roots(node, mine)
        if len(found) > 1:
            out.append(found)
    if placed is not None:
        users = ours.ir.node_users()
        out += [{name} | set(users.get(name, ())) for name, step in placed.how.items()
                if step == "absorbed by its users"
                and ours.ir.by_name[name].kind in (Kind.EXTERN, Kind.TEMPLATE)]
    return out


def _into_rewritten(decision, holder, rewritten: list[set[str]]) -> bool:
    """Did a fusion of ours join a node that Inductor's post-grad pattern made part of
    another op outside this kernel of ours (the add of mm + add, an addmm: an extern whose
    input Inductor realizes)? The fusion had no counterpart in Inductor's graph."""
    joined = set(decision.first) | set(decision.second)
    return any(m & joined and m - set(holder.nodes) for m in rewritten)


def _joined_by(patterns: list[set[str]], holders: list) -> bool:
    """Do the patterns' node sets connect every one of our kernels `holders` into one?"""
    parent = list(range(len(holders)))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for nodes in patterns:
        touched = [i for i, h in enumerate(holders) if nodes & set(h.nodes)]
        for i in touched[1:]:
            parent[find(i)] = find(touched[0])
    return len({find(i) for i in range(len(holders))}) == 1


@dataclass
class Comparison:
    """Our plan (the one that ran) and Inductor's device plan for one graph."""

    name: str
    ours: FusionPlan
    inductor: FusionPlan
    groups: list[tuple[str, ...]]  # each Inductor launch as the group of our nodes it holds
    differences: list[Difference]
    priced: Priced  # Inductor's groups priced by our cost model
    placed: Attribution  # how each of our nodes was placed on a launch (launches.py)

    @property
    def computed_groups(self) -> list[tuple[str, ...]]:
        """Each Inductor launch as the group of our nodes it computes: `groups`, plus the
        values it recomputes that our plan recomputes too (`launch_group`)."""
        return [launch_group(launch, self.ours, self.placed) for launch in self.placed.launches]

    @property
    def identical(self) -> int:
        """Inductor launches whose node group is exactly one of our kernels."""
        mine = {g.nodes for g in self.ours.groups}
        return sum(1 for launch, group in zip(self.placed.launches, self.computed_groups,
                                               strict=True) if launch.nodes and group in mine)

    @property
    def inductor_kernels(self) -> int:
        """Inductor's launches, every one (those that hold none of our nodes too)."""
        return len(self.groups)

    def check(self) -> Comparison:
        """Raise AlignmentError naming what is unaligned: a node of ours on no launch, launches
        counted that are not the wrapper's launches, a launch computing nothing of ours, a
        node on two launches. Returns self, so `compare(...)[0].check()` reads in one line."""
        problems = self.placed.problems()
        kernels: dict[str, int] = {}
        for g in self.ours.groups:
            for name in g.nodes:
                kernels[name] = kernels.get(name, 0) + 1
        for name, count in kernels.items():  # only a value our plan recomputes (its record
            if count > 1 and name not in self.ours.recomputed:  # says so) may be in several
                problems.append(f"our node {name} is in {count} of our kernels, and our plan "
                                "does not say it recomputes it")
        seen: dict[str, int] = {}
        for index, group in enumerate(self.groups):
            for name in group:
                if name in seen:
                    problems.append(f"our node {name} is on launches {seen[name]} and {index}")
                seen[name] = index
        if problems:
            raise AlignmentError(f"{self.name}: the comparison with Inductor is not aligned:\n  "
                                 + "\n  ".join(problems))
        return self

    @property
    def unexplained(self) -> list[Difference]:
        return [d for d in self.differences if not d.explained and not d.not_modelled]

    def table(self) -> str:
        o, i = self.ours.after, self.inductor.after
        rows = [("", "mtia_lab", "Inductor"),
                ("kernels", str(o.kernels), str(i.kernels)),
                ("bytes moved", f"{o.bytes_moved:,}", f"{self.priced.bytes_moved:,}"),
                ("groups same", f"{self.identical}", f"of {self.inductor_kernels}")]
        return "\n".join(f"{a:<14}{b:>14}{c:>14}" for a, b, c in rows)

    def __str__(self) -> str:
        lines = [f"{self.name}:", self.table()]
        lines += [f"  {d}" for d in self.differences]
        return "\n".join(lines)


class AlignmentError(AssertionError):
    """Our nodes and Inductor's launches do not line up (Comparison.check says where)."""


@dataclass(frozen=True)
class Priced:
    """Inductor's grouping of our nodes, priced by our cost model (apples to apples)."""

    kernels: int
    bytes_moved: int
    sram_bytes: int
    time_us: float


def _priced(ours: FusionPlan, groups: list[tuple[str, ...]]) -> Priced:
    """Nodes Inductor does not compute (none, normally) count as kernels of their own."""
    ir = ours.ir
    profile = RUNTIME.device().profile
    covered = {n for g in groups for n in g}
    parts = [g for g in groups if g] + [(n.name,) for n in ir.nodes if n.name not in covered]
    moved = sram = 0
    time_us = 0.0
    for names in parts:
        cost = kernel_cost(FusedSchedulerNode([ir.by_name[n] for n in names]), ir, profile)
        moved += cost.bytes_read + cost.bytes_written
        sram += cost.sram_bytes
        time_us += cost.duration_us(profile)
    return Priced(len(parts), moved, sram, time_us)


def compare_plans(ours: FusionPlan, theirs: FusionPlan, name: str | None = None) -> Comparison:
    """Line our plan up with Inductor's plan of the same graph (see the module docstring)."""
    placed = align(ours, theirs)
    groups = [launch.nodes for launch in placed.launches]
    return Comparison(name or ours.name, ours, theirs, groups,
                      differences(ours, theirs, placed), _priced(ours, groups), placed)


def compare_compiled(compiled: CompiledGraph | None = None,
                     inductor_config: dict | None = None) -> Comparison:
    """Compare the plan of a graph the mtia_lab backend compiled (default: the newest) with
    Inductor's device plan of the same graph."""
    compiled = compiled or COMPILED[-1]
    return compare_plans(compiled.plan, device_plan(compiled.gm, inductor_config),
                         compiled.name)


def compare(fn, *args, inductor_config: dict | None = None) -> list[Comparison]:
    """Compile `fn(*args)` with the mtia_lab backend and compare each graph it compiled."""
    start = len(COMPILED)
    plans_for(fn, *args)
    return [compare_compiled(c, inductor_config) for c in COMPILED[start:]]
