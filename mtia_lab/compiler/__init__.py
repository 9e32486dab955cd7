"""The teaching fusion scheduler: `torch.compile(model, backend="mtia_lab")` for the device.

Reading order, as the data flows:
    ir.py         aten FX graph -> SchedulerNodes and Buffers (kinds, bytes, iteration spaces)
    rules.py      named fusion rules and guardrails, each returning a Verdict
    scheduler.py  Inductor's greedy loop: candidates by bytes saved, fuse, no cycles
    codegen.py    one readable Python function per kernel, compiled with exec
    runner.py     runs the kernels, charges the simulated clock, tells listeners
    aot.py        Dynamo + AOTAutograd glue: decompositions (all but the keep-list), the
                  compiled graphs
    config.py     the guardrails' settings, with `config.patch(...)`
    plan_detail.py    what a plan's pictures need beyond the plan (dataflow inside kernels)

Its records (FusionPlan, FusionDecision, KernelGroup), the keep-list and the guardrail registry
are in mtia_lab/records, shared with the Inductor engine (mtia_lab/inductor), which this package
never imports. The "mtia_lab" backend's engine switch and the comparison with Inductor's plans
stand above both, in mtia_lab/compare.
"""

from __future__ import annotations

import torch

from ..records.keep import KEEP
from ..records.plan import (
    FusionDecision,
    FusionPlan,
    FusionSplitError,
    KernelGroup,
    explain_split,
)
from . import config
from .aot import COMPILED, CompiledGraph, compile_graph, decompositions, mtia_lab_backend
from .codegen import Kernel, Program, generate
from .config import ConfigError
from .ir import FusedSchedulerNode, GraphIR, Kind, SchedulerNode, build_ir
from .runner import LISTENERS, Runner, add_listener, remove_listener
from .scheduler import Scheduler, schedule, score_fusion_memory

__all__ = [
    "COMPILED", "KEEP", "CompiledGraph", "ConfigError", "FusedSchedulerNode", "FusionDecision",
    "FusionPlan", "FusionSplitError", "GraphIR", "Kernel", "KernelGroup", "Kind", "LISTENERS",
    "Program", "Runner", "Scheduler", "SchedulerNode", "add_listener", "assert_single_kernel",
    "build_ir", "compile_graph", "config", "generate", "mtia_lab_backend", "plans_for",
    "remove_listener", "schedule", "score_fusion_memory", "trace",
]

# Names this package had before the two compilers became siblings, and where they are now
# (the teaching scheduler no longer imports the Inductor engine).
_MOVED = {
    "inductor_plan": "mtia_lab.inductor.inductor_plan",
    "register": "mtia_lab.compare.register",
}


def __getattr__(name: str):
    if name in _MOVED:
        raise AttributeError(f"mtia_lab.compiler.{name} moved to {_MOVED[name]}: import it "
                             "from there")
    raise AttributeError(f"module 'mtia_lab.compiler' has no attribute {name!r}")


def trace(fn, *args) -> GraphIR:
    """The scheduler IR of `fn(*args)` without compiling: aten graph by make_fx on CPU tensors,
    with the backend's decompositions. Schedule it (again, under any config) with `schedule`."""
    from torch.fx.experimental.proxy_tensor import make_fx

    return build_ir(make_fx(fn, decomposition_table=decompositions())(*args))


def plans_for(fn, *args, **kwargs) -> tuple[object, list[FusionPlan]]:
    """Compile `fn` afresh with the mtia_lab backend, run it once; (result, forward plans).

    Calls `torch.compiler.reset()` first so that Dynamo's cache cannot hide the compilation."""
    torch.compiler.reset()
    start = len(COMPILED)
    result = torch.compile(fn, backend="mtia_lab", fullgraph=True)(*args, **kwargs)
    return result, [c.plan for c in COMPILED[start:]]


def assert_single_kernel(fn, *args, **kwargs):
    """Compile and run `fn(*args)`; raise FusionSplitError unless it became one kernel.

    The error lists the kernels and every decision that kept them apart, with the rule or
    guardrail, the numbers and the user's source lines. Returns fn's result otherwise."""
    result, plans = plans_for(fn, *args, **kwargs)
    if sum(p.kernel_count for p in plans) != 1:
        raise FusionSplitError(
            f"expected one kernel, got {sum(p.kernel_count for p in plans)}:\n"
            + explain_split(plans)
        )
    return result
