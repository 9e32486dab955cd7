"""Which of Inductor's launches computes which of our nodes, read from Inductor's own records.

Inductor's plan (mtia_lab/inductor/plan.py) has one group per launch, in the wrapper's order,
and for each launch two records Inductor keeps itself:

    origins   the post-grad FX nodes its buffers were made from (nodes inlined into it, but
              also, through a copy, the nodes of the buffer it copies)
    values    the FX nodes whose value it writes (its buffers' `origin_node`)

Every post-grad node remembers the node of OUR graph it came from (`meta["from_node"]`). Each
of our nodes is then given the one launch that holds it, by these steps, first match wins:

    1. extern      an extern or template of ours (mm, convolution) goes to Inductor's extern
                   launch of it (never to the Triton kernel that copies its input, nor to the
                   one that adds a bias Inductor peeled off it)
    2. written     the launch that writes its value (the last of its post-grad nodes written)
    3. computed    the first launch that computes it inline (a node a launch only inherits
                   from the buffer it reads, through a copy, does not count); more than one:
                   Inductor recomputes it in each (`recomputed`); "computed, stored as V"
                   where a launch writes the value under the name of a view V of it (the
                   `expand` a bmm reads): computed there, and stored after all
    4. absorbed    a node no launch computes (a copy into a mutated input, a clone Inductor
                   removed, a constant folded away, a pattern that named only its user, a
                   cat whose producers write straight into its buffer, a cat of one
                   non-empty input and the empty ones it drops, `_cat_of_one`): the launch of
                   its neighbours in the same kernel of ours, else the launch all its users
                   went to, else the last launch of its producers (the one that completes it)

Our nodes are found among Inductor's post-grad nodes by the names `from_node` keeps, and,
where no name leads to them, by op and order (`_post_grad_nodes`).

A launch may own none of our nodes (a layout copy of a convolution's input, a bias add split
out of it): it is kept, with the nodes it computes part of (`Launch.part_of`), so that the
launches counted are Inductor's launches. A launch that computes only nodes a pattern made
(none of its post-grad nodes comes from ours: `_safe_softmax`'s row check once Inductor's
attention pattern rewrote our softmax as SDPA) is part of the nodes of ours its first reader
holds (`_completed_by_reader`, `Attribution.pattern_only`). A launch that computes and writes
nothing of its own (all its origins inherited from the buffer it copies) and feeds an extern
call is that call's operand copy into the layout the call asks for: part of the extern's node
of ours its origins name (`_copied_for_extern`: a convolution backward's output gradient).
`Attribution.problems()` says what does not line up.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

import torch.fx

from .._compat import size_hint
from ..compiler.ir import Kind, classify
from ..records.plan import DEVICE_COPY_LAUNCH, FusionPlan


@dataclass
class Launch:
    """One of Inductor's launches, as our nodes."""

    index: int
    name: str  # the kernel name the wrapper calls (triton_poi_fused_add_0, extern_kernels.mm)
    kind: str  # pointwise / reduction / extern
    nodes: tuple[str, ...] = ()  # our nodes this launch holds (each in exactly one launch)
    part_of: tuple[str, ...] = ()  # our nodes it computes a part of but does not hold


@dataclass
class Attribution:
    launches: list[Launch]
    how: dict[str, str]  # our node -> the step that placed it (extern, written, ...)
    recomputed: set[str] = field(default_factory=set)  # our nodes computed in several launches
    unplaced: list[str] = field(default_factory=list)  # our nodes no step placed
    wrapper_launches: list[str] | None = None  # kernel names the wrapper calls, in order
    # launches computing only nodes a pattern made, none from ours (`_completed_by_reader`)
    pattern_only: set[int] = field(default_factory=set)
    # groups Inductor packs into one launch (a combo or foreach kernel: the copies of a
    # cat's pieces, `ForeachKernelSchedulerNode`), by launch index: the wrapper calls it once
    combos: list[tuple[int, ...]] = field(default_factory=list)
    # our nodes computed inline that a launch still stores under a view's name -> that view
    stored_as: dict[str, str] = field(default_factory=dict)

    def problems(self) -> list[str]:
        """What does not line up, in words; empty when the alignment is complete."""
        out = [f"our node {n} is in no Inductor launch" for n in self.unplaced]
        if self.wrapper_launches is not None:
            packed = {i for combo in self.combos for i in sorted(combo)[1:]}
            names = [launch.name for launch in self.launches if launch.index not in packed]
            if names != self.wrapper_launches:
                out.append(f"launches counted {len(names)} ({', '.join(names)}) != the "
                           f"wrapper's {len(self.wrapper_launches)} "
                           f"({', '.join(self.wrapper_launches)})")
        for launch in self.launches:
            if not launch.nodes and not launch.part_of:
                out.append(f"launch {launch.index} ({launch.name}) computes nothing of ours")
        return out


_OVERLOAD = re.compile(r"_default(?=(_\d+)?$)")


class OurNames(set):
    """Our nodes' names, and the names AOTAutograd's retrace of our graph gives them
    (`aliases`): FX names each node after its op and overload, numbered in graph order per
    name ("var_mean_correction_1" is the second var_mean.correction of our graph, whatever
    number our own name carries)."""

    aliases: dict[str, str]


