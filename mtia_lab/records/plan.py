"""The fusion plan records: one FusionDecision per candidate pair, one FusionPlan per graph.

These are plain frozen data, written by both compilers -- the teaching scheduler
(mtia_lab/compiler) and the observer of Inductor's scheduler (mtia_lab/inductor/plan.py) --
and read by codegen, the runner, the comparison (mtia_lab/compare), the views (graphviz, rich,
the guardrail playground) and the tests, which never re-run a scheduler to explain what it did.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from ..backend.runtime.cost import KernelCost

# The launch name of a copy between devices (a host tensor the graph made, moved to the
# device): Inductor's wrapper writes it as `buf15.copy_(arg1_1, False)`, with no kernel name.
DEVICE_COPY_LAUNCH = "device_copy"


@dataclass(frozen=True)
class FusionDecision:
    """Why two kernels were, or were not, fused.

    `rule` names the fusion rule or guardrail that decided (e.g. "vertical_pointwise",
    "max_fusion_size"); `reason` says it with the numbers ("max_fusion_size: 65 nodes > 64")."""

    first: tuple[str, ...]  # scheduler nodes of one side (graph order)
    second: tuple[str, ...]
    fused: bool
    rule: str
    reason: str
    score: int = 0  # bytes of memory traffic the fusion saves (score_fusion_memory)
    round: int = 0  # which fuse_nodes_once pass made it (combo kernels, recompute: -1)
    aten_nodes: tuple[str, ...] = ()  # aten ops on both sides, e.g. "mul_3: aten.mul.Tensor"
    source: tuple[str, ...] = ()  # user source lines they came from
    ours: bool = False  # decided by a rule where we depart from Inductor on purpose

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.first + self.second

    def __str__(self) -> str:
        verdict = "fused" if self.fused else "NOT fused"
        where = f"  <- {'; '.join(self.source)}" if self.source else ""
        reason = self.reason if self.reason.startswith(self.rule) else (
            f"{self.rule}: {self.reason}")
        return f"{verdict} [{'+'.join(self.first)}] with [{'+'.join(self.second)}]: {reason}{where}"


@dataclass(frozen=True)
class KernelGroup:
    """One kernel of a plan: the scheduler nodes it runs and what it costs."""

    index: int
    nodes: tuple[str, ...]
    kind: str  # pointwise / reduction / template / extern (its anchor's kind)
    inputs: tuple[str, ...]  # buffers it reads from memory
    outputs: tuple[str, ...]  # buffers it writes to memory
    cost: KernelCost
    duration_us: float
    aten_nodes: tuple[str, ...] = ()
    source: tuple[str, ...] = ()
    # What it runs over, as text, size symbols kept ("32*s0"): a Triton kernel's numel and
    # reduction numel (its xnumel, r0_numel), an extern kernel's output shape. Inductor's plans.
    sizes: tuple[str, ...] = ()

    @property
    def bytes_moved(self) -> int:
        return self.cost.bytes_read + self.cost.bytes_written


@dataclass(frozen=True)
class PlanTotals:
    kernels: int  # launches
    bytes_moved: int
    time_us: float


@dataclass
class FusionPlan:
    """Groups, decisions and totals of one scheduled graph, before and after fusion."""

    name: str
    groups: list[KernelGroup]
    decisions: list[FusionDecision]
    before: PlanTotals
    after: PlanTotals
    combos: list[tuple[int, ...]] = field(default_factory=list)  # groups packed in one launch
    settings: dict = field(default_factory=dict)
    views: tuple[str, ...] = ()  # FX nodes that are views: no kernel
    ir: object = field(default=None, repr=False, compare=False)
    notes: tuple[str, ...] = ()  # Inductor checks the scheduler leaves out on purpose
    # Dynamic shapes: each size symbol and what it stands for ("s0" -> "x.size(0), 3 when
    # traced"). Groups' sizes keep the symbols; bytes and times are at the sizes traced.
    symbols: dict[str, str] = field(default_factory=dict)
    # Values computed again in each kernel that reads them, as Inductor's lowering does
    # (computed_once=False): the only nodes that sit in several groups.
    recomputed: tuple[str, ...] = ()
    # Layout copies of convolution operands, as Inductor's layout_optimization makes them
    # (extern_in_triton=False, compiler/layout.py): nodes of the plan's IR, not of the graph.
    layout_copies: tuple[str, ...] = ()
    # Copies of a scatter's input, as Inductor's lowering makes them (scatter_in_one_kernel=
    # False, compiler/scatter.py): nodes of the plan's IR, not of the graph.
    scatter_copies: tuple[str, ...] = ()

    @property
    def kernel_count(self) -> int:
        return self.after.kernels

    @property
    def bytes_moved(self) -> int:
        return self.after.bytes_moved

    def group_of(self, node: str) -> KernelGroup:
        for group in self.groups:
            if node in group.nodes:
                return group
        raise KeyError(f"{node} is in no kernel of plan {self.name!r} (a view or unknown node)")

    def refusals(self) -> list[FusionDecision]:
        """Decisions that said no between nodes that ended in different kernels."""
        home = {n: g.index for g in self.groups for n in g.nodes}
        combo_of = {g: i for i, combo in enumerate(self.combos) for g in combo}
        out = []
        for d in self.decisions:
            a, b = home.get(d.first[0]), home.get(d.second[0])
            if d.fused or a == b or (a in combo_of and combo_of.get(a) == combo_of.get(b)):
                continue
            out.append(d)
        return out

    def to_dict(self) -> dict:
        """Plain data (JSON-ready) for renderers and widgets: everything but the IR."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "ir"}
        data = asdict(FusionPlan(**data))
        data.pop("ir")
        # Dataflow inside kernels, shapes, users' names (for views): each scheduler's graph
        # answers for itself (the teaching scheduler's GraphIR, Inductor's InductorGraph).
        detail = getattr(self.ir, "plan_detail", None)
        if detail is not None and (found := detail()) is not None:
            data["detail"] = found
        return data

    @property
    def sram_bytes(self) -> int:
        """Bytes the fused kernels keep on chip (SRAM bandwidth) instead of moving to DRAM."""
        return sum(g.cost.sram_bytes for g in self.groups)

    def summary(self) -> str:
        b, a = self.before, self.after
        on_chip = f" (+{self.sram_bytes:,} on chip)" if self.sram_bytes else ""
        return (f"{self.name}: {b.kernels} -> {a.kernels} kernels, "
                f"{b.bytes_moved:,} -> {a.bytes_moved:,} bytes moved{on_chip}, "
                f"{b.time_us:.2f} -> {a.time_us:.2f} us simulated")

    def __str__(self) -> str:
        lines = [self.summary()]
        if self.symbols:
            lines.append(f"  {symbols_text(self.symbols)}")
        for g in self.groups:
            over = f" over {' x '.join(g.sizes)}" if self.symbols and g.sizes else ""
            lines.append(f"  kernel {g.index} ({g.kind}{over}, {g.bytes_moved:,} B, "
                         f"{g.duration_us:.2f} us): {', '.join(g.nodes)}")
        return "\n".join(lines)


