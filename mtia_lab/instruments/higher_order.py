"""Higher-order gradients on the device: a Hessian-vector product, eager and compiled.

hvp(f, w, v) = d/dw <grad f(w), v>: the gradient of f with `create_graph=True` (so the
gradient itself is differentiable), its dot product with v, then a second backward. Two
routes, both compared with the same on CPU by `hvp_check`:

- "double backward": `torch.autograd.grad(..., create_graph=True)` twice; compiled means the
  forward `f` is compiled (its backward must then be differentiable: AOTAutograd refuses a
  double backward through a compiled graph unless it can trace it; see `hvp_check`);
- "autograd.functional": `torch.autograd.functional.hvp(f, w, v)`, PyTorch's helper (a
  double backward too, through its "double-backward trick"); compiled: f is compiled.

functorch's forward-over-reverse (`torch.func.jvp(torch.func.grad(f), ...)`) is left out on
purpose: on torch 2.13 its transforms over a Python wrapper-subclass device tensor crash the
process (a segmentation fault inside the jvp of grad), which no check here could catch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


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
            "through it would be silently wrong. Compute higher-order gradients eagerly")


def hvp_double_backward(f: Callable, w: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    w = w.detach().requires_grad_(True)
    (grad,) = torch.autograd.grad(f(w), w, create_graph=True)
    (hv,) = torch.autograd.grad(grad, w, v)
    return hv


def hvp_functional(f: Callable, w: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.autograd.functional.hvp(f, w.detach(), v)[1]


@dataclass(frozen=True)
class HvpResult:
    route: str  # "double backward" | "autograd.functional"
    compiled: bool
    error: float | None  # max |device - CPU|; None when it could not run
    refusal: str = ""  # why it could not run (the exception's first line)

    def __str__(self) -> str:
        how = f"{self.route}{', compiled' if self.compiled else ''}"
        if self.error is None:
            return f"{how}: not supported -- {self.refusal}"
        return f"{how}: max |device - CPU| = {self.error:.2e}"


def hvp_check(f: Callable, w: torch.Tensor, v: torch.Tensor,
              backend: str = "mtia_lab") -> list[HvpResult]:
    """The HVP of f at w along v, on w's device, by each route, eager and compiled, against
    the double-backward HVP on CPU."""
    reference = hvp_double_backward(f, w.detach().cpu(), v.cpu())
    results = []
    for route, fn in (("double backward", hvp_double_backward),
                      ("autograd.functional", hvp_functional)):
        for compiled in (False, True):
            torch.compiler.reset()
            try:
                g = torch.compile(f, backend=backend) if compiled else f
                if compiled:
                    check_twice_differentiable(g, f, w)
                out = fn(g, w, v)
                error = float((out.detach().cpu() - reference).abs().max())
                results.append(HvpResult(route, compiled, error))
            except RuntimeError as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                results.append(HvpResult(route, compiled, None, first[:300]))
    return results
