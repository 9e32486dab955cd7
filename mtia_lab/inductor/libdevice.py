"""`libdevice` for Triton's interpreter: what Inductor's kernels call, on NumPy.

Inductor's kernels call math through `libdevice` (e.g. `libdevice.erf` in GELU). On a GPU those
are calls into the vendor's device library, filled in when Triton compiles; the interpreter
compiles nothing, so the generic `triton.language.extra.libdevice` stubs return None there.
This module stands in for it while kernels run interpreted: functions Triton's own math module
has (erf, exp, log, sqrt, floor...) are Triton's (the interpreter maps them to NumPy); a few
more that Inductor emits are written here from those; anything else raises
`InductorDeviceError` naming the function. A departure on purpose: results can differ from
the CUDA libdevice in the last bits (tanh, expm1, log1p, pow are composed, not library calls).

Must be imported with TRITON_INTERPRET=1 set (its @triton.jit functions are interpreted ones).
"""

from __future__ import annotations

import types

import triton
import triton.language as tl

from . import _compat
from .errors import InductorDeviceError


@triton.jit
def tanh(x):
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


@triton.jit
def expm1(x):
    small = tl.abs(x) < 1e-5
    return tl.where(small, x + 0.5 * x * x, tl.exp(x) - 1.0)


@triton.jit
def log1p(x):
    small = tl.abs(x) < 1e-4
    return tl.where(small, x - 0.5 * x * x, tl.log(1.0 + x))


@triton.jit
def pow(a, b):
    r = tl.exp2(b * tl.log2(tl.abs(a)))
    odd = (b == tl.floor(b)) & ((tl.abs(b) % 2) == 1)
    r = tl.where((a < 0) & odd, -r, r)
    return tl.where(b == 0, 1.0, r)


@triton.jit
def isnan(x):
    return x != x


@triton.jit
def isinf(x):
    return tl.abs(x) == float("inf")


@triton.jit
def signbit(x):
    return x < 0


@triton.jit
def nearbyint(x):
    f = tl.floor(x)
    d = x - f
    even = (f % 2) == 0
    return tl.where(d > 0.5, f + 1.0, tl.where(d < 0.5, f, tl.where(even, f, f + 1.0)))


@triton.jit
def rsqrt(x):
    return tl.rsqrt(x)


_OWN = {"tanh": tanh, "expm1": expm1, "log1p": log1p, "pow": pow, "isnan": isnan,
        "isinf": isinf, "signbit": signbit, "nearbyint": nearbyint, "rint": nearbyint,
        "rsqrt": rsqrt}
_FROM_MATH = {"exp", "exp2", "log", "log2", "cos", "sin", "sqrt", "sqrt_rn", "abs", "fdiv",
              "div_rn", "erf", "floor", "ceil", "fma", "umulhi"}


class _Libdevice(types.ModuleType):
    """Looks functions up at each call: the interpreter patches tl.math while a kernel runs."""

    def __getattr__(self, name: str):
        if name in _OWN:
            return _OWN[name]
        if name in _FROM_MATH:
            return getattr(tl.math, name)
        raise InductorDeviceError(
            f"Inductor's kernel calls libdevice.{name}, which Triton's interpreter cannot run "
            f"on mtia_sim (no device library on the host). Run the op that needs it eagerly "
            f"(torch.compiler.disable) or compile with backend='mtia_lab'.")


LIBDEVICE = _Libdevice("mtia_lab.inductor.libdevice.LIBDEVICE")


def install(helpers_module) -> None:
    """Give Inductor's triton_helpers (which the generated kernels import it from) this one."""
    helpers_module.libdevice = LIBDEVICE
    compat = _compat.inductor_triton_compat()  # Inductor's own compat module
    if compat is not None:
        compat.libdevice = LIBDEVICE