def our_names(ir) -> OurNames:
    """The names of our nodes in `ir`, with their retrace names (see OurNames)."""
    names = OurNames(n.name for n in ir.nodes)
    names.aliases = {}
    counts: dict[str, int] = {}
    for node in ir.gm.graph.nodes:
        if node.op != "call_function" or not hasattr(node.target, "overloadpacket"):
            continue
        base = _fx_name(node.target.__name__)  # "var_mean.correction" -> "var_mean_correction"
        k = counts.get(base, 0)
        counts[base] = k + 1
        names.aliases[base if k == 0 else f"{base}_{k}"] = node.name
    return names


def _fx_name(op: str) -> str:
    """The name FX gives a node of op `op` (its snake case, non-identifier characters as _)."""
    return re.sub(r"[^0-9a-zA-Z_]+", "_", re.sub(r"(?<=[a-z])([A-Z])", r"_\1", op).lower())


def _ours(name: str, ours: set[str]) -> str | None:
    """`name` if it is a node of ours; else the same node as AOTAutograd's retrace names it
    ("var_mean_correction_1" for our second var_mean, `OurNames.aliases`), or, without
    those, as it names an op it reaches through its default overload
    ("native_group_norm_default_1" for our "native_group_norm_1")."""
    if name in ours:
        return name
    alias = getattr(ours, "aliases", {}).get(name)
    if alias in ours:
        return alias
    alias = _OVERLOAD.sub("", name)
    return alias if alias in ours else None


def roots(node: torch.fx.Node, ours: set[str]) -> set[str]:
    """The nodes of OUR graph a post-grad node was made from, following `meta["from_node"]`
    (several for a pattern that merged nodes: mm + add into addmm). On each path, the
    earliest-made name that is a node of ours."""
    found: set[str] = set()

    def walk(sources, best: str | None) -> None:
        if not sources:
            if best is not None:
                found.add(best)
            return
        for source in sources:
            walk(source.from_node, _ours(source.name, ours) or best)

    sources = node.meta.get("from_node") or []
    # A node a pattern made remembers no source: its name is ours only as it is, not through
    # an overload alias ("clone_default_1" of SDPA's math is not our "clone_1"). A node that
    # remembers its sources is ours through them alone: a retrace (a training step's) names
    # its nodes afresh, so its "clone_10" may be a copy of our view_38, not our clone_10.
    walk(sources, None if sources else (node.name if node.name in ours else None))
    return found


_TRITON = re.compile(r"^\s*(\w+)\.run\(")
_EXTERN = re.compile(r"^\s*(?:\w+ = )?(extern_kernels\.\w+|torch\.ops\.[\w.]+|aten\.[\w.]+)\(")
_HOST_KERNEL = re.compile(r"^\s*(cpp_\w+)\(")  # a C++ kernel Inductor runs on the host
# A copy between devices (`codegen_device_copy`: a host tensor the graph made, moved over)
_DEVICE_COPY = re.compile(r"^\s*\w+\.copy_\(\w+, (?:True|False)\)$")


def wrapper_launches(code: str) -> list[str]:
    """The kernels a generated wrapper's `call` launches, in order: Triton kernels' `.run(`,
    extern calls (extern_kernels.mm, torch.ops.aten.sort.stable, aten.scatter_.src), C++
    kernels for host tensors the graph creates (`cpp_fused_log_3(...)`) and copies between
    devices (`buf15.copy_(arg1_1, False)`, named `device_copy`)."""
    body = code[code.find("def call("):]
    body = body[:body.find("\nrunner = ")] if "\nrunner = " in body else body
    out = []
    for line in body.splitlines():
        found = _TRITON.match(line) or _EXTERN.match(line) or _HOST_KERNEL.match(line)
        if found:
            out.append(found.group(1))
        elif _DEVICE_COPY.match(line):
            out.append(DEVICE_COPY_LAUNCH)
    return out


def _source(node: torch.fx.Node) -> tuple[str, str]:
    """(name, target) of the node a post-grad node was made from in the graph Inductor
    traced, or its own when it remembers none (a node a pattern made: SDPA for attention)."""
    sources = node.meta.get("from_node") or []
    while sources and sources[0].from_node:
        sources = sources[0].from_node
    if sources:
        return sources[0].name, str(sources[0].target)
    return node.name, str(node.target)


def _post_grad_nodes(ir, gm: torch.fx.GraphModule) -> dict[str, list[str]]:
    """Our node -> the post-grad nodes made from it. By name (`roots`); then, for our nodes
    no name reached, by op in graph order: the two lists of ops left (ours, and the sources
    no name of ours reached) aligned as sequences, so that a retrace's own numbering
    ("native_layer_norm_default" for our "native_layer_norm_2") still finds its node, and a
    pattern's replacement nodes (attention rewritten as SDPA's math, which remember no
    source) find the ops of ours they stand for, in order, where there is one."""
    mine = our_names(ir)
    post: dict[str, list[str]] = {n.name: [] for n in ir.nodes}
    unrooted: dict[tuple[str, str], list[str]] = {}  # source -> its post-grad nodes
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        found = roots(node, mine)
        for root in found:
            post[root].append(node.name)
        if not found:
            unrooted.setdefault(_source(node), []).append(node.name)
    _match_by_inputs(ir, gm, post, unrooted, mine)
    left = [n for n in ir.nodes if not post[n.name] and not n.layout_of
            and not n.bias_of and not n.scatter_copy]
    sources = list(unrooted)
    matcher = difflib.SequenceMatcher(None, [n.target for n in left], [k[1] for k in sources],
                                      autojunk=False)
    by_order: list[str] = []
    for block in matcher.get_matching_blocks():
        for i in range(block.size):
            post[left[block.a + i].name] = list(unrooted[sources[block.b + i]])
            by_order.append(left[block.a + i].name)
    paired = {post[name][0] for name in by_order if post[name]}
    spare = [names[0] for source, names in unrooted.items() if names[0] not in paired]
    _pair_by_operands(ir, gm, post, by_order, spare)
    return post


