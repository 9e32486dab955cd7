"""Fusion rules and guardrails: small named functions, each returning a Verdict.

A *rule* asks "can these two kernels share one loop nest?" (kinds and iteration spaces). A
*guardrail* asks "should they, given the limits?" (size, buffers, on-chip memory, benefit).
`can_fuse` asks the rules in order -- the first that applies decides -- then, if a rule said
yes, every guardrail; the first "no" wins. The Verdict's name and reason become the
FusionDecision that the plan keeps.

Iteration spaces, as in Inductor: a pointwise kernel loops over `numel` elements; a reduction
over `numel` outputs times `rnumel` reduced elements. Two kernels fuse when one loop nest can
serve both: equal spaces, or a pointwise over `numel * rnumel` (prologue/epilogue on the full
input) or over `numel` (epilogue on the reduced output) beside a reduction.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import config
from .ir import FusedSchedulerNode, GraphIR, Kind


@dataclass(frozen=True)
class Verdict:
    fused: bool
    name: str  # the rule or guardrail that decided
    reason: str


@dataclass
class Pair:
    """Two candidate kernels, `a` earlier in graph order, and facts about fusing them."""

    a: FusedSchedulerNode
    b: FusedSchedulerNode
    ir: GraphIR
    profile: object  # ChipProfile, for the on-chip budget
    score: int  # score_fusion_memory(a, b)

    @property
    def vertical(self) -> bool:
        """Does one read what the other writes (producer/consumer)?"""
        return bool(self.b.reads & self.a.writes) or bool(self.a.reads & self.b.writes)

    def producer_consumer(self) -> tuple[FusedSchedulerNode, FusedSchedulerNode]:
        return (self.a, self.b) if self.b.reads & self.a.writes else (self.b, self.a)


def _space(g: FusedSchedulerNode) -> str:
    return f"{g.numel}x{g.rnumel}" if g.rnumel > 1 else str(g.numel)


def _first_target(g: FusedSchedulerNode, kind: Kind) -> str:
    node = next(n for n in g.nodes if n.kind is kind)
    return f"{node.name} ({node.target})"


# ---- rules: structure ------------------------------------------------------------------------

def factory_into_consumer(p: Pair) -> Verdict | None:
    """A factory (full, zeros, scalar_tensor) reads no memory: its consumer can make the values
    itself -- even an ATen kernel, which then fills its own output (scatter_add into zeros)."""
    if not p.vertical:
        return None
    producer, consumer = p.producer_consumer()
    if producer.reads or any(n.kind is not Kind.POINTWISE for n in producer.nodes):
        return None
    if consumer.kind is Kind.TEMPLATE:
        return None  # the template reads its operands from memory (no prologue fusion)
    return Verdict(True, "factory_into_consumer",
                   f"{producer.nodes[0].name} reads nothing: {consumer.kind.value} kernel "
                   "creates its values in place")


def extern_never_fuses(p: Pair) -> Verdict | None:
    """An op that runs as its ATen kernel is a black box: nothing can join its loop."""
    for g in (p.a, p.b):
        if g.kind is Kind.EXTERN:
            what = _first_target(g, Kind.EXTERN)
            return Verdict(False, "extern_never_fuses",
                           f"{what} runs as its ATen kernel (extern); externs never fuse")
    return None


def template_epilogue(p: Pair) -> Verdict | None:
    """A matmul template takes a pointwise epilogue over its output tile, and nothing else."""
    ta, tb = p.a.kind is Kind.TEMPLATE, p.b.kind is Kind.TEMPLATE
    if not (ta or tb):
        return None
    name = "template_epilogue"
    if ta and tb:
        return Verdict(False, name, "two matmul templates cannot share one kernel")
    if not p.vertical:
        return Verdict(False, name, "a template fuses only with its own epilogue, not siblings")
    producer, consumer = p.producer_consumer()
    if consumer.kind is Kind.TEMPLATE:
        return Verdict(False, name, "prologue fusion into a matmul template is off "
                       "(Inductor's default): the template reads its inputs from memory")
    if consumer.kind is not Kind.POINTWISE:
        return Verdict(False, name, f"a {consumer.kind.value} cannot be a template epilogue")
    if consumer.numel != producer.numel:
        return Verdict(False, name, f"epilogue space {_space(consumer)} != template output "
                       f"{producer.numel}")
    return Verdict(True, name, f"pointwise epilogue over the {producer.numel}-element "
                   "matmul output")


def _fits_reduction(pw: FusedSchedulerNode, red: FusedSchedulerNode) -> str | None:
    if pw.numel == red.numel * red.rnumel:
        return f"full space {red.numel}x{red.rnumel}"
    if pw.numel == red.numel:
        return f"reduced space {red.numel}"
    return None


def reduction_fusion(p: Pair) -> Verdict | None:
    """Reductions fuse with reductions over the same space, and with pointwise prologues
    (producers) and epilogues (consumers) over the full or the reduced space."""
    ra, rb = p.a.kind is Kind.REDUCTION, p.b.kind is Kind.REDUCTION
    if not (ra or rb):
        return None
    if ra and rb:
        same = (p.a.numel, p.a.rnumel) == (p.b.numel, p.b.rnumel)
        name = "reduction_vertical" if p.vertical else "horizontal"
        return Verdict(same, name, f"reductions over {_space(p.a)} and {_space(p.b)}"
                       + (" share one loop" if same else " differ"))
    red, pw = (p.a, p.b) if ra else (p.b, p.a)
    fit = _fits_reduction(pw, red)
    if not p.vertical:
        name = "horizontal"
    else:
        name = "reduction_prologue" if p.producer_consumer()[0] is pw else "reduction_epilogue"
    if fit is None:
        return Verdict(False, name, f"pointwise space {pw.numel} fits neither {red.numel}x"
                       f"{red.rnumel} nor {red.numel}")
    return Verdict(True, name, f"pointwise over the reduction's {fit}")


def vertical_pointwise(p: Pair) -> Verdict | None:
    """Producer and consumer looping over the same elements become one loop."""
    if not p.vertical:
        return None
    same = p.a.numel == p.b.numel
    return Verdict(same, "vertical_pointwise", f"iteration spaces {p.a.numel} and {p.b.numel}"
                   + (" match" if same else " differ"))


def horizontal(p: Pair) -> Verdict | None:
    """Siblings that read the same buffer over the same space: read it once."""
    same = p.a.numel == p.b.numel
    return Verdict(same, "horizontal", f"siblings share {p.score:,} bytes of input; spaces "
                   f"{p.a.numel} and {p.b.numel}" + (" match" if same else " differ"))


RULES = [factory_into_consumer, extern_never_fuses, template_epilogue, reduction_fusion,
         vertical_pointwise, horizontal]


# ---- guardrails: limits ----------------------------------------------------------------------

def score_fusion_memory_threshold(p: Pair, fused: FusedSchedulerNode) -> Verdict | None:
    limit = config.score_fusion_memory_threshold
    if p.score < limit:
        return Verdict(False, "score_fusion_memory_threshold",
                       f"score_fusion_memory_threshold: saves {p.score} bytes < {limit}")
    return None


def max_fusion_size(p: Pair, fused: FusedSchedulerNode) -> Verdict | None:
    limit = config.max_fusion_size
    if len(fused) > limit:
        return Verdict(False, "max_fusion_size",
                       f"max_fusion_size: {len(fused)} nodes > {limit}")
    return None


def max_fusion_unique_io_buffers(p: Pair, fused: FusedSchedulerNode) -> Verdict | None:
    limit = config.max_fusion_unique_io_buffers
    if limit is None:
        return None
    count = len(fused.reads) + len(fused.outputs(p.ir))
    if count > limit:
        return Verdict(False, "max_fusion_unique_io_buffers",
                       f"max_fusion_unique_io_buffers: {count} buffers > {limit}")
    return None


def on_chip_memory_budget(p: Pair, fused: FusedSchedulerNode) -> Verdict | None:
    """Intermediates a fused kernel no longer writes to DRAM must stay on chip meanwhile."""
    budget = config.on_chip_budget_bytes(p.profile)
    kept = p.ir.nbytes(fused.writes - fused.outputs(p.ir))
    if kept > budget:
        return Verdict(False, "on_chip_memory_budget",
                       f"on_chip_memory_budget: {kept:,} bytes of intermediates > {budget:,}")
    return None


GUARDRAILS = [score_fusion_memory_threshold, max_fusion_size, max_fusion_unique_io_buffers,
              on_chip_memory_budget]


def can_fuse(p: Pair) -> Verdict:
    """The first rule that applies decides; a yes must then pass every guardrail."""
    verdict = next((v for rule in RULES if (v := rule(p)) is not None), None)
    if verdict is None:
        return Verdict(False, "no_rule", "no fusion rule applies")
    if not verdict.fused:
        return verdict
    fused = FusedSchedulerNode.fuse(p.a, p.b)
    for guardrail in GUARDRAILS:
        refusal = guardrail(p, fused)
        if refusal is not None:
            return refusal
    return verdict
