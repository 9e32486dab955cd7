"""Compiled autograd on the device: the backward graph it captures, beside AOTAutograd's.

Two ways a compiled training step gets a compiled backward:

- AOTAutograd (plain `torch.compile`): it traces the forward *and* its backward ahead of
  time, per Dynamo graph; the backward is compiled at the first `.backward()`;
- compiled autograd (`torch._dynamo.compiled_autograd`, torch 2.13's spelling; behind
  `_compat.compiled_autograd`): at `.backward()` it captures the whole autograd graph as it
  runs (AOT's backward inlined, gradient accumulation included) and hands it to
  `torch.compile` as one more graph.

`compare_backward(...)` runs one step each way (and eagerly) and returns both sets of plans
(FusionPlan records: kernels, bytes moved, simulated time), whether the gradients match
eager, and how often compiled autograd captured. Both compile paths: engine "mtia_lab" (the
teaching scheduler) and "inductor" (real TorchInductor for the device).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .._compat import dynamo_backend
from ..records.plan import FusionPlan
from . import _compat

ENGINES = ("mtia_lab", "inductor")


def _plans_source(engine: str) -> list:
    if engine == "mtia_lab":
        from ..compiler import COMPILED

        return COMPILED
    from ..inductor import PLANS, install_hooks

    install_hooks()
    return PLANS


def _plan_of(item) -> FusionPlan:
    return getattr(item, "plan", item)  # COMPILED holds CompiledGraph(plan=...), PLANS plans


def compile_model(model: torch.nn.Module, engine: str):
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r}: choose one of {ENGINES} (the teaching scheduler "
                         "or real TorchInductor for the device)")
    return torch.compile(model, backend="mtia_lab" if engine == "mtia_lab" else "inductor")


def backend_for(engine: str, devices: list[str] | None = None):
    """What compiled autograd hands its captured graph to: torch.compile with the engine's
    backend; `devices` (if given) collects the devices of the graph's tensor inputs."""
    real = dynamo_backend("mtia_lab" if engine == "mtia_lab" else "inductor")

    def backend(gm, example_inputs):
        if devices is not None:  # the list of tensors autograd hands the graph (the other
            devices.extend(str(t.device) for inputs in example_inputs  # inputs carry sizes)
                           if isinstance(inputs, list) for t in inputs
                           if isinstance(t, torch.Tensor))
        return real(gm, example_inputs)

    return torch.compile(backend=backend)


def _grads(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().cpu().clone() for p in model.parameters()]


