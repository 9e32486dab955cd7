"""The guardrail registry: every fusion guardrail, defined once.

A guardrail is a limit a scheduler's fusion must respect (`max_fusion_size`), or a switch of
how it fuses (`combo_kernels`). Each `Guardrail` says what it is called, which
key of Inductor's config holds it (None: ours only), whose it is (Inductor's, or ours: a
departure on purpose), its default and which values are valid. Everyone reads this one table:

    compiler/config.py   the teaching scheduler's settings (`scheduler=True`), checked here
    inductor/            the values of Inductor's own config recorded in each of its plans
    compare/             our settings handed to Inductor, so both plans run under the same ones
    viz/                 a decision whose rule is a guardrail's name was made by a guardrail;
                         the playground's controls for each engine

Defaults are Inductor's (torch 2.13), plus three of our own.
"""

from __future__ import annotations

from dataclasses import dataclass

INDUCTOR = "inductor"
OURS = "ours"


class ConfigError(ValueError):
    """A guardrail was given a name, type or value it does not accept."""


@dataclass(frozen=True)
class Guardrail:
    """One guardrail: its name, where Inductor keeps it, whose it is, default, valid values."""

    name: str
    default: object
    kind: type  # bool or int
    minimum: int | None = None
    allow_none: bool = False
    doc: str = ""
    owner: str = INDUCTOR  # INDUCTOR: Inductor's guardrail; OURS: a departure of ours
    inductor_key: str | None = None  # its key in Inductor's config; None: Inductor has none
    scheduler: bool = True  # a setting of the teaching scheduler (mtia_lab.compiler.config)
    inductor_reads: bool = True  # False: Inductor declares the key but never reads it

    @property
    def ours(self) -> bool:
        return self.owner == OURS

    def valid_range(self) -> str:
        if self.kind is bool:
            return "True or False"
        text = f"an int >= {self.minimum}" if self.minimum is not None else "an int"
        return text + (" or None" if self.allow_none else "")

    def check(self, value: object, where: str = "mtia_lab.compiler.config") -> object:
        """`value` if it is valid, else a ConfigError naming the setting, the value, what is
        valid, and what the guardrail does."""
        if value is None and self.allow_none:
            return None
        ok_type = isinstance(value, bool) if self.kind is bool else (
            isinstance(value, int) and not isinstance(value, bool)
        )
        if not ok_type or (self.minimum is not None and value < self.minimum):
            raise ConfigError(
                f"{where}.{self.name} = {value!r} is invalid: "
                f"expected {self.valid_range()}. {self.doc}"
            )
        return value


def _inductor(name: str, default: object, kind: type, minimum: int | None = None,
              **kwargs) -> Guardrail:
    """One of Inductor's guardrails: kept under the same name in Inductor's config."""
    return Guardrail(name, default, kind, minimum, inductor_key=name, **kwargs)


GUARDRAILS: dict[str, Guardrail] = {g.name: g for g in [
    _inductor("max_fusion_size", 64, int, 1,
              doc="Most scheduler nodes one fused kernel may hold."),
    _inductor("max_fusion_unique_io_buffers", None, int, 1, allow_none=True,
              doc="Most distinct buffers a fused kernel may read or write (None: no limit)."),
    _inductor("score_fusion_memory_threshold", 10, int, 0,
              doc="Fewest bytes two kernels must share for a fusion to be worth it."),
    _inductor("max_fusion_buffer_group_pairwise_attempts", 64, int, 1,
              doc="How far apart (in graph order) two users of a buffer may be to be paired."),
    _inductor("combo_kernels", False, bool,
              doc="Pack independent small kernels into one launch (Inductor: off by default)."),
    _inductor("combo_kernel_max_num_args", 250, int, 1,
              doc="Most arguments one combo kernel may take (each member's reads and writes, "
                  "summed)."),
    # torch 2.13 declares this key but its combo-kernel partition never reads it.
    _inductor("combo_kernel_max_num_nodes", 8, int, 1, inductor_reads=False,
              doc="Most kernels one combo kernel may pack."),
    _inductor("unroll_reductions_threshold", 8, int, 1,
              doc="Reductions over fewer elements than this run as pointwise code."),
    _inductor("loop_ordering_after_fusion", True, bool,
              doc="One last round in which a pointwise kernel may take a reduction's loop "
                  "order (Inductor's default in open source)."),
    Guardrail("matmul_templates", True, bool, owner=OURS,
              doc="Ours: a matmul is a template that takes its pointwise epilogue (an "
                  "MTIA-style GEMM kernel). False: an ATen call nothing fuses with, as "
                  "Inductor without max-autotune."),
    Guardrail("computed_once", True, bool, owner=OURS,
              doc="Ours: a value with several readers is computed once, in one kernel, and "
                  "stored for the others. False: as Inductor's lowering, a cheap one "
                  "(should_realize_on_reuse says no) is recomputed in each reader's kernel."),
    Guardrail("extern_in_triton", True, bool, owner=OURS,
              doc="Ours: an extern kernel (a convolution) is the whole op. False: as "
                  "Inductor's layout_optimization, an operand whose layout is fixed (a graph "
                  "input, an extern's output, a view) is copied into channels-last by a "
                  "Triton kernel of its own before the call (compiler/layout.py)."),
    Guardrail("scatter_in_one_kernel", True, bool, owner=OURS,
              doc="Ours: a scatter (index_put, scatter, scatter_add) is one kernel, the copy "
                  "of its input and the indexed stores. False: as Inductor's lowering, the "
                  "copy is a kernel of its own and the stores share the values' loop "
                  "(compiler/scatter.py)."),
    Guardrail("on_chip_memory_budget", None, int, 0, allow_none=True, owner=OURS,
              doc="Bytes of intermediates one kernel may keep on chip (None: the chip "
                  "profile's local_memory_per_pe * num_pes)."),
    # Inductor's, not modelled by the teaching scheduler: recorded in Inductor's plans.
    _inductor("aggressive_fusion", False, bool, scheduler=False,
              doc="Inductor's: fuse nodes that share no data too."),
    _inductor("realize_opcount_threshold", None, int, 0, allow_none=True, scheduler=False,
              doc="Inductor's: realize a buffer computed by more ops than this (None: its own "
                  "heuristics)."),
]}


def inductor_guardrails() -> list[Guardrail]:
    """The guardrails Inductor's scheduler reads, in registry order."""
    return [g for g in GUARDRAILS.values() if g.inductor_key is not None and g.inductor_reads]


def inductor_values(inductor_config) -> dict[str, object]:
    """The values of Inductor's guardrails in `inductor_config` (Inductor's config module), by
    guardrail name: what an Inductor plan records as its settings."""
    return {g.name: getattr(inductor_config, g.inductor_key) for g in inductor_guardrails()}


def as_inductor_config(settings: dict[str, object]) -> dict[str, object]:
    """Settings of the teaching scheduler as Inductor config patches: those of the guardrails
    Inductor has too, under its keys (ours-only guardrails are left out)."""
    return {g.inductor_key: settings[g.name] for g in GUARDRAILS.values()
            if g.inductor_key is not None and g.name in settings}
