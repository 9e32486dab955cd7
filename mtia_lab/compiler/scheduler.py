"""The fusion scheduler: which scheduler nodes run together as one kernel, and why.

    schedule(ir)
      1. every scheduler node starts as its own kernel (a FusedSchedulerNode of one);
      2. fuse_nodes_once, up to 10 times until nothing changes:
           candidates = pairs of kernels that touch a common buffer (possible_fusions),
           sorted by the memory traffic fusing them would save (score_fusion_memory);
           for each pair, best first: can_fuse (rules, then guardrails) and no cycle -> fuse;
      3. optionally pack independent small kernels into combo launches (config.combo_kernels);
      4. order the kernels, price each with the roofline model, and return a FusionPlan with
         every decision taken on the way.

This is Inductor's algorithm (torch/_inductor/scheduler.py) with its names, reduced to what
a reader can hold in their head.
"""

from __future__ import annotations

import contextlib
import gc
import heapq

import torch

from .. import _compat
from ..backend.runtime.device_state import RUNTIME
from ..records.plan import FusionDecision, FusionPlan, KernelGroup, PlanTotals
from . import config, layout, loops, lowering, opcount, pricing, recompute, rules, scatter
from .ir import SCANS, SORTS, TRAINING, FusedSchedulerNode, GraphIR, Kind, node_kind
from .rules import NOT_MODELLED, Pair, Verdict, can_fuse

MAX_ROUNDS = 10


def score_fusion_memory(a: FusedSchedulerNode, b: FusedSchedulerNode, ir: GraphIR) -> int:
    """Bytes of the buffers both kernels touch at the same addresses: traffic a fused kernel
    moves only once. Two slices of one buffer, or a buffer and its broadcast, do not count
    (Inductor compares the two kernels' memory dependencies, index and all); nor do two
    whole reads in loop orders no reordering makes one (loops.py: a permuted read over
    other loops than the other kernel's)."""
    acc_a, acc_b = _accesses(a), _accesses(b)
    reorder = not (a.kind is Kind.REDUCTION and b.kind is Kind.REDUCTION)
    return sum(ir.buffers[buf].nbytes for buf in _touched(a) & _touched(b)
               if _same_index(buf, _deps(acc_a[buf], ir.buffers[buf].shape)
                              & _deps(acc_b[buf], ir.buffers[buf].shape), a, b, reorder)
               or reorder and _permuted_views(acc_a[buf], acc_b[buf]))


def _permuted_views(hows_a: set, hows_b: set) -> bool:
    """Does each kernel read one view of a buffer whose elements are the other's in another
    loop order (a split piece of a projection, copied as it is and copied transposed)?
    Inductor's loop reordering (`shared_data_after_reordering_loop`,
    `MemoryDep.decide_loop_order_to_match`) reorders one kernel's loops until their memory
    dependencies are equal: the same offset, the same (size, stride) loops, none broadcast
    and no two of one stride."""
    def loops_of(how):
        if not (isinstance(how, tuple) and len(how) == 3 and isinstance(how[2], int)):
            return None
        dims = tuple(sorted((n, st) for n, st in zip(how[0], how[1], strict=True) if n != 1))
        if any(st == 0 for _, st in dims) or len({st for _, st in dims}) != len(dims):
            return None
        return dims, how[2]

    found_a = {loops_of(h) for h in hows_a} - {None}
    return bool(found_a & ({loops_of(h) for h in hows_b} - {None}))


def _deps(hows: set, shape: tuple[int, ...]) -> set:
    """The accesses of a buffer as Inductor's normalized MemoryDeps compare them: a read
    that broadcasts the whole buffer over trailing dims only (a row's sum, keepdim, expanded
    over the row) is "full". Inductor's `_RecordLoadStoreInner.canonicalize` merges the
    loops (`_simplify_loops`) and drops the trailing loop variables the index does not use
    ("Reduction has last (reduced) dim in its sizes, but downstream users won't. Normalize
    this away"): the reader's dep is the writer's. A broadcast over a middle dim keeps its
    variable, and differs."""
    return {"full" if loops.trailing_broadcast(how, shape) else how for how in hows}


