"""Higher-order gradients on the device: a Hessian-vector product, eager and compiled.

hvp(f, w, v) = d/dw <grad f(w), v>. `hvp_check` computes it on w's device by every route
below, eagerly and compiled (either compile path: `backend="mtia_lab"` or `"inductor"`),
against the double-backward HVP on CPU:

- "double backward": `torch.autograd.grad(..., create_graph=True)` twice. Compiled, `f` is
  compiled and autograd differentiates through its compiled backward -- which PyTorch does
  not support: AOTAutograd's backward is not differentiable ("torch.compile does not currently
  support higher order gradients", or "does not currently support double backward"), and the
  teaching backend's gradient comes back without its graph, which `check_twice_differentiable`
  refuses rather than return a silently wrong Hessian;
- "autograd.functional": `torch.autograd.functional.hvp(f, w, v)`, PyTorch's helper (a double
  backward through its "double-backward trick"); compiled: `f` compiled, refused as above;
- "compiled autograd": the same double backward with `f` eager, under compiled autograd: each
  backward pass (the first with create_graph=True) is captured and compiled as a graph of its
  own; the second differentiates through the first's compiled graph, which was compiled with
  autograd (its graph kept) because create_graph keeps grad mode on;
- "jvp of grad" (forward-over-reverse, `torch.func.jvp(torch.func.grad(f), (w,), (v,))`) and
  "vjp of grad" (reverse-over-reverse): compiled, the whole HVP function goes to
  `torch.compile(fullgraph=True)`: Dynamo traces functorch's transforms, and one forward graph
  computes the HVP (no autograd at run time) -- the route PyTorch supports for compiled
  higher-order derivatives.

Each compiled result carries the device plans its compiles made (kernels, simulated time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import _compat


class NotTwiceDifferentiable(RuntimeError):
    """The gradient came back without a graph: a second derivative through it would be
    silently wrong (zero where it should not be)."""


def _second_connected(f: Callable, w: torch.Tensor) -> bool:
    """Does grad f(w), taken with create_graph=True, depend on w through autograd?"""
    w = w.detach().requires_grad_(True)
    (grad,) = torch.autograd.grad(f(w), w, create_graph=True)
    if not grad.requires_grad:
        return False
    (second,) = torch.autograd.grad(grad, w, torch.ones_like(grad), allow_unused=True)
    return second is not None


def check_twice_differentiable(compiled: Callable, f: Callable, w: torch.Tensor) -> None:
    """Refuse a compiled f whose gradient lost its graph where f's eager gradient has one."""
    if _second_connected(f, w) and not _second_connected(compiled, w):
        raise NotTwiceDifferentiable(
            "the compiled gradient came back without its graph (create_graph=True): this "
            "backend's compiled backward is not differentiable, so a Hessian-vector product "
            "through it would be silently wrong. Compile the whole HVP instead "
            "(torch.func.jvp of torch.func.grad), or use compiled autograd")


def hvp_double_backward(f: Callable, w: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    w = w.detach().requires_grad_(True)
    (grad,) = torch.autograd.grad(f(w), w, create_graph=True)
    (hv,) = torch.autograd.grad(grad, w, v)
    return hv


def hvp_functional(f: Callable, w: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.autograd.functional.hvp(f, w.detach(), v)[1]


def hvp_forward_over_reverse(f: Callable, w: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    from torch.func import grad, jvp

    return jvp(grad(f), (w,), (v,))[1]


def hvp_reverse_over_reverse(f: Callable, w: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    from torch.func import grad, vjp

    return vjp(grad(f), w)[1](v)[0]


@dataclass(frozen=True)
class HvpResult:
    route: str  # one of ROUTES
    compiled: bool
    error: float | None  # max |device - CPU|; None when it could not run
    refusal: str = ""  # why it could not run (the exception's first line)
    kernels: int = 0  # compiled: kernels of the device plans its compiles made
    time_us: float = 0.0  # compiled: their simulated time

    def __str__(self) -> str:
        how = f"{self.route}{', compiled' if self.compiled else ''}"
        if self.error is None:
            return f"{how}: not supported -- {self.refusal}"
        plans = (f" ({self.kernels} kernel{'s' * (self.kernels != 1)}, {self.time_us:.2f} "
                 "simulated us)" if self.compiled else "")
        return f"{how}: max |device - CPU| = {self.error:.2e}{plans}"


def _compiled_f(route_fn: Callable, backend: str) -> Callable:
    """The compiled variant of a double-backward route: `f` compiled, autograd through it."""

    def run(f, w, v):
        g = torch.compile(f, backend=backend)
        check_twice_differentiable(g, f, w)
        return route_fn(g, w, v)

    return run


def _whole_compiled(route_fn: Callable, backend: str) -> Callable:
    """The compiled variant of a torch.func route: the whole HVP in one Dynamo graph."""
    return lambda f, w, v: torch.compile(
        lambda w, v: route_fn(f, w, v), backend=backend, fullgraph=True)(w, v)


def _under_compiled_autograd(backend: str) -> Callable:
    def run(f, w, v):
        from .backward import backend_for

        _compat.reset_compiled_autograd()
        with _compat.compiled_autograd(backend_for(backend)):
            return hvp_double_backward(f, w, v)

    return run


def routes(backend: str) -> list[tuple[str, bool, Callable]]:
    """(route, compiled, fn(f, w, v)) for every route `hvp_check` tries."""
    return [
        ("double backward", False, hvp_double_backward),
        ("double backward", True, _compiled_f(hvp_double_backward, backend)),
        ("autograd.functional", False, hvp_functional),
        ("autograd.functional", True, _compiled_f(hvp_functional, backend)),
        ("compiled autograd", True, _under_compiled_autograd(backend)),
        ("jvp of grad", False, hvp_forward_over_reverse),
        ("jvp of grad", True, _whole_compiled(hvp_forward_over_reverse, backend)),
        ("vjp of grad", False, hvp_reverse_over_reverse),
        ("vjp of grad", True, _whole_compiled(hvp_reverse_over_reverse, backend)),
    ]


ROUTES = ("double backward", "autograd.functional", "compiled autograd", "jvp of grad",
          "vjp of grad")


def hvp_check(f: Callable, w: torch.Tensor, v: torch.Tensor,
              backend: str = "mtia_lab") -> list[HvpResult]:
    """The HVP of f at w along v, on w's device, by each route, eager and compiled with
    `backend` ("mtia_lab": the teaching scheduler; "inductor": real Inductor for the device),
    against the double-backward HVP on CPU."""
    from .backward import _plan_of, _plans_source

    if backend not in ("mtia_lab", "inductor"):
        raise ValueError(f"backend={backend!r}: choose 'mtia_lab' (the teaching scheduler) or "
                         "'inductor' (real TorchInductor for the device)")
    reference = hvp_double_backward(f, w.detach().cpu(), v.cpu())
    plans = _plans_source(backend)
    results = []
    for route, compiled, fn in routes(backend):
        torch.compiler.reset()
        start = len(plans)
        try:
            out = fn(f, w, v)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            results.append(HvpResult(route, compiled, None, first[:300]))
            continue
        made = [_plan_of(p) for p in plans[start:]] if compiled else []
        error = float((out.detach().cpu() - reference).abs().max())
        results.append(HvpResult(route, compiled, error, "",
                                 sum(p.kernel_count for p in made),
                                 sum(p.after.time_us for p in made)))
    return results
