"""Activation checkpointing and its trade: memory saved against work recomputed.

`checkpointed(block)` wraps a module so its forward runs under `torch.utils.checkpoint`
(non-reentrant): autograd keeps only the block's inputs and recomputes the rest in backward.
`checkpointed(block, policy=...)` is selective checkpointing
(`torch.utils.checkpoint.create_selective_checkpoint_contexts`): the policy says, op by op,
which results to keep (MUST_SAVE) and which to recompute (PREFER_RECOMPUTE).
`checkpoint_trade(...)` runs one step per variant and lays the numbers side by side: peak of
saved activations, the allocator's peak, simulated backward time, recomputed work.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

from .._compat import OpOverload
from .activations import ActivationTimeline, activation_timeline

aten = torch.ops.aten
MATMULS = (aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default)


def save_matmuls(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    """A selective policy: keep matmul results (expensive to recompute), recompute the rest
    (pointwise ops: cheap work, but as many bytes as the matmul results)."""
    return CheckpointPolicy.MUST_SAVE if op in MATMULS else CheckpointPolicy.PREFER_RECOMPUTE


def check_policy(policy) -> Callable | list | None:
    """None (full checkpointing), a callable (ctx, op, *args, **kwargs) -> CheckpointPolicy,
    or a list of ops to save; anything else is refused, naming `policy`."""
    if policy is None or callable(policy):
        return policy
    if isinstance(policy, (list, tuple, set)) and all(
            isinstance(op, OpOverload) for op in policy):
        return list(policy)
    raise TypeError(
        f"policy={policy!r} is not callable: pass a function (ctx, op, *args, **kwargs) -> "
        "torch.utils.checkpoint.CheckpointPolicy (e.g. mtia_lab.instruments.save_matmuls), a "
        "list of aten ops to save (e.g. [torch.ops.aten.mm.default]), or None to recompute "
        "everything")


class Checkpointed(torch.nn.Module):
    """`module` whose forward is checkpointed (fully, or selectively with `policy`)."""

    def __init__(self, module: torch.nn.Module, policy=None) -> None:
        super().__init__()
        self.module = module
        self.policy = check_policy(policy)

    def forward(self, *args, **kwargs):
        if self.policy is None:
            return checkpoint(self.module, *args, use_reentrant=False, **kwargs)
        contexts = functools.partial(create_selective_checkpoint_contexts, self.policy)
        return checkpoint(self.module, *args, use_reentrant=False, context_fn=contexts,
                          **kwargs)


def checkpointed(module: torch.nn.Module, policy=None) -> Checkpointed:
    """Checkpoint `module`'s forward; `policy` (see check_policy) makes it selective."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"checkpointed() wraps an nn.Module, got {type(module).__name__}")
    return Checkpointed(module, policy)


@dataclass(frozen=True)
class TradeRow:
    """One variant of the step, measured."""

    variant: str
    saved_peak_bytes: int  # peak of activation bytes held by saved tensors
    allocator_peak_bytes: int  # the device allocator's peak above the baseline
    forward_us: float
    backward_us: float
    backward_flops: float

    @classmethod
    def of(cls, t: ActivationTimeline) -> TradeRow:
        return cls(t.label, t.peak_bytes, t.allocator_peak_bytes, t.forward_us, t.backward_us,
                   t.backward_flops)


@dataclass
class CheckpointTrade:
    """The variants of one step side by side; the first is the reference (no checkpoint)."""

    rows: list[TradeRow]
    timelines: list[ActivationTimeline]

    def saved_vs_recomputed(self, variant: str) -> tuple[int, float, float]:
        """(allocator bytes saved, extra backward us, extra backward flops) against the first
        variant."""
        ref = self.rows[0]
        row = next(r for r in self.rows if r.variant == variant)
        return (ref.allocator_peak_bytes - row.allocator_peak_bytes,
                row.backward_us - ref.backward_us, row.backward_flops - ref.backward_flops)


def checkpoint_trade(variants: dict[str, tuple[torch.nn.Module, Callable]],
                     inputs=()) -> CheckpointTrade:
    """variants: name -> (model, step) where step() runs model's forward and returns the loss.
    Each step runs once, recorded by activation_timeline; the first is the reference."""
    timelines = [activation_timeline(step, model=model, inputs=inputs, label=name)
                 for name, (model, step) in variants.items()]
    return CheckpointTrade([TradeRow.of(t) for t in timelines], timelines)