def _same_index(buf: str, common: set, a: FusedSchedulerNode, b: FusedSchedulerNode,
                reorder: bool) -> bool:
    """Do both touch `buf` at one index: the same view of it, or both whole in loop orders
    that match (`MemoryDep` equality, after Inductor's loop reordering)?"""
    if common - {"full"}:
        return True
    if not common:
        return False
    return loops.same_index(_loops(a).get(buf, {None}), _loops(b).get(buf, {None}), reorder)


def _loops(group: FusedSchedulerNode) -> dict[str, set]:
    """Buffer -> loop signatures of the group's whole accesses of it (None where unknown)."""
    found = group.cache.get("loops")
    if found is None:
        found = {}
        for node in group.nodes:
            for buf in node.writes:
                found.setdefault(buf, set()).update(node.loops.get(buf, {None}))
            for buf in node.reads:
                if buf in group.reads and "full" in node.access.get(buf, {"full"}):
                    found.setdefault(buf, set()).update(node.loops.get(buf, {None}))
        group.cache["loops"] = found
    return found


def _accesses(group: FusedSchedulerNode) -> dict[str, set]:
    """Buffer -> how the group reads or writes it ("full" or the views it reads)."""
    accesses = group.cache.get("accesses")
    if accesses is None:
        accesses = {b: {"full"} for b in group.writes}
        for node in group.nodes:
            for buf in node.reads:
                if buf in group.reads:
                    accesses.setdefault(buf, set()).update(
                        _indirect(how) for how in node.access.get(buf, {"full"}))
        group.cache["accesses"] = accesses
    return accesses


def _indirect(how):
    """A read through a gather's index tensor as its MemoryDep has it: the index is a
    symbol of the kernel's own (`tmp0`: extract_loop_body_with_args names a body's indirect
    variables in order), not the tensor it was loaded from, so two kernels loading one
    buffer at the rows of two index tensors of one shape read it at the same index."""
    if isinstance(how, tuple) and len(how) == 2 and how[0] == "through":
        return ("through", frozenset(_indirect(h) for h in how[1]))
    if isinstance(how, tuple) and len(how) == 2 and how[0] == "of":  # a clone's own view
        return ("of", _indirect(how[1]))
    if isinstance(how, tuple) and len(how) >= 4 and how[0] == "indexed" and \
            how[1] in rules.GATHERS:
        return (how[0], how[1], "tmp", *how[3:])
    return how


def fusion_priority(a: FusedSchedulerNode, b: FusedSchedulerNode, score: int,
                    inline: bool) -> tuple:
    """Inductor's score_fusion, best first (as a key for ascending sort): lowering's inlining
    first (it happens before scheduling, reader after reader in graph order: a value that
    reads nothing and has several readers goes to the first), then node pairs that are not
    template fusions (epilogues come after, prologues last), then pairs of the same type
    (both reductions or neither), then bytes saved, then closeness in graph order."""
    if b.kind is Kind.TEMPLATE:
        template_score = 0
    else:
        template_score = 1 + int(a.kind is not Kind.TEMPLATE and score > 0)
    node_type_score = int((a.kind is Kind.REDUCTION) == (b.kind is Kind.REDUCTION)
                          and score > 0)
    proximity = max(abs(a.min_order - b.max_order), abs(b.min_order - a.max_order))
    lowered = max(a.index, b.index) if inline else 0  # lowering goes in graph order
    return (not inline, lowered, -template_score, -node_type_score, -score, proximity,
            a.index)


def _touched(group: FusedSchedulerNode) -> set[str]:
    touched = group.cache.get("touched")
    if touched is None:
        touched = group.cache["touched"] = group.reads | group.writes
    return touched