def _pair_by_operands(ir, gm: torch.fx.GraphModule, post: dict[str, list[str]],
                      by_order: list[str], spare: list[str]) -> None:
    """Order pairs a pattern's replacement nodes with ours, and a pattern can reorder them:
    DAB-DETR's attention, rewritten by `fuse_attention`, makes a later layer's second bmm
    before an earlier layer's, so order gave our bmm another layer's (or none). Among the
    nodes order paired (with the replacement nodes and our nodes it left unpaired), those
    of one op are paired again where the operands say so: the one node whose inputs (through views)
    include values of our node's producers and of nothing else of ours (the pattern's own
    nodes, a softmax it re-made, belong to none). The others keep their order."""
    by_name = {n.name: n for n in gm.graph.nodes}
    owner = {p: ours for ours, made in post.items() for p in made}
    producers = {n.name: frozenset(ir.buffers[b].producer for b in n.reads
                                   if ir.buffers[b].producer is not None) for n in ir.nodes}
    target = {n.name: n.target for n in ir.nodes}
    for op in dict.fromkeys(target[name] for name in by_order):
        names = [name for name in by_order if target[name] == op and len(post[name]) == 1]
        unpaired = [n.name for n in ir.nodes if n.target == op and not post[n.name]
                    and not n.layout_of and not n.bias_of and not n.scatter_copy]
        made = [post[name][0] for name in names] + [
            m for m in spare if m in by_name and str(by_name[m].target) == op]
        operands = {m: _operand_owners(by_name[m], owner) for m in made if m in by_name}
        fits = {name: [m for m in made if operands.get(m) and operands[m] <= producers[name]]
                for name in names + unpaired}
        chosen = {name: f[0] for name, f in fits.items() if len(f) == 1}
        if len(set(chosen.values())) != len(chosen):
            continue  # two of ours fit one node: the operands cannot tell
        left = [m for m in made if m not in chosen.values()]
        kept = [name for name in names if name not in chosen and post[name][0] in left]
        # the others' node went to another: each takes the first one left over
        moved = [name for name in names if name not in chosen and name not in kept]
        over = [m for m in left if m not in {post[k][0] for k in kept}]
        if len(over) < len(moved):
            continue  # fewer nodes left than of ours to pair (D-FINE): keep the order's pairs
        for name in unpaired:
            if name in chosen:
                post[name] = [chosen[name]]
        for name in names:
            if name in chosen:
                post[name] = [chosen[name]]
        for name, m in zip(moved, over, strict=False):
            post[name] = [m]


def _operand_owners(node: torch.fx.Node, owner: dict[str, str]) -> frozenset:
    """Our nodes that own the values `node` reads, looked up through views."""
    found: set[str] = set()
    stack = list(node.all_input_nodes)
    while stack:
        arg = stack.pop()
        if arg.name in owner:
            found.add(owner[arg.name])
        elif arg.op == "call_function" and _is_view(arg):
            stack.extend(arg.all_input_nodes)
    return frozenset(found)


def _match_by_inputs(ir, gm: torch.fx.GraphModule, post: dict[str, list[str]],
                     unrooted: dict[tuple[str, str], list[str]], mine: set[str]) -> None:
    """Before matching by order: a source no name reached and one of our nodes left are the
    same op when they run the same aten op on the values of the same nodes of ours (a copy
    of SDPA's math reads the output of our addmm through views, as our copy does). Order
    alone would pair a copy Inductor removed (a clone its layout made a no-op) with the next
    copy of the pattern's. Matched pairs leave both lists."""
    by_name = {n.name: n for n in gm.graph.nodes}
    producers = {n.name: frozenset(ir.buffers[b].producer for b in n.reads
                                   if ir.buffers[b].producer is not None) for n in ir.nodes}
    wanted: dict[tuple[str, frozenset], list[str]] = {}
    for n in ir.nodes:
        if not post[n.name] and producers[n.name] and not n.layout_of and \
                not n.bias_of and not n.scatter_copy:
            wanted.setdefault((n.target, producers[n.name]), []).append(n.name)
    matched: dict[str, str] = {}  # post-grad node matched here -> our node
    grew = True
    while grew:  # a chain a pass re-made (slice_scatter_default_4 reads ..._default_3)
        grew = False
        for source, names in list(unrooted.items()):
            node = by_name.get(names[0])
            key = (source[1], _input_roots(node, mine, matched)) if node is not None \
                else None
            if key in wanted and wanted[key]:
                ours = wanted[key].pop(0)
                post[ours] = list(names)
                matched.update(dict.fromkeys(names, ours))
                del unrooted[source]
                grew = True