def max_difference(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max((float((x - y).abs().max()) for x, y in zip(a, b, strict=True)), default=0.0)


@dataclass
class BackwardComparison:
    """One step compiled both ways; plans split into the forward and the backward part."""

    engine: str
    aot_forward: list[FusionPlan]
    aot_backward: list[FusionPlan]
    ca_forward: list[FusionPlan]
    ca_backward: list[FusionPlan]  # the graph compiled autograd captured at .backward()
    aot_grad_error: float  # largest |grad - eager grad| over all parameters
    ca_grad_error: float
    captures: int  # compiled-autograd captures during the step
    ca_input_devices: dict[str, int] = field(default_factory=dict)  # device -> tensor inputs

    @staticmethod
    def totals(plans: list[FusionPlan]) -> tuple[int, int, float]:
        return (sum(p.kernel_count for p in plans), sum(p.bytes_moved for p in plans),
                sum(p.after.time_us for p in plans))

    def grads_match(self, atol: float = 1e-4) -> bool:
        return self.aot_grad_error <= atol and self.ca_grad_error <= atol

    def to_text(self) -> str:
        rows = [("AOTAutograd", self.aot_forward, self.aot_backward),
                ("compiled autograd", self.ca_forward, self.ca_backward)]
        where = ", ".join(f"{n} on {d}" for d, n in sorted(self.ca_input_devices.items()))
        lines = [f"backward on mtia_sim, engine {self.engine}: AOTAutograd's backward vs the "
                 f"graph compiled autograd captured ({self.captures} capture"
                 f"{'s' * (self.captures != 1)}; its tensor inputs: {where or 'none'})", "",
                 f"  {'backward from':<18}  {'graphs':>6}  {'kernels':>7}  {'bytes moved':>12}"
                 f"  {'simulated us':>12}  {'max |grad - eager|':>18}"]
        for (name, _, back), error in zip(rows, (self.aot_grad_error, self.ca_grad_error),
                                          strict=True):
            kernels, moved, time_us = self.totals(back)
            lines.append(f"  {name:<18}  {len(back):>6}  {kernels:>7}  {moved:>12,}  "
                         f"{time_us:>12.2f}  {error:>18.2e}")
        if self.captures and not self.ca_backward:
            lines.append("  (the captured graph reached the backend with host tensors only, so "
                         "it was compiled for the host: no device plan to show)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.to_text()


def _step(model, x, loss_fn) -> None:
    loss_fn(model(x)).backward()


def _compiled_step(model, x, loss_fn, engine: str, source: list) -> tuple[list, list]:
    """One compiled training step of `model`: the plans its forward and its backward made."""
    compiled = compile_model(model, engine)
    start = len(source)
    out = loss_fn(compiled(x))
    middle = len(source)
    out.backward()
    return [_plan_of(p) for p in source[start:middle]], [_plan_of(p) for p in source[middle:]]


def compare_backward(model: torch.nn.Module, x: torch.Tensor,
                     loss_fn: Callable = lambda y: y.square().sum(),
                     engine: str = "mtia_lab") -> BackwardComparison:
    """One training step of copies of `model` on `x`: eagerly (the reference), compiled with
    AOTAutograd's backward, and compiled with compiled autograd's."""
    source = _plans_source(engine)
    eager = copy.deepcopy(model)
    _step(eager, x, loss_fn)
    reference = _grads(eager)

    torch.compiler.reset()
    aot = copy.deepcopy(model)
    aot_forward, aot_backward = _compiled_step(aot, x, loss_fn, engine, source)

    torch.compiler.reset()
    _compat.reset_compiled_autograd()
    ca = copy.deepcopy(model)
    captures = _compat.compiled_autograd_captures()
    devices: list[str] = []
    with _compat.compiled_autograd(backend_for(engine, devices)):
        ca_forward, ca_backward = _compiled_step(ca, x, loss_fn, engine, source)
    return BackwardComparison(
        engine, aot_forward, aot_backward, ca_forward, ca_backward,
        max_difference(_grads(aot), reference), max_difference(_grads(ca), reference),
        _compat.compiled_autograd_captures() - captures,
        {d: devices.count(d) for d in sorted(set(devices))})


@dataclass
class Accumulation:
    """Gradient accumulation over micro-batches under compiled autograd."""

    micro_batches: int
    captures: list[int] = field(default_factory=list)  # new captures at each micro-batch
    grad_error: float = 0.0  # against the same accumulation run eagerly

    def to_text(self) -> str:
        steps = ", ".join(f"{i}: {'captured' if n else 'reused'}"
                          for i, n in enumerate(self.captures))
        return (f"gradient accumulation over {self.micro_batches} micro-batches under compiled "
                f"autograd: {steps}; max |grad - eager| {self.grad_error:.2e}")

    def __repr__(self) -> str:
        return self.to_text()


def accumulate(model: torch.nn.Module, batches: list[torch.Tensor],
               loss_fn: Callable = lambda y: y.square().sum(),
               engine: str = "mtia_lab") -> Accumulation:
    """Sum the gradients of len(batches) micro-batches (loss / n each), compiled forward and
    compiled autograd's backward, against the same eagerly. Says, per micro-batch, whether
    compiled autograd captured a new graph (the first backward sees no .grad yet; later ones
    accumulate into it: a different autograd graph) or reused one."""
    if not batches:
        raise ValueError("accumulate() needs at least one micro-batch")
    n = len(batches)
    eager = copy.deepcopy(model)
    for mb in batches:
        (loss_fn(eager(mb)) / n).backward()
    torch.compiler.reset()
    _compat.reset_compiled_autograd()
    ca = copy.deepcopy(model)
    compiled = compile_model(ca, engine)
    result = Accumulation(n)
    with _compat.compiled_autograd(backend_for(engine)):
        for mb in batches:
            before = _compat.compiled_autograd_captures()
            (loss_fn(compiled(mb)) / n).backward()
            result.captures.append(_compat.compiled_autograd_captures() - before)
    result.grad_error = max_difference(_grads(ca), _grads(eager))
    return result
