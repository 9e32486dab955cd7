"""Inductor's own fusion decisions, collected while its scheduler runs for mtia_sim.

Nothing here decides anything: Inductor's `Scheduler` fuses as it always does, and thin
wrappers around its methods write down what it did (installed once by `install()`, recording
only schedulers of graphs on mtia_sim):

    fuse_nodes / fuse_nodes_once   the nodes before fusion, and which round is running
    can_fuse                       every candidate pair it asks about, with the reason of each
                                   refusal: the text Inductor gives its `WhyNoFuse` (caught as it
                                   is raised), plus the guardrail's numbers, read with
                                   Inductor's own functions (shared-data score, unique I/O count)
    will_fusion_create_cycle       legal pairs refused because fusing them would make a cycle
    speedup_by_fusion              pairs refused as not profitable
    fuse_two_nodes                 the pairs it fused
    ComboKernel._update_partition  combo kernels split by combo_kernel_max_num_args
    horizontal_partition           the launches each combo kernel became
    codegen                        the final kernels; define_kernel (kernels.py) their names

A `Collector` per scheduler holds these facts; plan.py turns them into the project's
`FusionPlan` once the graph is generated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..records.guardrails import inductor_values
from . import _compat

_STACK: list[Collector] = []  # the collector of the scheduler running now (innermost last)
COLLECTED: list[Collector] = []  # every finished collector of this process, newest last
LISTENERS: list = []  # fn(collector) when a graph's plan is complete (plan.py)


@dataclass
class Asked:
    """One `can_fuse` (or cycle / profitability) verdict on a pair of scheduler nodes."""

    node1: object
    node2: object
    fused: bool
    why: str  # Inductor's WhyNoFuse reason template ("exceeds max fusion"), "" when fused
    text: str  # its full text, with Inductor's arguments
    numbers: str  # the guardrail's numbers, when the reason is a guardrail
    score: int  # Inductor's shared-data score of the pair (bytes), when it computed one
    round: int


@dataclass
class Collector:
    scheduler: object
    name: str
    round: int = 0
    before: list = field(default_factory=list)  # scheduler nodes before fusion
    asked: list[Asked] = field(default_factory=list)
    combo_splits: list[tuple] = field(default_factory=list)  # (partition nodes, node, count)
    partitions: list[list] = field(default_factory=list)  # each combo launch's sub-kernels
    kernels: list[tuple[str, list, str]] = field(default_factory=list)  # (name, snodes, src)
    final: list = field(default_factory=list)  # scheduler nodes after fusion (codegen order)
    settings: dict = field(default_factory=dict)
    plan: object = None  # the FusionPlan, once built (plan.py)


@dataclass
class _Frame:
    why: list = field(default_factory=list)  # (template, args) of each WhyNoFuse raised
    score: int | None = None


_FRAMES: list[_Frame] = []


def current() -> Collector | None:
    return _STACK[-1] if _STACK else None


def rule_of(why: str) -> str:
    """A short rule name for Inductor's reason text: the guardrail's config name when it is one."""
    named = {
        "exceeds max fusion": "max_fusion_size",
        "fusion_prevent_too_many_reads_and_writes": "max_fusion_unique_io_buffers",
        "score_fusion_memory_threshold": "score_fusion_memory_threshold",
        "no shared data": "no_shared_data",
        "will create cycle": "would_create_cycle",
        "not profitable": "speedup_by_fusion",
        "device mismatch (%s vs %s)": "device_mismatch",
    }
    if why in named:
        return named[why]
    return re.sub(r"[^a-z0-9]+", "_", why.lower()).strip("_")[:48] or "can_fuse"


def _numbers(scheduler, node1, node2, why: str, score: int | None) -> str:
    config = _compat.inductor_config()
    if why == "exceeds max fusion":
        n1, n2 = len(node1.get_nodes()), len(node2.get_nodes())
        return f"{n1} + {n2} = {n1 + n2} nodes > max_fusion_size={config.max_fusion_size}"
    if why == "fusion_prevent_too_many_reads_and_writes":
        limit = config.max_fusion_unique_io_buffers
        count = _unique_io(scheduler, node1, node2, limit)
        return f"{count} unique I/O buffers > max_fusion_unique_io_buffers={limit}"
    if why == "score_fusion_memory_threshold":
        return (f"shared data score {score} < score_fusion_memory_threshold="
                f"{config.score_fusion_memory_threshold}")
    if why == "no shared data":
        return "shared data score 0"
    return ""


def _unique_io(scheduler, node1, node2, limit: int) -> int:
    """The pair's unique I/O buffer count, from Inductor's own test (count > threshold): the
    smallest threshold it passes."""
    count = limit
    while count < limit + 1024 and scheduler.fusion_prevent_too_many_reads_and_writes(
            node1, node2, count):
        count += 1
    return count


def _wrap(owner, name: str, make):
    original = getattr(owner, name)
    if getattr(original, "_mtia_lab", False):
        return
    wrapper = make(original)
    wrapper._mtia_lab = True
    wrapper.__wrapped__ = original
    setattr(owner, name, wrapper)


def install() -> None:
    """Wrap the scheduler methods listed in the module docstring (idempotent)."""
    sched = _compat.scheduler_module()
    Scheduler, WhyNoFuse = sched.Scheduler, sched.WhyNoFuse

    def make_init(original):
        def _init(self, nodes):
            graph = _compat.current_graph()
            if _compat.DEVICE not in getattr(graph, "device_types", ()):
                return original(self, nodes)
            phase = "backward" if graph.is_backward else (
                "inference" if graph.is_inference else "forward")
            config = _compat.inductor_config()
            collector = Collector(self, f"{phase}_{len(COLLECTED) + 1}",
                                  settings=inductor_values(config))
            self._mtia_lab_collector = collector
            _STACK.append(collector)
            try:
                return original(self, nodes)
            finally:
                _STACK.remove(collector)
        return _init

    def make_fuse_nodes(original):
        def fuse_nodes(self, nodes):
            c = getattr(self, "_mtia_lab_collector", None)
            if c is not None and not c.before:
                c.before = list(nodes)
            return original(self, nodes)
        return fuse_nodes

    def make_fuse_nodes_once(original):
        def fuse_nodes_once(self, nodes, is_reorder_round):
            c = getattr(self, "_mtia_lab_collector", None)
            if c is not None:
                c.round += 1
            return original(self, nodes, is_reorder_round)
        return fuse_nodes_once

    def make_can_fuse(original):
        def can_fuse(self, node1, node2, *args, **kwargs):
            c = getattr(self, "_mtia_lab_collector", None)
            if c is None:
                return original(self, node1, node2, *args, **kwargs)
            frame = _Frame()
            _FRAMES.append(frame)
            try:
                ok = original(self, node1, node2, *args, **kwargs)
            finally:
                _FRAMES.pop()
            if not ok:
                why, args_ = frame.why[-1] if frame.why else ("can_fuse returned False", ())
                text = f"cannot fuse {node1.get_name()} with {node2.get_name()}: " + (
                    why % args_ if args_ else why)
                c.asked.append(Asked(node1, node2, False, why, text, _numbers(
                    self, node1, node2, why, frame.score), frame.score or 0, c.round))
            return ok
        return can_fuse

    def make_score(original):
        def score(self, *args, **kwargs):
            value = original(self, *args, **kwargs)
            if _FRAMES:
                _FRAMES[-1].score = value
            return value
        return score

    def make_why_call(original):
        def __call__(self, reason, *args):
            if _FRAMES:
                _FRAMES[-1].why.append((reason, args))
            return original(self, reason, *args)
        return __call__

    def make_cycle(original):
        def will_fusion_create_cycle(self, node1, node2):
            cycle = original(self, node1, node2)
            c = getattr(self, "_mtia_lab_collector", None)
            if cycle and c is not None:
                c.asked.append(Asked(node1, node2, False, "will create cycle",
                                     f"cannot fuse {node1.get_name()} with {node2.get_name()}: "
                                     "fusing them would create a cycle in the graph", "", 0,
                                     c.round))
            return cycle
        return will_fusion_create_cycle

    def make_speedup(original):
        def speedup_by_fusion(self, node1, node2):
            result = original(self, node1, node2)
            c = getattr(self, "_mtia_lab_collector", None)
            if c is not None and result.callable_fn is None and not result.should_fuse:
                c.asked.append(Asked(node1, node2, False, "not profitable",
                                     f"cannot fuse {node1.get_name()} with {node2.get_name()}: "
                                     "speedup_by_fusion found it not profitable", "", 0, c.round))
            return result
        return speedup_by_fusion

    def make_fuse_two(original):
        def fuse_two_nodes(self, node1, node2, *args, **kwargs):
            c = getattr(self, "_mtia_lab_collector", None)
            if c is not None:
                c.asked.append(Asked(node1, node2, True, "", "", "", self.score_fusion_memory(
                    node1, node2), c.round))
            return original(self, node1, node2, *args, **kwargs)
        return fuse_two_nodes

    def make_codegen(original):
        def codegen(self):
            c = getattr(self, "_mtia_lab_collector", None)
            if c is None:
                return original(self)
            c.final = list(self.nodes)
            _STACK.append(c)
            try:
                result = original(self)
            finally:
                _STACK.remove(c)
            COLLECTED.append(c)
            for listener in LISTENERS:
                listener(c)
            return result
        return codegen

    _wrap(Scheduler, "_init", make_init)
    _wrap(Scheduler, "fuse_nodes", make_fuse_nodes)
    _wrap(Scheduler, "fuse_nodes_once", make_fuse_nodes_once)
    _wrap(Scheduler, "can_fuse", make_can_fuse)
    _wrap(Scheduler, "_score_fusion_memory_for_can_fuse", make_score)
    _wrap(WhyNoFuse, "__call__", make_why_call)
    _wrap(Scheduler, "will_fusion_create_cycle", make_cycle)
    _wrap(Scheduler, "speedup_by_fusion", make_speedup)
    _wrap(Scheduler, "fuse_two_nodes", make_fuse_two)
    _wrap(Scheduler, "codegen", make_codegen)
    _install_combo()


def _install_combo() -> None:
    combo = _compat.combo_kernel_class()

    def make_update(original):
        def _update_partition(state, node_rw_count, node_info):
            c = current()
            limit = _compat.inductor_config().combo_kernel_max_num_args
            if c is not None and state.cur_partition and \
                    state.cur_count + node_rw_count > limit:
                c.combo_splits.append((list(state.cur_partition), node_info,
                                       state.cur_count, node_rw_count, limit))
            return original(state, node_rw_count, node_info)
        return staticmethod(_update_partition)

    def make_partition(original):
        def horizontal_partition(*args, **kwargs):
            partitions = original(*args, **kwargs)
            c = current()
            if c is not None:
                c.partitions.extend(list(p) for p in partitions)
            return partitions
        return staticmethod(horizontal_partition)

    for name, make in (("_update_partition", make_update),
                       ("horizontal_partition", make_partition)):
        original = combo.__dict__[name].__func__
        if getattr(original, "_mtia_lab", False):
            continue
        wrapped = make(original)
        wrapped.__func__._mtia_lab = True
        setattr(combo, name, wrapped)