def _input_roots(node: torch.fx.Node, mine: set[str],
                 matched: dict[str, str] | None = None) -> frozenset:
    """Our nodes whose values a post-grad node reads, through views and through the nodes a
    pattern made (no source remembered: SDPA's math scales q and k by a `mul` between our
    addmm and the copy of ours the pattern re-made, so that copy reads addmm, not nothing),
    or through a node matched to one of ours already (`matched`)."""
    found: set[str] = set()
    stack = [a for a in node.all_input_nodes]
    seen: set[str] = set()
    matched = matched or {}
    while stack:
        arg = stack.pop()
        if arg.name in seen or arg.op != "call_function":
            continue
        seen.add(arg.name)
        if arg.name in matched:
            found.add(matched[arg.name])
            continue
        r = roots(arg, mine)
        if r:
            found |= r
        elif _is_view(arg) or (not arg.meta.get("from_node") and _rescales(arg)):
            stack.extend(arg.all_input_nodes)
    return frozenset(found)


def _rescales(node: torch.fx.Node) -> bool:
    """A node a pattern made that only rescales one value (SDPA's `mul` of q or k by the
    scale): looking through it still finds the value it stands for. Not a reduction nor an
    op of two values: looking through the softmax SDPA's math re-made, its last `div` reads
    our bmm, as our `div` that scaled the scores does, and took that `div`'s place (LXMERT:
    every softmax op after it was then paired, in order, with the next attention's)."""
    return len(node.all_input_nodes) == 1 and classify(node.target) is not Kind.REDUCTION


def _viewed_op(names: set[str], gm: torch.fx.GraphModule) -> set[str]:
    """The op a pattern's replacement output views, for an extern of ours whose post-grad
    nodes are views only. Inductor's attention pattern (`fuse_attention`) rewrites
    `bmm -> softmax -> bmm` as SDPA, whose math is a bmm remembering no node of ours, and
    the replacement's output -- a squeeze of that bmm -- remembers our second bmm: the view
    is in the origins of its READER's launch (an addmm that reads it in place), the bmm that
    computes it in none. Walking through the views finds the bmm, and its launch."""
    by_name = {n.name: n for n in gm.graph.nodes}
    nodes = [by_name[n] for n in names if n in by_name]
    if not nodes or not all(n.op == "call_function" and _is_view(n) for n in nodes):
        return set()
    found: set[str] = set()
    stack = [a for n in nodes for a in n.all_input_nodes]
    while stack:
        node = stack.pop()
        if node.op == "call_function" and _is_view(node):
            stack.extend(node.all_input_nodes)
        elif node.op == "call_function":
            found.add(node.name)
    return found


def _written_views(names: set[str], by_name: dict, written: set[str]) -> str:
    """The view of post-grad nodes `names` (through views only) among the values launches
    write, or "": a value Inductor computes inside the launch that writes it under a view's
    name (a bmm's operand stored as the `expand` the bmm reads) is stored after all."""
    stack = [by_name[n] for n in names if n in by_name]
    seen: set[str] = set()
    while stack:
        for user in stack.pop().users:
            if user.name not in seen and user.op == "call_function" and _is_view(user):
                if user.name in written:
                    return user.name
                seen.add(user.name)
                stack.append(user)
    return ""


def _is_view(node: torch.fx.Node) -> bool:
    return classify(node.target) is Kind.VIEW or str(node.target).startswith(
        ("aten.reshape", "aten.expand", "aten.view"))


def _computes(theirs: FusionPlan) -> list[set[str]]:
    """Per launch, the post-grad nodes it computes itself: its origins, less those of the
    buffers it reads (origins a copy inherits from what it copies), and the nodes between
    the values it reads and the values it writes (`_between`: a value it computes again, whose
    name an extern's inflated origins also carry). A copy between devices computes only the
    value it moves (its origins also name its readers)."""
    info = theirs.ir
    writer = {b: g.index for g in theirs.groups for b in g.outputs}
    by_name = {n.name: n for n in info.gm.graph.nodes} if info.gm is not None else {}
    out = []
    stored: set[str] = set()  # values the launches so far wrote
    filled: dict[str, set[str]] = {}  # buffer of a launch that only copies a scatter's
    # input -> what that launch computes (the input)
    mutations = getattr(info, "mutations", {})
    for g in theirs.groups:
        written = set(info.values.get(g.index, ()))
        if info.kernel_names.get(g.index) == DEVICE_COPY_LAUNCH:  # it moves a tensor, no more
            out.append(written)
            stored |= written
            continue
        inherited: set[str] = set()
        for buf in g.inputs:  # the buffer's own origins (its launch's, where not recorded)
            if buf in filled and g.kind != "extern" and \
                    any(buf in mutations.get(b, ()) for b in g.outputs):
                inherited |= filled[buf]  # the stores into the copy of the scatter's
                continue  # input compute the rest of the buffer's origins (index, values)
            if buf in writer and writer[buf] != g.index:
                inherited |= set(getattr(info, "buffer_origins", {}).get(
                    buf, info.origins.get(writer[buf], ())))
        origins = set(info.origins.get(g.index, ()))
        between = _between(by_name, written, origins, stored) if g.kind != "extern" else set()
        source = _filled_for_fallback(g, theirs, written, by_name)
        if source is not None:  # it writes the scatter's input only: nothing else is its own
            origins = _ancestors(by_name, source) & origins
            between = set()
            filled.update(dict.fromkeys(g.outputs, origins))
        out.append((origins - inherited) | between)
        stored |= written
    return out


