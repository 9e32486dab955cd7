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

from ..backend.runtime import RUNTIME
from . import config, pricing
from .decisions import FusionDecision, FusionPlan, KernelGroup, PlanTotals
from .ir import FusedSchedulerNode, GraphIR, Kind
from .rules import Pair, Verdict, can_fuse

MAX_ROUNDS = 10


def score_fusion_memory(a: FusedSchedulerNode, b: FusedSchedulerNode, ir: GraphIR) -> int:
    """Bytes of the buffers both kernels touch: traffic a fused kernel moves only once."""
    return ir.nbytes(_touched(a) & _touched(b))


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
            tuple(n.name for n in group.nodes),
            tuple(labels[n.name] for n in group.nodes),
            tuple(dict.fromkeys(s for n in group.nodes for s in n.source)),
        )
    return described


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

    def __init__(self, ir: GraphIR, name: str = "graph", profile=None) -> None:
        self.ir = ir
        self.name = name
        self.profile = profile or RUNTIME.device().profile
        self.group_of: dict[str, FusedSchedulerNode] = {}
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
        # Ancestors and descendants of every node as bitsets (bit i = node with index i): a
        # quick exact answer when a path between two kernels exists node by node.
        self.ancestors: dict[str, int] = {}
        for node in ir.nodes:
            bits = 0
            for p in self.producers[node.name]:
                bits |= self.ancestors[p] | (1 << ir.by_name[p].index)
            self.ancestors[node.name] = bits
        self.descendants: dict[str, int] = {}
        for node in reversed(ir.nodes):
            bits = 0
            for c in self.consumers[node.name]:
                bits |= self.descendants[c] | (1 << ir.by_name[c].index)
            self.descendants[node.name] = bits
        self._labels = {n.name: f"{n.name}: {n.target}" for n in ir.nodes}
        self.decisions: list[FusionDecision] = []
        self._seen: set[tuple[frozenset, frozenset]] = set()

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
                        pairs[key] = (-score, b.index - a.index, a, b)
        ranked = sorted(pairs.values(), key=lambda p: (p[0], p[1], p[2].index))
        return ranked

    # -- cycles ----------------------------------------------------------------------------

    def _reaches(self, src: FusedSchedulerNode, dst: FusedSchedulerNode) -> bool:
        """Is there a path src -> (other kernels) -> dst? Then fusing them makes a cycle."""
        limit = dst.nodes[-1].index
        stack = [self.group_of[c] for n in src.nodes for c in self.consumers[n.name]]
        visited: set[int] = set()
        while stack:
            group = stack.pop()
            if group is src or group is dst or id(group) in visited or group.index > limit:
                continue
            visited.add(id(group))
            for node in group.nodes:
                for c in self.consumers[node.name]:
                    if c in dst.names:
                        return True
                    stack.append(self.group_of[c])
        return False

    def will_fusion_create_cycle(self, a: FusedSchedulerNode, b: FusedSchedulerNode) -> bool:
        """A path a -> x -> b (or back) through a node x outside both: fusing would make the
        fused kernel wait for x, which waits for it. Node-level paths are found with bitsets;
        paths that only exist through another fused kernel need the walk (_reaches)."""
        anc_a, desc_a, mask_a = self._bits(a)
        anc_b, desc_b, mask_b = self._bits(b)
        outside = ~(mask_a | mask_b)
        if (desc_a & anc_b & outside) or (desc_b & anc_a & outside):
            return True
        return self._reaches(a, b) or self._reaches(b, a)

    def _bits(self, group: FusedSchedulerNode) -> tuple[int, int, int]:
        """(ancestors, descendants, members) of a group as bitsets, computed once per group."""
        bits = group.cache.get("bits")
        if bits is None:
            anc = desc = mask = 0
            for n in group.nodes:
                anc |= self.ancestors[n.name]
                desc |= self.descendants[n.name]
                mask |= 1 << n.index
            bits = group.cache["bits"] = (anc, desc, mask)
        return bits

    # -- fusion ----------------------------------------------------------------------------

    def _record(self, a, b, verdict: Verdict, score: int, rnd: int) -> None:
        names_a, labels_a, source_a = _described(a, self._labels)
        names_b, labels_b, source_b = _described(b, self._labels)
        sources = source_a + tuple(s for s in source_b if s not in source_a)
        self.decisions.append(FusionDecision(
            names_a, names_b, verdict.fused, verdict.name, verdict.reason, score, rnd,
            labels_a + labels_b, sources,
        ))

    def fuse_nodes_once(self, rnd: int) -> bool:
        changed = False
        for _score, _, a, b in self.possible_fusions():
            a, b = self.group_of[a.nodes[0].name], self.group_of[b.nodes[0].name]
            if a is b:
                continue
            if b.index < a.index:
                a, b = b, a
            key = (a.names, b.names)
            if key in self._seen:  # asked before with the same two groups: same answer
                continue
            self._seen.add(key)
            score = score_fusion_memory(a, b, self.ir)
            verdict = can_fuse(Pair(a, b, self.ir, self.profile, score))
            if verdict.fused and self.will_fusion_create_cycle(a, b):
                verdict = Verdict(False, "would_create_cycle",
                                  "another kernel depends on one and feeds the other")
            self._record(a, b, verdict, score, rnd)
            if verdict.fused:
                fused = FusedSchedulerNode.fuse(a, b)
                bits_a, bits_b = self._bits(a), self._bits(b)
                fused.cache["bits"] = tuple(x | y for x, y in zip(bits_a, bits_b, strict=True))
                del self.live[id(a)], self.live[id(b)]
                self.live[id(fused)] = fused
                for node in fused.nodes:
                    self.group_of[node.name] = fused
                changed = True
        return changed

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
        """Pack runs of independent pointwise/reduction kernels into one launch each."""
        limit = config.combo_kernel_max_num_args
        combos: list[tuple[int, ...]] = []
        current: list[int] = []
        args: set[str] = set()

        def close() -> None:
            if len(current) > 1:
                combos.append(tuple(current))
            current.clear()
            args.clear()

        for i, group in enumerate(order):
            if group.kind in (Kind.TEMPLATE, Kind.EXTERN):
                close()
                continue
            group_args = group.reads | group.outputs(self.ir)
            if current:
                member = next((order[j] for j in current if self._reaches_or_feeds(order[j],
                                                                                   group)), None)
                count = len(args | group_args)
                if member is not None:
                    verdict = Verdict(False, "combo_kernels",
                                      f"combo_kernels: depends on {member.nodes[0].name}")
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
            args |= group_args
        close()
        return combos

    def _reaches_or_feeds(self, src: FusedSchedulerNode, dst: FusedSchedulerNode) -> bool:
        direct = any(c in dst.names for n in src.nodes for c in self.consumers[n.name])
        return direct or self._reaches(src, dst)

    def run(self) -> FusionPlan:
        with _gc_paused():
            for rnd in range(MAX_ROUNDS):
                if not self.fuse_nodes_once(rnd):
                    break
            order = self.ordered_groups()
            combos = self.combo_kernels(order) if config.combo_kernels else []
            return self._plan(order, combos)

    def _plan(self, order: list[FusedSchedulerNode], combos) -> FusionPlan:
        ir, profile = self.ir, self.profile
        groups = []
        for i, g in enumerate(order):
            cost = pricing.kernel_cost(g, ir)
            groups.append(KernelGroup(
                i, tuple(n.name for n in g.nodes), g.kind.value, tuple(sorted(g.reads)),
                tuple(sorted(g.outputs(ir))), cost, cost.duration_us(profile),
                tuple(f"{n.name}: {n.target}" for n in g.nodes),
                tuple(dict.fromkeys(s for n in g.nodes for s in n.source)),
            ))
        before_costs = pricing.unfused_cost(ir)
        before = PlanTotals(len(before_costs),
                            sum(c.bytes_read + c.bytes_written for c in before_costs),
                            sum(c.duration_us(profile) for c in before_costs))
        in_combo = {i for c in combos for i in c}
        time_us = sum(g.duration_us for g in groups if g.index not in in_combo)
        time_us += sum(pricing.combo_cost([groups[i].cost for i in c]).duration_us(profile)
                       for c in combos)
        after = PlanTotals(len(groups) - sum(len(c) - 1 for c in combos),
                           sum(g.bytes_moved for g in groups), time_us)
        return FusionPlan(self.name, groups, self.decisions, before, after, combos,
                          config.snapshot(), tuple(ir.views), ir)


def schedule(ir: GraphIR, name: str = "graph", profile=None) -> FusionPlan:
    """Fuse the graph's scheduler nodes into kernels under the current config."""
    return Scheduler(ir, name, profile).run()