def symbols_text(symbols: dict[str, str]) -> str:
    """"symbolic sizes: s0 = x.size(0), 3 when traced -- bytes and times at the sizes traced"."""
    named = "; ".join(f"{name} = {meaning}" for name, meaning in symbols.items())
    return f"symbolic sizes: {named} -- bytes and times at the sizes traced"


def flipped(before: FusionPlan, after: FusionPlan) -> list[tuple[FusionDecision, FusionDecision]]:
    """Pairs of kernels asked in both plans whose answer changed (for the guardrail playground).

    Pairs are matched by their exact node groups (the last answer of each); pairs only one
    plan asked are left out."""
    asked = {(d.first, d.second): d for d in before.decisions}
    now = {(d.first, d.second): d for d in after.decisions}  # a pair asked again: its last
    return [(asked[key], d) for key, d in now.items()
            if key in asked and asked[key].fused != d.fused]


class FusionSplitError(AssertionError):
    """A region expected to compile to one kernel did not; the message lists why."""


def explain_split(plans: list[FusionPlan], expected: int = 1) -> str:
    lines = []
    for plan in plans:
        lines.append(plan.summary())
        for g in plan.groups:
            lines.append(f"  kernel {g.index} ({g.kind}): {', '.join(g.nodes)}")
        refusals = plan.refusals()
        if refusals:
            lines.append("  decisions that split it:")
            lines.extend(f"    - {d}" for d in refusals)
        elif plan.kernel_count > expected:
            lines.append("  no pair of these kernels was a fusion candidate: they share no "
                         "buffer (turn on config.combo_kernels to pack independent kernels)")
    return "\n".join(lines)