FALLBACK_SCATTERS = ("aten.scatter_reduce", "aten.scatter.", "aten.scatter_add", "aten.index_put")


def _filled_for_fallback(g, theirs: FusionPlan, written: set[str], by_name: dict):
    """The input of a scatter that an extern launch later runs in place (Inductor's fallback
    for a `scatter_reduce` it does not lower: `aten.scatter_reduce_` on the buffer), when this
    Triton launch only fills that buffer beforehand (the `full` it starts from): the buffer's
    value and origins are the scatter's (index and source included, computed elsewhere), but
    this launch reads nothing and computes the fill alone. Likewise the copy of a scatter's
    input that a later Triton launch's indexed stores mutate (Inductor's lowering of the
    scatter: `clone(x)`, then an `ir.Scatter`, `MutationLayoutSHOULDREMOVE`): it computes
    the input alone, the stores compute the index and the values. None otherwise."""
    if g.kind == "extern" or len(written) != 1:
        return None
    node = by_name.get(next(iter(written)))
    if node is None or not str(node.target).startswith(FALLBACK_SCATTERS) or not node.args or \
            not isinstance(node.args[0], torch.fx.Node):
        return None
    later = [h for h in theirs.groups if h.index > g.index and h.kind == "extern"
             and set(g.outputs) & set(h.inputs)] if not g.inputs else []
    mutations = getattr(theirs.ir, "mutations", {})
    three = str(node.target).startswith("aten.scatter_reduce") and not (
        node.args[5] if len(node.args) > 5 else node.kwargs.get("include_self", True))
    stores = [h for h in theirs.groups if h.index > g.index and h.kind != "extern"
              and any(set(mutations.get(b, ())) & set(g.outputs) for b in h.outputs)
              ] if not three else []  # without include_self: a zero-out, then the stores
    return node.args[0].name if later or stores else None


def _ancestors(by_name: dict, name: str) -> set[str]:
    """The node and every node it is computed from."""
    found, stack = set(), [name]
    while stack:
        n = stack.pop()
        if n in found or n not in by_name:
            continue
        found.add(n)
        stack.extend(a.name for a in by_name[n].all_input_nodes)
    return found


def _between(by_name: dict, written: set[str], origins: set[str], stored: set[str]) -> set[str]:
    """The launch's origins on a path from values stored before it (`stored`, or graph inputs)
    to the values it writes: what its loop body computes. A value written through a view
    (the `expand` a bmm's operand is made from) is walked through to what it views: the
    view is no origin, the loop body behind it is."""
    found: set[str] = set()
    seen: set[str] = set()
    stack = [n for n in written if n in by_name]
    while stack:
        name = stack.pop()
        if name in seen or (name in stored and name not in written):
            continue
        seen.add(name)
        if name in origins:
            found.add(name)
        elif by_name[name].op != "call_function" or not _is_view(by_name[name]):
            continue
        stack.extend(a.name for a in by_name[name].all_input_nodes)
    return found


def attribute(ours: FusionPlan, theirs: FusionPlan, wrapper: str | None = None) -> Attribution:
    """Place each of our nodes on one of Inductor's launches (see the module docstring)."""
    info, ir = theirs.ir, ours.ir
    mine = [n.name for n in ir.nodes]
    kind = {n.name: n.kind.value for n in ir.nodes}
    order = {n.name: i for i, n in enumerate(info.gm.graph.nodes)}
    post = _post_grad_nodes(ir, info.gm)
    by_post_name = {n.name: n for n in info.gm.graph.nodes}
    stored_as: dict[str, str] = {}
    launches = theirs.groups
    computes = _computes(theirs)
    origins = [set(info.origins.get(g.index, ())) for g in launches]
    values = [set(info.values.get(g.index, ())) for g in launches]
    written_anywhere = set().union(*values)
    home: dict[str, int] = {}
    how: dict[str, str] = {}
    recomputed: set[str] = set()
    for name in mine:
        mine_post = set(post[name])
        if not mine_post:
            continue
        if kind[name] in ("extern", "template"):
            mine_post |= _viewed_op(mine_post, info.gm)
            extern = [g.index for g in launches if g.kind == "extern"
                      and mine_post & origins[g.index]]
            if extern:
                home[name] = next((k for k in extern if mine_post & values[k]), extern[0])
                how[name] = "extern"
                continue
        written = [(max(order[n] for n in mine_post & values[k]), k)
                   for k in range(len(launches)) if mine_post & values[k]]
        if written:
            home[name], how[name] = max(written)[1], "written"
            if any(mine_post & computes[k] and launches[k].kind != "extern"
                   for k in range(home[name])):
                recomputed.add(name)  # inlined into readers before a cat stored it
            continue
        computing = [k for k in range(len(launches)) if mine_post & computes[k]]
        if computing:
            view = _written_views(mine_post, by_post_name, written_anywhere)
            home[name], how[name] = computing[0], "computed"
            if view:
                stored_as[name] = view
                how[name] = f"computed, stored as {view}"
            if len([k for k in computing if launches[k].kind != "extern"]) > 1:
                recomputed.add(name)
    _place_layout_copies(ir, theirs, post, (origins, values), home, how)
    _place_peeled_biases(ir, theirs, post, (origins, values), home, how)
    _place_scatter_copies(ir, theirs, post, origins, home, how)
    last_written = {name: max(k for k in range(len(launches)) if set(post[name]) & values[k])
                    for name in mine if any(set(post[name]) & v for v in values)}
    _absorb(ours, mine, home, how, last_written)
    held: list[list[str]] = [[] for _ in launches]
    for name in mine:
        if name in home:
            held[home[name]].append(name)
    part_of = [_part_of(k, theirs, mine, post, held[k], computes[k] | values[k])
               for k in range(len(launches))]
    claimed = {p for names in post.values() for p in names}
    pattern_only = {k for k in range(len(launches)) if not held[k] and not part_of[k]
                    and computes[k] and not computes[k] & claimed}
    for k in sorted(pattern_only):
        part_of[k] = _completed_by_reader(k, theirs, held)
    for k in range(len(launches)):
        if not held[k] and not part_of[k] and not computes[k] | values[k]:
            part_of[k] = _copied_for_extern(k, theirs, post, held)
    out = [Launch(g.index, info.kernel_names.get(g.index, ""), g.kind, tuple(held[g.index]),
                  tuple(part_of[g.index])) for g in launches]
    return Attribution(out, how, recomputed, [n for n in mine if n not in home],
                       wrapper_launches(wrapper) if wrapper else None, pattern_only,
                       [tuple(c) for c in theirs.combos], stored_as)