def _described(group: FusedSchedulerNode, labels: dict[str, str]) -> tuple:
    """(node names, "name: aten op" labels, user source lines) of a group, computed once."""
    described = group.cache.get("described")
    if described is None:
        described = group.cache["described"] = (
            tuple(dict.fromkeys(recompute.origin(n.name) for n in group.nodes)),
            tuple(labels[n.name] for n in group.nodes),
            tuple(dict.fromkeys(s for n in group.nodes for s in n.source)),
        )
    return described


def _label(node, ir: GraphIR) -> str:
    """"name: aten op" of a node; a clone (recompute.py) is named as its original, and for
    which reader it is computed again."""
    if node.name in ir.home:
        return (f"{recompute.origin(node.name)}: {node.target} (recomputed for "
                f"{ir.home[node.name]})")
    return layout.describe(node)


def mark_unrolled(ir: GraphIR) -> None:
    """Inductor unrolls a reduction over fewer than unroll_reductions_threshold elements into
    pointwise code: marked before anything counts loads or decides what is stored. Only
    `Reduction.create` unrolls: a scan (`Scan.create`: a cumsum over 4 elements) or a sort
    (`Sort.create`) stays a reduction-shaped kernel over its rows, however short.
    Unrolled, it is a Pointwise over its outputs: its store has the loops of one (a reader
    of it through a permutation shares it only if those loops can be reordered to match,
    `_try_reorder_loops_for_candidates`), where a reduction's store matches any order."""
    threshold = config.unroll_reductions_threshold
    for node in ir.nodes:
        node.unrolled = node.kind is Kind.REDUCTION and node.rnumel < threshold and \
            node.op not in SCANS | SORTS
        if node.kind is Kind.REDUCTION:
            node.loops = dict(node.unrolled_loops) if node.unrolled else {}


def _realized_order(ir: GraphIR) -> None:
    """Number the nodes as Inductor's scheduler nodes are numbered (min_order/max_order, for
    the long-distance check and the proximity of score_fusion): a pointwise op with one user,
    inlined while lowering, is no scheduler node of its own: it takes the number of the node
    it is inlined into (a value inlined into the last op of a graph is as far from the first
    as that op is). An extern of several outputs is as many nodes more: Inductor's
    FallbackKernel and a MultiOutput per output read (`FallbackKernel.generate_output`)."""
    users = ir.node_users()
    order = 0
    inlined: dict[str, str] = {}  # node -> its one user
    for node in _locality_order(ir):
        node.order = order
        if (node.kind is Kind.POINTWISE and not node.scatter
                and not node.large_body and not node.stored
                and len(users.get(node.name, ())) == 1
                and not any(ir.buffers[b].is_output for b in node.writes)):
            inlined[node.name] = next(iter(users[node.name]))
        elif node.kind is Kind.EXTERN and len(node.fx_nodes) > 1:
            # a FallbackKernel of several outputs (a convolution backward): the call, then
            # one MultiOutput node per output the graph reads (its getitems)
            order += len(node.fx_nodes)
        else:
            order += 1
    for node in reversed(ir.nodes):  # a user before the values inlined into it
        if node.name in inlined:
            node.order = ir.by_name[inlined[node.name]].order


