"""Records both compilers write and every comparison and view reads.

Reading order:
    plan.py         FusionDecision, KernelGroup, PlanTotals, FusionPlan: what a scheduler did
                    to one graph, and why (the teaching scheduler and Inductor's alike)
    keep.py         KEEP: MTIA's keep-list of ops neither compiler decomposes
    guardrails.py   GUARDRAILS: every fusion guardrail once (name, Inductor config key, ours or
                    Inductor's, default, validation)
    input_names.py  the user's names of a graph's inputs (`fc1.weight`, not `primals_7`)
    display.py      how a record finds its view (register_view, view_for): records import no view

Floor 2 of the house plan: it may import the device (mtia_lab/backend) and mtia_lab._compat,
never a compiler.
"""

from __future__ import annotations

from .guardrails import GUARDRAILS, ConfigError, Guardrail
from .keep import KEEP, keep_ops
from .plan import (
    FusionDecision,
    FusionPlan,
    FusionSplitError,
    KernelGroup,
    PlanTotals,
    explain_split,
    flipped,
    symbols_text,
)

__all__ = [
    "GUARDRAILS", "KEEP", "ConfigError", "FusionDecision", "FusionPlan", "FusionSplitError",
    "Guardrail", "KernelGroup", "PlanTotals", "explain_split", "flipped", "keep_ops",
    "symbols_text",
]