def _completed_by_reader(k: int, theirs: FusionPlan, held: list[list[str]]) -> list[str]:
    """Step 5, for a launch that computes only nodes a pattern made (no post-grad node of it
    comes from ours: the row check `any(x != -inf)` of `_safe_softmax`, which SDPA's math
    decomposition adds once Inductor's joint-graph attention pattern rewrote our softmax):
    it computes a part of the nodes of ours held by the first launch that reads what it
    writes (there the pattern's `where` applies the check to our softmax's division)."""
    written = set(theirs.groups[k].outputs)
    for g in theirs.groups[k + 1:]:
        if written & set(g.inputs) and held[g.index]:
            return list(held[g.index])
    return []


def _copied_for_extern(k: int, theirs: FusionPlan, post: dict,
                       held: list[list[str]]) -> list[str]:
    """Step 6, for a launch that computes and writes nothing of its own (every origin it has,
    its buffer inherits from the buffer it reads): the copy of an extern call's operand into
    the layout the call asks for (`ExternKernel.require_stride_order`, torch/_inductor/ir.py),
    made while that op was lowered, so the buffer it copies may carry the op's name too. A
    convolution backward's output gradient, a permuted view of a Triton buffer whose layout
    the view froze (`convert_to_reinterpret_view`), realized under the op (so its origins name
    it) and then copied contiguous: the copy inherits all its origins. It is part of the
    nodes of ours that the first extern launch reading its output holds and that its origins
    name (Inductor names a layout copy after the node that asked for it)."""
    group = theirs.groups[k]
    origins = set(theirs.ir.origins.get(k, ()))
    for g in theirs.groups[k + 1:]:
        if g.kind == "extern" and set(group.outputs) & set(g.inputs):
            return [r for r in held[g.index] if set(post[r]) & origins]
    return []


def _place_layout_copies(ir, theirs: FusionPlan, post: dict,
                         records: tuple[list[set[str]], list[set[str]]],
                         home: dict[str, int], how: dict[str, str]) -> None:
    """Step 0 for a layout copy of ours (compiler/layout.py: no node of the graph, it has no
    post-grad node): a Triton launch before its convolution's extern call that writes a
    buffer the call reads and has the convolution among its origins (Inductor names the copy
    after the node that asked for it), or, for a copy of an extern's output, the launch that
    finishes that output: the add of a bias Inductor peeled off the convolution that made it
    (`convolution` in torch/_inductor/kernel/conv.py) is a pointwise buffer whose layout is
    still free, so `require_stride_order` makes that add write the channels-last input and
    no copy is launched; our call keeps the bias, our copy is that launch. Of those, the one
    reading the graph input it copies (several copies of one input, for several
    convolutions, may share a launch), else the launch of the kernel that writes the value it
    copies (the copy fused into its producer: a forward activation a convolution backward
    fixed the layout of, copied for each convolution), else one that finishes the copied
    value, else one that reads that value (the copy fused into a sibling reading it too),
    else the first one that holds nothing of ours yet, else the first one. A matmul's copy of a
    padded buffer, or of a view through a cat Inductor drops (layout.copied_view), may name
    only the values it copies: any launch feeding the call that holds nothing of ours is a
    candidate."""
    launches, (origins, values) = theirs.groups, records
    writer = {b: g.index for g in launches for b in g.outputs}
    held = set(home.values())
    used: set[tuple[str, int]] = set()  # (convolution, launch): one copy each, if it can
    kinds = {n.name: n.kind for n in ir.nodes}
    for node in ir.nodes:
        if not node.layout_of or node.layout_of[0] not in home:
            continue
        conv = node.layout_of[0]
        conv_post, extern = set(post[conv]), home[conv]
        fed = {writer[b] for b in launches[extern].inputs if b in writer}
        base = ir.base_of.get(node.layout_of[1])
        producer = ir.buffers[base].producer
        finishing = set(post.get(producer, ())) if producer in kinds and \
            kinds[producer] is Kind.EXTERN else set()
        padded = node.name.startswith(("layout_copy_mat1_", "layout_copy_mat2_"))
        found = [k for k in sorted(fed) if k < extern and launches[k].kind != "extern"
                 and (conv_post & origins[k] or finishing & values[k]
                      or padded and k not in held)]
        if not found:
            continue
        source = _their_input(ir.gm, theirs.ir.gm, conv, node.layout_of[1], post[conv]) \
            if producer is None else None
        made = set(post.get(producer, ())) if producer is not None else set()
        ranked = ([k for k in found if source in launches[k].inputs]
                  + [k for k in found if producer is not None and home.get(producer) == k]
                  + [k for k in found if k not in held and finishing & values[k]]
                  + [k for k in found if any(b in writer and made & values[writer[b]]
                                             for b in launches[k].inputs)]
                  + [k for k in found if k not in held and (conv, k) not in used]
                  + [k for k in found if (conv, k) not in used] + found)
        home[node.name], how[node.name] = ranked[0], "layout copy"
        used.add((conv, ranked[0]))


