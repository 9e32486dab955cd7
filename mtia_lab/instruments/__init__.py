"""Compile instruments: what torch.compile does over a training run, as data.

Reading order (the views of these records live in viz/: viz/guard_views.py draws a CompileLog,
viz/activation_views.py an ActivationTimeline and a checkpoint trade):
    _compat.py           every private Dynamo / compiled-autograd API used here
    records.py           Guard, CompileEntry, CallRecord, CompileLog: plain data
    guards.py            watch(fn): which cache entry served each call, why Dynamo recompiled
    activations.py       activation_timeline: saved tensors over a step, allocator peak, clock
    checkpointing.py     checkpointed(module, policy), checkpoint_trade: memory vs recompute
    backward.py          compiled autograd's backward beside AOTAutograd's; accumulation
    higher_order.py      Hessian-vector products, eager and compiled, against CPU
    nesting.py           compile cost of deep nesting by phase (benchmarks/bench_compile_nesting)
    examples.py          the small models shown (MLPBlock, Stack, Nest)
"""

from __future__ import annotations

from .activations import ActivationTimeline, SavedEvent, activation_timeline
from .backward import Accumulation, BackwardComparison, accumulate, compare_backward
from .checkpointing import (
    Checkpointed,
    CheckpointTrade,
    check_policy,
    checkpoint_trade,
    checkpointed,
    save_matmuls,
)
from .guards import DynamicDimError, Watched, check_recompile_limit, mark_dynamic, watch
from .higher_order import HvpResult, NotTwiceDifferentiable, hvp_check
from .nesting import CompileCost, compile_cost, deepest_guard
from .records import CallRecord, CompileEntry, CompileLog, Guard

__all__ = [
    "Accumulation", "ActivationTimeline", "BackwardComparison", "CallRecord", "CheckpointTrade",
    "Checkpointed", "CompileCost", "CompileEntry", "CompileLog", "DynamicDimError", "Guard",
    "HvpResult", "NotTwiceDifferentiable", "SavedEvent", "Watched", "accumulate",
    "activation_timeline", "check_policy", "check_recompile_limit", "checkpoint_trade",
    "checkpointed", "compare_backward", "compile_cost", "deepest_guard", "hvp_check",
    "mark_dynamic", "save_matmuls", "watch",
]
