"""Above both compilers: the engine switch, and our plans beside Inductor's.

The teaching scheduler (mtia_lab/compiler) and the Inductor engine (mtia_lab/inductor) are
siblings that never import each other; what needs both lives here.

Reading order:
    engine.py     the "mtia_lab" Dynamo backend: the teaching scheduler, or Inductor with
                  `options={"engine": "inductor"}`; `register()`
    plans.py      TorchInductor's real plan for the device beside ours, each difference with
                  the rule that explains it (`compare`, `compare_compiled`, `Comparison`)
    launches.py   which of Inductor's launches holds which of our nodes, read from Inductor's
                  own records and audited against its wrapper's launches
    fidelity.py   that comparison over a suite of graphs, as one table
    scheduler_timing.py   the graph Inductor's CPU scheduler is timed on (benchmarks only)
"""

from __future__ import annotations

from .engine import mtia_lab_backend, register
from .fidelity import FidelityRow, fidelity_rows, fidelity_table, suite_totals
from .plans import (
    AlignmentError,
    Comparison,
    Difference,
    compare,
    compare_compiled,
    compare_plans,
    device_plan,
)

__all__ = [
    "AlignmentError", "Comparison", "Difference", "FidelityRow", "compare", "compare_compiled",
    "compare_plans", "device_plan", "fidelity_rows", "fidelity_table", "mtia_lab_backend",
    "register", "suite_totals",
]