def _locality_order(ir: GraphIR) -> list:
    """The nodes in the order Inductor's scheduler numbers them: its post-grad pass
    `reorder_for_locality` (fx_passes/post_grad.py, on for an inference graph, as a train
    step compiled whole is) walks the graph backwards and moves each op whose users are all
    after it to just before the first of them. A gradient only returned (a bias's or a
    LayerNorm weight's sum) moves to the end, before the output, far from the add that reads
    its input: the long-distance check then keeps them apart."""
    if getattr(ir, "gm", None) is None or ir.gm.meta.get(TRAINING):
        return list(ir.nodes)  # a training compile's graph: is_inference=False, no reorder
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(ir.gm.graph, {}))  # graph_copy leaves the output out
    _compat.reorder_for_locality(graph)
    pos = {n.name: i for i, n in enumerate(graph.nodes)}
    at = [pos.get(recompute.origin(node.name)) for node in ir.nodes]
    # A node of ours the FX graph lacks -- a layout copy, made as Inductor lowers the
    # extern that reads it (layout.py) -- goes where the node it sits beside does: the
    # extern it is placed before, or else the producer it is placed after.
    following, after = None, [None] * len(at)
    for i in reversed(range(len(at))):
        after[i] = following
        if at[i] is not None:
            following = (at[i], ir.nodes[i].name)
    keyed, last = [], -1
    for i, node in enumerate(ir.nodes):
        if at[i] is not None:
            last = at[i]
        elif after[i] is not None and (node.layout_of or node.scatter_copy) and \
                after[i][1] == (node.layout_of or node.scatter_copy)[0]:
            keyed.append((after[i][0], i, node))
            continue
        keyed.append((last, i, node))
    return [node for _, _, node in sorted(keyed, key=lambda k: (k[0], k[1]))]