def _place_peeled_biases(ir, theirs: FusionPlan, post: dict,
                         records: tuple[list[set[str]], list[set[str]]],
                         home: dict[str, int], how: dict[str, str]) -> None:
    """Step 0 for the add of a bias Inductor peeled off a convolution (compiler/layout.py
    `peeled_biases`: no node of the graph, no post-grad node): the first Triton launch after
    the convolution's extern call that writes the convolution's value (Inductor's buffer of
    the add has the convolution as its origin node), else the first that computes it."""
    launches, (origins, values) = theirs.groups, records
    for node in ir.nodes:
        if not node.bias_of or node.bias_of[0] not in home:
            continue
        conv = node.bias_of[0]
        conv_post, extern = set(post[conv]), home[conv]
        later = [k for k in range(extern + 1, len(launches)) if launches[k].kind != "extern"]
        found = [k for k in later if conv_post & values[k]] + \
            [k for k in later if conv_post & origins[k]]
        if found:
            home[node.name], how[node.name] = found[0], "bias add"


def _place_scatter_copies(ir, theirs: FusionPlan, post: dict, origins: list[set[str]],
                          home: dict[str, int], how: dict[str, str]) -> None:
    """Step 0 for a scatter's copy of its input (compiler/scatter.py: no node of the graph):
    the launch that writes the scatter's buffer, where step 2 placed the scatter (Inductor's
    Pointwise copy of `self`, whose buffer's origin is the scatter); the scatter itself, its
    indexed stores, then goes to the first later launch that mutates that buffer
    (`MutationLayoutSHOULDREMOVE`: Inductor's records name the buffer it mutates) and has the
    scatter among its origins."""
    launches = theirs.groups
    mutations = getattr(theirs.ir, "mutations", {})
    for node in ir.nodes:
        if not node.scatter_copy or node.scatter_copy[0] not in home:
            continue
        scatter = node.scatter_copy[0]
        first = home[scatter]
        written = set(launches[first].outputs)
        stores = [k for k in range(first + 1, len(launches))
                  if set(post[scatter]) & origins[k]
                  and any(set(mutations.get(b, ())) & written for b in launches[k].outputs)]
        home[node.name], how[node.name] = first, "scatter copy"
        if stores:
            home[scatter], how[scatter] = stores[0], "scatter stores"


def _their_input(gm: torch.fx.GraphModule, their_gm, conv: str, arg: str,
                 conv_post: list[str]) -> str | None:
    """The name in Inductor's graph of the graph input `arg` a convolution of ours reads:
    the argument at the same position of that convolution's post-grad node (Dynamo, tracing
    our graph again, numbers the inputs in its own order: our `arg40_1` may be its
    `arg0_1`)."""
    ours = next((n for n in gm.graph.nodes if n.name == conv), None)
    if ours is None or their_gm is None:
        return None
    position = next((i for i, a in enumerate(ours.args)
                     if isinstance(a, torch.fx.Node) and a.name == arg), None)
    for node in their_gm.graph.nodes:
        if node.name in conv_post and node.target == ours.target and position is not None \
                and isinstance(node.args[position], torch.fx.Node):
            return node.args[position].name
    return None


def _part_of(k: int, theirs: FusionPlan, mine: list[str], post: dict, held: list[str],
             made: set[str]) -> list[str]:
    """Our nodes launch k computes a part of without holding them: those it computes or
    writes; for a launch that only finishes a buffer another launch wrote (a scatter's
    indexed stores after the copy of its input), the node whose value that buffer holds."""
    found = [r for r in mine if r not in held and set(post[r]) & made]
    if found or held:
        return found
    group = theirs.groups[k]
    writer = {b: g.index for g in theirs.groups for b in g.outputs}
    mutations = getattr(theirs.ir, "mutations", {})
    finished = {v for b in group.inputs if b in writer and writer[b] != k
                for v in _held_value(b, writer, theirs.ir.values, mutations)}
    finished |= {v for b in group.outputs for m in mutations.get(b, ())
                 for v in _held_value(m, writer, theirs.ir.values, mutations)}
    mutated = finished & set(theirs.ir.origins.get(k, ()))
    return [r for r in mine if set(post[r]) & mutated]


