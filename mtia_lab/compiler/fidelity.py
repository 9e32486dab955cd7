"""The fidelity report: our plans against Inductor's device plans on a suite of graphs.

    rows = fidelity_rows(suite)     # suite: {name: (fn, make_inputs)}
    print(fidelity_table(rows))

Each graph is compiled once by our backend (its plan is the one that ran) and once by
Inductor for the device; our scheduler is then asked again, on the same IR, with our
departures switched off (`matmul_templates=False`), to show how much of the rest agrees.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import config
from .inductor_compare import COMPILED, Comparison, compare_plans, device_plan
from .scheduler import schedule


@dataclass
class FidelityRow:
    name: str
    default: Comparison  # our plan as it ran (departures on) vs Inductor's
    inductor_like: Comparison  # our scheduler with matmul_templates=False vs Inductor's


def fidelity_rows(suite: dict, inductor_config: dict | None = None) -> list[FidelityRow]:
    from . import plans_for

    rows = []
    for name, (fn, make) in suite.items():
        torch.manual_seed(0)
        args = [a.to("mtia_sim") for a in make()]
        start = len(COMPILED)
        plans_for(fn, *args)
        compiled = COMPILED[start]
        theirs = device_plan(compiled.gm, (inductor_config or {}).get(name))
        with config.patch(matmul_templates=False):
            plain = schedule(compiled.plan.ir, name)
        rows.append(FidelityRow(name, compare_plans(compiled.plan, theirs, name),
                                compare_plans(plain, theirs, name)))
    return rows


def fidelity_table(rows: list[FidelityRow]) -> str:
    """Per graph: kernels and bytes (both by our cost model), groups identical, differences."""
    head = (f"{'graph':<22}{'kernels':>12}{'bytes moved':>22}{'same groups':>13}"
            f"{'same, no ours-rules':>21}")
    lines = [head, f"{'':<22}{'ours/Ind':>12}{'ours / Inductor':>22}", "-" * len(head)]
    total = [0, 0, 0, 0]
    for r in rows:
        d, p = r.default, r.inductor_like
        lines.append(f"{r.name:<22}{d.ours.kernel_count:>5} / {d.inductor.kernel_count:<4}"
                     f"{d.ours.bytes_moved:>10,} / {d.priced.bytes_moved:<9,}"
                     f"{d.identical:>6} of {d.inductor_kernels:<4}"
                     f"{p.identical:>12} of {p.inductor_kernels:<4}")
        total[0] += d.identical
        total[1] += d.inductor_kernels
        total[2] += p.identical
        total[3] += p.inductor_kernels
    lines.append("-" * len(head))
    lines.append(f"{'suite':<22}{'':>34}{total[0]:>6} of {total[1]:<4}"
                 f"{total[2]:>12} of {total[3]:<4}"
                 f"  ({100 * total[2] / max(total[3], 1):.0f}% without ours-rules)")
    lines.append("")
    lines.append("differences (our plan as it ran):")
    for r in rows:
        for diff in r.default.differences:
            lines.append(f"  {r.name}: {diff}")
    lines.append("differences with matmul_templates=False:")
    for r in rows:
        for diff in r.inductor_like.differences:
            lines.append(f"  {r.name}: {diff}")
    return "\n".join(lines)
