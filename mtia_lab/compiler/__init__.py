"""The fusion scheduler: `torch.compile(model, backend="mtia_lab")` for the simulated device.

Reading order, as the data flows:
    ir.py         aten FX graph -> SchedulerNodes and Buffers (kinds, bytes, iteration spaces)
    rules.py      named fusion rules and guardrails, each returning a Verdict
    scheduler.py  Inductor's greedy loop: candidates by bytes saved, fuse, no cycles
    decisions.py  the records: FusionDecision, KernelGroup, FusionPlan
    codegen.py    one readable Python function per kernel, compiled with exec
    runner.py     runs the kernels, charges the simulated clock, tells listeners
    backend.py    Dynamo + AOTAutograd glue, decompositions and the keep-list
    config.py     the guardrails' settings, with `config.patch(...)`
    inductor_compare.py   TorchInductor's real plan for the device beside ours, each
                          difference with the rule that explains it
    launches.py   which of Inductor's launches holds which of our nodes, read from
                  Inductor's own records and audited against its wrapper's launches
    fidelity.py   that comparison over a suite of graphs, as one table
"""

from __future__ import annotations

import torch

from . import config
from .backend import COMPILED, KEEP, CompiledGraph, compile_graph, mtia_lab_backend, register
from .codegen import Kernel, Program, generate
from .config import ConfigError
from .decisions import FusionDecision, FusionPlan, FusionSplitError, KernelGroup, explain_split
from .ir import FusedSchedulerNode, GraphIR, Kind, SchedulerNode, build_ir
from .runner import LISTENERS, Runner, add_listener, remove_listener
from .scheduler import Scheduler, schedule, score_fusion_memory

__all__ = [
    "COMPILED", "KEEP", "CompiledGraph", "ConfigError", "FusedSchedulerNode", "FusionDecision",
    "FusionPlan", "FusionSplitError", "GraphIR", "Kernel", "KernelGroup", "Kind", "LISTENERS",
    "Program", "Runner", "Scheduler", "SchedulerNode", "add_listener", "assert_single_kernel",
    "build_ir", "compile_graph", "config", "generate", "inductor_plan", "mtia_lab_backend",
    "plans_for",
    "register", "remove_listener", "schedule", "score_fusion_memory", "trace",
]


def inductor_plan(fn, *example_inputs, keep: bool = True, config: dict | None = None,
                  dynamic: bool | None = False):
    """Real TorchInductor's FusionPlan of `fn` on mtia_sim (mtia_lab/inductor/plan.py): the same
    record as ours, from Inductor's own scheduler; `config` patches Inductor's config;
    `dynamic=True` compiles for symbolic sizes, which the plan reports as such."""
    from ..inductor import inductor_plan as plan

    return plan(fn, *example_inputs, keep=keep, config=config, dynamic=dynamic)


def trace(fn, *args) -> GraphIR:
    """The scheduler IR of `fn(*args)` without compiling: aten graph by make_fx on CPU tensors,
    with the backend's decompositions. Schedule it (again, under any config) with `schedule`."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from .backend import decompositions

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
