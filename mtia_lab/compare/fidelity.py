"""The fidelity report: our plans against Inductor's device plans on a suite of graphs.

    rows = fidelity_rows(suite)     # suite: {name: (fn, make_inputs)}
    print(fidelity_table(rows))

Each graph is compiled once by our backend (its plan is the one that ran) and once by
Inductor for the device; our scheduler is then asked again, on the same IR, with our
departures switched off (`matmul_templates=False`, `computed_once=False`,
`extern_in_triton=False`), to show how much of the rest agrees, and that plan runs too (the
compiled function again, its runner given the plan's program: no second trace).
Every comparison is audited (`Comparison.check`: each launch of Inductor's wrapper counted,
each node of ours on exactly one launch); the table says so per graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._compat import pytree
from ..compiler import config, plans_for
from ..compiler.aot import COMPILED
from ..compiler.codegen import generate
from ..compiler.scheduler import schedule
from .plans import AlignmentError, Comparison, compare_plans, device_plan


@dataclass
class FidelityRow:
    name: str
    default: Comparison  # our plan as it ran (departures on) vs Inductor's
    inductor_like: Comparison  # our departures off (templates, computed once, layout
    # copies) vs Inductor's
    # "" where our compiled code gave eager's results, with the departures on and off; else
    # what differed (torch.testing's words)
    against_eager: str = ""

    @property
    def audit(self) -> str:
        """"ok", or what Comparison.check found unaligned."""
        try:
            self.default.check()
            self.inductor_like.check()
        except AlignmentError as error:
            return str(error)
        return "ok"


def fidelity_rows(suite: dict, inductor_config: dict | None = None) -> list[FidelityRow]:
    rows = []
    for name, (fn, make) in suite.items():
        ran, plain, against_eager = _ours_against_eager(name, fn, make)
        theirs = device_plan(ran.gm, (inductor_config or {}).get(name))
        rows.append(FidelityRow(name, compare_plans(ran.plan, theirs, name),
                                compare_plans(plain, theirs, name), against_eager))
    return rows


def eager_rows(suite: dict) -> dict[str, str]:
    """{graph: what differed from eager, or ""}: fidelity_rows' check of our compiled code
    (departures on and off) against eager, without Inductor's compile, which is three
    quarters of a row's time. The suites tuned on long ago get this check in every test run,
    and the comparison with Inductor in the slow tier (tests/test_scheduler_fidelity*.py)."""
    return {name: _ours_against_eager(name, fn, make)[2] for name, (fn, make) in suite.items()}


def _ours_against_eager(name: str, fn, make):
    """Our backend's compile of `fn` (the plan that ran, departures on), the same IR scheduled
    with the departures off, and whether either's results differ from eager's."""
    torch.compiler.reset()  # a fresh compile: no cached one hides the plan
    compiled_fn = torch.compile(fn, backend="mtia_lab", fullgraph=True)
    start = len(COMPILED)
    result = compiled_fn(*_device_args(make))
    compiled = COMPILED[start]
    with _departures_off():
        plain = schedule(compiled.plan.ir, name)
    plain_result = _run_plan(compiled_fn, compiled, plain, fn, make)  # before Inductor's
    # compile, which resets Dynamo's cache
    eager = fn(*_device_args(make))
    return compiled, plain, _differs(result, eager) or _differs(plain_result, eager)


def _run_plan(compiled_fn, compiled, plan, fn, make):
    """`compiled_fn`'s result when its graph runs `plan` (the same graph, scheduled under other
    settings): the same Dynamo and AOTAutograd wrappers, our runner given plan's program."""
    start = len(COMPILED)
    with compiled.runner.running(generate(plan, plan.ir)):
        result = compiled_fn(*_device_args(make))
    if len(COMPILED) == start:
        return result
    # Dynamo compiled again, so `plan` did not run: the first call changed what `fn` traces
    # (a model that fills a cache on its first call). Compile it afresh without departures.
    with _departures_off():
        return plans_for(fn, *_device_args(make))[0]