@contextlib.contextmanager
def _gc_paused():
    """The scheduler allocates many small objects and no reference cycles: Python's cycle
    collector would rescan them again and again (40% of the time on 10k-node graphs)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Scheduler:
    """The mutable state of one scheduling run; `run()` returns the frozen FusionPlan."""

    def __init__(self, ir: GraphIR, name: str = "graph", profile=None,
                 recomputed: tuple[str, ...] = ()) -> None:
        self.source_ir = ir  # the graph's IR, as the plan keeps it
        self.name = name
        self.profile = profile or RUNTIME.device().profile
        self.group_of: dict[str, FusedSchedulerNode] = {}
        mark_unrolled(ir)  # Inductor unrolls small reductions into pointwise code
        for node in ir.nodes:  # ...and splits those with few outputs and many terms in two
            node.splits = lowering.reduction_splits(node, self.profile.num_pes,
                                                    self.profile.major)
        # ...and stores values whose loop body is large, or reused ones that load much
        large, _, realized = opcount.realize_decisions(ir)
        # computed_once=False: a clone of each recomputed value per reader (recompute.py)
        self.recomputed = recomputed
        ir = self.ir = recompute.split(ir, recomputed) if recomputed else ir
        for node in ir.nodes:
            node.large_body = large.get(recompute.origin(node.name), 0)
            # pointwise code Inductor stores; an unrolled reduction is pointwise code too
            # (lowering.py make_reduction realizes only a Reduction, not the Pointwise that
            # Reduction.create unrolls: reused, should_realize_on_reuse decides)
            node.stored = node_kind(node) is Kind.POINTWISE and \
                recompute.origin(node.name) in realized
        _realized_order(ir)
        for node in ir.nodes:
            self.group_of[node.name] = FusedSchedulerNode([node])
        self.live: dict[int, FusedSchedulerNode] = {id(g): g for g in self.group_of.values()}
        self.consumers: dict[str, list[str]] = {n.name: [] for n in ir.nodes}
        self.producers: dict[str, list[str]] = {n.name: [] for n in ir.nodes}
        for node in ir.nodes:
            for buf in node.reads:
                producer = ir.buffers[buf].producer
                if producer is not None:
                    self.consumers[producer].append(node.name)
                    self.producers[node.name].append(producer)
        # A topological order of the kernels, kept valid as they fuse (see _place): a path
        # between two kernels can only pass through kernels placed between them.
        self.pos: dict[FusedSchedulerNode, int] = {g: g.index for g in self.live.values()}
        self._last_walk: tuple | None = None  # (src, dst, kernels between) of the last check
        self._labels = {n.name: _label(n, ir) for n in ir.nodes}
        self.decisions: list[FusionDecision] = []
        self._seen: set[tuple[frozenset, frozenset]] = set()
        self._reorderable: set[tuple[frozenset, frozenset]] = set()  # for the reorder round

    # -- candidates ------------------------------------------------------------------------

    def possible_fusions(self) -> list[tuple[int, int, FusedSchedulerNode, FusedSchedulerNode]]:
        """Pairs of kernels that touch one buffer, within a window of graph order, best first."""
        window = config.max_fusion_buffer_group_pairwise_attempts
        touching: dict[str, list[FusedSchedulerNode]] = {}
        for group in self.live.values():
            for buf in _touched(group):
                touching.setdefault(buf, []).append(group)
        pairs: dict[tuple[int, int], tuple] = {}
        for groups in touching.values():
            if len(groups) < 2:
                continue
            groups.sort(key=lambda g: g.index)
            for i, a in enumerate(groups):
                for b in groups[i + 1 : i + 1 + window]:
                    key = (id(a), id(b))
                    if key not in pairs:
                        score = score_fusion_memory(a, b, self.ir)
                        pair = Pair(a, b, self.ir, self.profile, score)
                        inline = bool(rules.inlined_while_lowering(pair)
                                      or rules.factory_into_consumer(pair))
                        pairs[key] = (fusion_priority(a, b, score, inline), a, b)
        ranked = sorted(pairs.values(), key=lambda p: p[0])
        return [(p[0], 0, a, b) for p, a, b in ((r, r[1], r[2]) for r in ranked)]

    # -- cycles ----------------------------------------------------------------------------

    def _edges(self, group: FusedSchedulerNode, way: str) -> set[str]:
        """Nodes outside `group` that consume from it (way="out") or feed it ("in")."""
        edges = group.cache.get(way)
        if edges is None:
            links = self.consumers if way == "out" else self.producers
            edges = {m for n in group.nodes for m in links[n.name]} - group.names
            group.cache[way] = edges
        return edges

    def _walk(self, start: FusedSchedulerNode, stop: FusedSchedulerNode, way: str):
        """Kernels reachable from `start` (way="out": downstream, "in": upstream) without
        crossing `stop`'s position; None if one of them is adjacent to `stop`, i.e. a path
        start -> x -> stop (or back) exists. Only kernels placed between the two are visited,
        so the cost depends on how far apart they are, not on the size of the graph."""
        pos, group_of = self.pos, self.group_of
        lo, hi = sorted((pos[start], pos[stop]))
        seen: set[FusedSchedulerNode] = set()
        stack = [group_of[m] for m in self._edges(start, way)]
        while stack:
            group = stack.pop()
            if group is stop or group in seen or not lo < pos[group] < hi:
                continue
            seen.add(group)
            for m in self._edges(group, way):
                nxt = group_of[m]
                if nxt is stop:
                    return None
                stack.append(nxt)
        return seen

    def will_fusion_create_cycle(self, a: FusedSchedulerNode, b: FusedSchedulerNode) -> bool:
        """A path a -> x -> b (or back) through a kernel x outside both: fusing would make the
        fused kernel wait for x, which waits for it. `pos` is a topological order, so only
        the earlier kernel can reach the later one, through kernels placed between them."""
        first, second = (a, b) if self.pos[a] < self.pos[b] else (b, a)
        between = self._walk(first, second, "out")
        self._last_walk = (first, second, between)
        return between is None

    def _reaches_or_feeds(self, src: FusedSchedulerNode, dst: FusedSchedulerNode) -> bool:
        """Does `dst` depend on `src`, directly or through other kernels?"""
        if self.pos[src] > self.pos[dst]:
            return False
        return not dst.names.isdisjoint(self._edges(src, "out")) or \
            self._walk(src, dst, "out") is None

    def _place(self, first: FusedSchedulerNode, second: FusedSchedulerNode,
               fused: FusedSchedulerNode) -> None:
        """Give `fused` a position and keep `pos` a topological order (Pearce & Kelly's
        reordering, for a contraction instead of a new edge). Between the two, only kernels
        downstream of `first` (D) or upstream of `second` (U) are constrained; no kernel is
        both, since no path first -> x -> second exists. Their positions and the two freed
        ones are pooled and handed out again: U first, then `fused`, then D, each in its old
        order. U members only move earlier and D members only later, so every edge to or
        from a kernel outside the pool still points forward."""
        last = self._last_walk
        down = last[2] if last and last[0] is first and last[1] is second else None
        if down is None:
            down = self._walk(first, second, "out")
        up = self._walk(second, first, "in")
        assert down is not None and up is not None, "fusing would create a cycle"
        for way in ("out", "in"):  # from the parts: cheaper than from every member
            edges = self._edges(first, way) | self._edges(second, way)
            fused.cache[way] = edges - fused.names
        pos = self.pos
        ups, downs = sorted(up, key=pos.get), sorted(down, key=pos.get)
        pool = sorted([pos.pop(first), pos.pop(second)] + [pos[g] for g in ups + downs])
        for group, slot in zip(ups, pool, strict=False):
            pos[group] = slot
        pos[fused] = pool[len(ups)]
        for group, slot in zip(downs, pool[len(ups) + 2:], strict=True):
            pos[group] = slot
        self._last_walk = None

    # -- fusion ----------------------------------------------------------------------------

    def _record(self, a, b, verdict: Verdict, score: int, rnd: int) -> None:
        names_a, labels_a, source_a = _described(a, self._labels)
        names_b, labels_b, source_b = _described(b, self._labels)
        sources = source_a + tuple(s for s in source_b if s not in source_a)
        self.decisions.append(FusionDecision(
            names_a, names_b, verdict.fused, verdict.name, verdict.reason, score, rnd,
            labels_a + labels_b, sources, verdict.ours,
        ))

    def fuse_nodes_once(self, rnd: int, reorder: bool = False) -> bool:
        """One round over the candidates, best first. `reorder`: Inductor's last round, in
        which loops may be reordered to fit (config.loop_ordering_after_fusion)."""
        changed = False
        for _score, _, a, b in self.possible_fusions():
            a, b = self.group_of[a.nodes[0].name], self.group_of[b.nodes[0].name]
            if a is b:
                continue
            if b.index < a.index:
                a, b = b, a
            key = (a.names, b.names)
            if key in self._seen and not (reorder and key in self._reorderable):
                continue  # asked before with the same two groups: same answer
            self._seen.add(key)
            self._reorderable.discard(key)
            score = score_fusion_memory(a, b, self.ir)
            verdict = can_fuse(Pair(a, b, self.ir, self.profile, score, reorder))
            if not verdict.fused and (verdict.name == "conv_input_layout"
                                      or "outer dims" in verdict.reason):
                self._reorderable.add(key)  # the reorder round may answer otherwise
            if verdict.fused and self.will_fusion_create_cycle(a, b):
                verdict = Verdict(False, "would_create_cycle",
                                  "another kernel depends on one and feeds the other")
            self._record(a, b, verdict, score, rnd)
            if verdict.fused:
                self.fuse(a, b, verdict.inline)
                changed = True
        return changed

    def fuse(self, a: FusedSchedulerNode, b: FusedSchedulerNode,
             inline: bool = False) -> FusedSchedulerNode:
        """Replace kernels a and b by one (the caller checked will_fusion_create_cycle).
        `inline`: the producer is inlined into its consumer (counts as no node of its own)."""
        if inline:
            producer, consumer = (a, b) if b.reads & a.writes else (b, a)
            fused = FusedSchedulerNode.fuse(producer, consumer, inline=True)
        else:
            fused = FusedSchedulerNode.fuse(a, b)
        if self.pos[b] < self.pos[a]:
            a, b = b, a
        self._place(a, b, fused)
        del self.live[id(a)], self.live[id(b)]
        self.live[id(fused)] = fused
        for node in fused.nodes:
            self.group_of[node.name] = fused
        return fused

    def ordered_groups(self) -> list[FusedSchedulerNode]:
        """Kernels in an order that respects every dependency (earliest node first)."""
        deps: dict[int, set[int]] = {k: set() for k in self.live}
        users: dict[int, set[int]] = {k: set() for k in self.live}
        for key, group in self.live.items():
            for node in group.nodes:
                for p in self.producers[node.name]:
                    pk = id(self.group_of[p])
                    if pk != key:
                        deps[key].add(pk)
                        users[pk].add(key)
        ready = [(g.index, k) for k, g in self.live.items() if not deps[k]]
        heapq.heapify(ready)
        order = []
        while ready:
            _, key = heapq.heappop(ready)
            order.append(self.live[key])
            for user in users[key]:
                deps[user].discard(key)
                if not deps[user]:
                    heapq.heappush(ready, (self.live[user].index, user))
        assert len(order) == len(self.live), "the fused graph has a cycle (scheduler bug)"
        return order

    def combo_kernels(self, order: list[FusedSchedulerNode]) -> list[tuple[int, ...]]:
        """Pack runs of independent pointwise/reduction kernels into one launch each.

        Arguments are counted as Inductor's ComboKernel does: each sub-kernel passes its own
        reads and writes, so the count is a sum over the members, not a union."""
        limit = config.combo_kernel_max_num_args
        max_nodes = config.combo_kernel_max_num_nodes
        combos: list[tuple[int, ...]] = []
        current: list[int] = []
        args = [0]

        def close() -> None:
            if len(current) > 1:
                combos.append(tuple(current))
            current.clear()
            args[0] = 0

        for i, group in enumerate(order):
            if group.kind in (Kind.TEMPLATE, Kind.EXTERN):
                close()
                continue
            group_args = len(group.reads) + len(group.outputs(self.ir))
            if current:
                member = next((order[j] for j in current if self._reaches_or_feeds(order[j],
                                                                                   group)), None)
                count = args[0] + group_args
                if member is not None:
                    verdict = Verdict(False, "combo_kernels",
                                      f"combo_kernels: depends on {member.nodes[0].name}")
                elif len(current) + 1 > max_nodes:
                    verdict = Verdict(False, "combo_kernel_max_num_nodes",
                                      f"combo_kernel_max_num_nodes: {len(current) + 1} kernels "
                                      f"> {max_nodes}")
                elif count > limit:
                    verdict = Verdict(False, "combo_kernel_max_num_args",
                                      f"combo_kernel_max_num_args: {count} args > {limit}")
                else:
                    verdict = Verdict(True, "combo_kernels",
                                      f"independent kernels packed in one launch ({count} args)")
                first = FusedSchedulerNode([n for j in current for n in order[j].nodes])
                self._record(first, group, verdict, 0, -1)
                if not verdict.fused:
                    close()
            current.append(i)
            args[0] += group_args
        close()
        return combos

    def stray_clones(self) -> set[str]:
        """Recomputed values one of whose clones did not join its reader's kernel (a rule
        refused the inlining): Inductor would have stored them after all."""
        return {recompute.origin(c) for c, reader in self.ir.home.items()
                if self.group_of[c] is not self.group_of[reader]}

    def _record_recomputed(self) -> None:
        """One decision per recomputed value, before the rounds (Inductor's lowering)."""
        src = self.source_ir
        for name in self.recomputed:
            node = src.by_name[name]
            readers = tuple(sorted(src.users[node.writes[0]], key=lambda n: src.by_name[n].index))
            self.decisions.append(FusionDecision(
                (name,), readers, True, "recomputed_in_each_reader",
                f"{name} has {len(readers)} readers and a cheap body (at most "
                f"{opcount.REALIZE_READS_ON_REUSE} loads, {opcount.REALIZE_OPCOUNT} ops): "
                "Inductor's lowering does not realize it (should_realize_on_reuse), each "
                "reader's kernel computes it again (computed_once=False)", 0, -1,
                (self._labels_of(name),) + tuple(self._labels_of(r) for r in readers),
                node.source))

    def _labels_of(self, name: str) -> str:
        return f"{name}: {self.source_ir.by_name[name].target}"

    def run(self) -> FusionPlan:
        with _gc_paused():
            self._record_recomputed()
            for rnd in range(MAX_ROUNDS):
                if not self.fuse_nodes_once(rnd):
                    break
            if config.loop_ordering_after_fusion:
                self.fuse_nodes_once(rnd + 1, reorder=True)
            order = self.ordered_groups()
            combos = self.combo_kernels(order) if config.combo_kernels else []
            return self._plan(order, combos)

    def _members(self, g: FusedSchedulerNode) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(node names, "name: aten op" labels) of a kernel, each recomputed value named once
        by its own name (its clones are its recomputation in this kernel)."""
        src = self.source_ir.by_name
        names = sorted(dict.fromkeys(recompute.origin(n.name) for n in g.nodes),
                       key=lambda n: src[n].index)
        again = set(self.recomputed)
        return tuple(names), tuple(layout.describe(src[n]) + (
            " (recomputed here)" if n in again else "") for n in names)

    def _plan(self, order: list[FusedSchedulerNode], combos) -> FusionPlan:
        ir, profile = self.ir, self.profile
        groups = []
        for i, g in enumerate(order):
            cost = pricing.kernel_cost(g, ir, profile)  # a clone's work and reads counted
            names, labels = self._members(g)
            groups.append(KernelGroup(
                i, names, g.kind.value, tuple(sorted(g.reads)),
                tuple(sorted(g.outputs(ir))), cost, cost.duration_us(profile), labels,
                tuple(dict.fromkeys(s for n in g.nodes for s in n.source)),
            ))
        before_costs = pricing.unfused_cost(self.source_ir)
        before = PlanTotals(len(before_costs),
                            sum(c.bytes_read + c.bytes_written for c in before_costs),
                            sum(c.duration_us(profile) for c in before_costs))
        in_combo = {i for c in combos for i in c}
        time_us = sum(g.duration_us for g in groups if g.index not in in_combo)
        time_us += sum(pricing.combo_cost([groups[i].cost for i in c]).duration_us(profile)
                       for c in combos)
        after = PlanTotals(len(groups) - sum(len(c) - 1 for c in combos),
                           sum(g.bytes_moved for g in groups), time_us)
        notes = tuple(f"{check}: left out on purpose ({why})"
                      for check, why in NOT_MODELLED.items())
        return FusionPlan(self.name, groups, self.decisions, before, after, combos,
                          config.snapshot(), tuple(ir.views), self.source_ir, notes,
                          recomputed=tuple(self.recomputed),
                          layout_copies=tuple(n.name for n in self.source_ir.nodes
                                              if n.layout_of),
                          scatter_copies=tuple(n.name for n in self.source_ir.nodes
                                               if n.scatter_copy))


def schedule(ir: GraphIR, name: str = "graph", profile=None) -> FusionPlan:
    """Fuse the graph's scheduler nodes into kernels under the current config.

    computed_once=False: the values Inductor recomputes in each reader are given a clone per
    reader (recompute.py); a value whose clone a rule kept out of its reader's kernel is
    stored after all, and the graph is scheduled again without it.

    extern_in_triton=False: each convolution operand Inductor copies into channels-last, and
    each matmul operand it copies out of a padded buffer, gets a layout copy node of its own
    before the scheduling (layout.py).

    scatter_in_one_kernel=False: each scatter Inductor lowers as a copy of its input and
    then the indexed stores gets a copy node of its own before it (scatter.py)."""
    if not config.extern_in_triton:
        ir = layout.split(ir)
    if not config.scatter_in_one_kernel:
        ir = scatter.split(ir)
    with _gc_paused():  # building the Scheduler allocates one object or more per node too
        mark_unrolled(ir)
        recomputed = () if config.computed_once else tuple(recompute.candidates(ir))
        while True:
            scheduler = Scheduler(ir, name, profile, recomputed)
            plan = scheduler.run()
            stray = scheduler.stray_clones() if recomputed else set()
            if not stray:
                return plan
            recomputed = tuple(n for n in recomputed if n not in stray)