def _held_value(buf: str, writer: dict[str, int], values: dict, mutations: dict) -> set[str]:
    """The FX nodes whose value buffer `buf` holds: those its launch writes, or, for a buffer
    that writes another in place and holds no value of its own (a `scatter_reduce` without
    `include_self`: the zero-out of the indexed places, then the indexed adds, each a mutation
    of the copy of its input, Inductor's `MutationLayoutSHOULDREMOVE`), the value of the buffer
    it mutates, through a chain of them."""
    seen: set[str] = set()
    while buf not in seen:
        seen.add(buf)
        held = set(values.get(writer[buf], ())) if buf in writer else set()
        if held or not mutations.get(buf):
            return held
        buf = mutations[buf][0]
    return set()


_COPIES = ("aten.clone.", "aten.copy.", "aten.copy_.", "aten.alias.", "aten._to_copy.")


def _cat_of_one(ir, name: str) -> set[str] | None:
    """For a cat of ours that Inductor's decomposition leaves one input of (`cat` in
    torch/_inductor/decomposition.py drops each input that is 1-D and empty, or empty along
    the cat's dimension, as ATen's cat skips them, and makes what is left of one input its
    `clone`, which `remove_noop_ops` then removes: a DynamicCache's empty keys concatenated
    with a layer's first keys): the producers of ours of that input, whose value the cat is.
    None for any other node (a cat of a graph input has no producer: an empty set)."""
    fx = next((n for n in ir.gm.graph.nodes if n.name == name), None) \
        if ir.by_name[name].target == "aten.cat.default" else None
    if fx is None or not fx.args or not isinstance(fx.args[0], (list, tuple)):
        return None
    dim = fx.args[1] if len(fx.args) > 1 else fx.kwargs.get("dim", 0)
    kept = [a for a in fx.args[0] if not _dropped_by_cat(a, dim)]
    if len(kept) != 1 or len(kept) == len(fx.args[0]) or \
            not isinstance(kept[0], torch.fx.Node):
        return None
    base = ir.base_of.get(kept[0].name)
    producer = ir.buffers[base].producer if base in ir.buffers else None
    return {producer} if producer is not None else set()


def _dropped_by_cat(arg, dim: int) -> bool:
    """Does Inductor's `cat` decomposition drop this input (`non_empty_tensor` is False)?"""
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return False
    try:
        shape = [size_hint(d) for d in val.shape]
    except Exception:  # an unbacked size: Inductor keeps the input (guard_or_false)
        return False
    return (len(shape) == 1 and shape[0] == 0) or (-len(shape) <= dim < len(shape)
                                                    and shape[dim] == 0)


def _absorb_order(target: str) -> tuple[str, str]:
    """A copy Inductor removes (a clone that keeps the layout, the copy back into a mutated
    input) is its producer's value: its producers first. Any other node a pattern took
    into its user (mm + add into addmm): its users first."""
    return ("producers", "users") if target.startswith(_COPIES) else ("users", "producers")


def _absorb(ours: FusionPlan, mine: list[str], home: dict[str, int], how: dict[str, str],
            last_written: dict[str, int]):
    """Step 4: nodes no launch computes go where the neighbours our plan runs in the same
    kernel went (Inductor computes them nowhere: no difference to count), else where all
    their users went, else to the last launch of their producers (copies: producers first,
    `_absorb_order`). A producer's launch is the last one that writes its value: a copy of
    a convolution's output that Inductor's layout made a no-op holds the value the launch
    adding the bias writes, not the extern call's. Repeated until nothing moves, so chains
    of them resolve."""
    ir = ours.ir
    users = ir.node_users()
    kernel_of = {n: g.index for g in ours.groups for n in g.nodes}
    producers: dict[str, set[str]] = {n: set() for n in mine}
    for user_of, names in users.items():
        for u in names:
            producers.setdefault(u, set()).add(user_of)
    copies = {n: kept for n in mine if (kept := _cat_of_one(ir, n)) is not None}
    producers.update(copies)  # the empty inputs it drops are read by nothing of Inductor's
    changed, lenient = True, False
    while changed or not lenient:
        if not changed:  # stuck: a chain of values only a shape was taken from (the `self`
            lenient = True  # of copy(self, src)) goes with the kernel-mates that are placed
        changed = False
        for name in mine:
            if name in home:
                continue
            # Inductor computes it nowhere: it stays with what our plan runs it beside
            mates = [home.get(n) for n in (*users.get(name, ()), *producers.get(name, ()))
                     if kernel_of[n] == kernel_of[name]]
            if lenient:
                mates = [m for m in mates if m is not None]
            if mates and None not in mates:
                home[name], how[name] = max(mates), "absorbed with its kernel-mates"
                changed = True
                continue
            for step in (("producers", "users") if name in copies
                         else _absorb_order(ir.by_name[name].target)):
                near = users.get(name, ()) if step == "users" else producers.get(name, ())
                places = {home.get(n) if step == "users" or n not in home
                          else max(home[n], last_written.get(n, home[n])) for n in near}
                if not places or None in places or (step == "users" and len(places) > 1):
                    continue
                # a cat its producers write piece by piece: the last of them completes it
                home[name], how[name] = max(places), f"absorbed by its {step}"
                changed = True
                break