def _departures_off():
    return config.patch(matmul_templates=False, computed_once=False, extern_in_triton=False,
                        scatter_in_one_kernel=False)


def _device_args(make) -> list:
    """The graph's inputs afresh on the device (a graph may update its inputs in place)."""
    torch.manual_seed(0)
    return [a.to("mtia_sim") for a in make()]


def _differs(got, expected) -> str:
    """Fused float32 code sums in another order than eager: 1e-4 apart, not bit for bit
    (the tolerance of the project's compiled-against-eager tests); bf16 and half as
    torch.testing's defaults for them."""
    got_leaves, expected_leaves = pytree.tree_leaves(got), pytree.tree_leaves(expected)
    if len(got_leaves) != len(expected_leaves):
        return f"{len(got_leaves)} results, eager gave {len(expected_leaves)}"
    for index, (a, b) in enumerate(zip(got_leaves, expected_leaves, strict=True)):
        loose = isinstance(b, torch.Tensor) and b.dtype in (torch.float32, torch.float64)
        try:
            torch.testing.assert_close(a, b, equal_nan=True, rtol=1e-4 if loose else None,
                                       atol=1e-4 if loose else None)
        except AssertionError as error:
            return f"result {index}: {error}"
    return ""


def suite_totals(rows: list[FidelityRow]) -> dict[str, int]:
    """Launches of Inductor's, how many are one of our kernels (as ran, and with our
    departures off), how many of the others a departure that cannot be switched off explains
    (a layout copy...), those a part of Inductor we name and do not model explains (a peeled
    convolution bias's launch), differences nothing explains, graphs whose audit failed."""
    return {
        "launches": sum(r.default.inductor_kernels for r in rows),
        "same": sum(r.default.identical for r in rows),
        "same_no_departures": sum(r.inductor_like.identical for r in rows),
        "departures": sum(d.explained for r in rows for d in r.inductor_like.differences),
        "not_modelled": sum(d.not_modelled for r in rows for d in r.inductor_like.differences),
        "unexplained": sum(len(r.inductor_like.unexplained) for r in rows),
        "misaligned": sum(r.audit != "ok" for r in rows),
    }


def fidelity_table(rows: list[FidelityRow], title: str = "suite") -> str:
    """Per graph: kernels and bytes (both by our cost model), Inductor's launches that are one
    of our kernels, the audit; then every difference, launch by launch, with its rule."""
    head = (f"{'graph':<22}{'kernels':>12}{'bytes moved':>22}{'same groups':>13}"
            f"{'same, no ours-rules':>21}{'audit':>8}")
    lines = [head, f"{'':<22}{'ours/Ind':>12}{'ours / Inductor':>22}", "-" * len(head)]
    for r in rows:
        d, p = r.default, r.inductor_like
        lines.append(f"{r.name:<22}{d.ours.kernel_count:>5} / {d.inductor.kernel_count:<4}"
                     f"{d.ours.bytes_moved:>10,} / {d.priced.bytes_moved:<9,}"
                     f"{d.identical:>6} of {d.inductor_kernels:<4}"
                     f"{p.identical:>12} of {p.inductor_kernels:<4}"
                     f"{'ok' if r.audit == 'ok' else 'FAILED':>8}")
    t = suite_totals(rows)
    lines.append("-" * len(head))
    n = max(t["launches"], 1)
    lines.append(f"{title:<22}{'':>34}{t['same']:>6} of {t['launches']:<4}"
                 f"{t['same_no_departures']:>12} of {t['launches']:<4}")
    lines.append(f"  with our departures off: {100 * t['same_no_departures'] / n:.0f}% of "
                 f"Inductor's launches identical, {t['departures']} differ by a departure "
                 f"that stays on (marked (ours)), {t['not_modelled']} by a part of "
                 f"Inductor not modelled (named), {t['unexplained']} unexplained "
                 f"({100 * t['unexplained'] / n:.0f}%); {t['misaligned']} graphs misaligned")
    for r in rows:
        if r.audit != "ok":
            lines.append(f"audit: {r.audit}")
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
