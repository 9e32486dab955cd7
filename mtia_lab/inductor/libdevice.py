"""`libdevice` for Triton's interpreter: what Inductor's kernels call, on NumPy.

Inductor's kernels call math through `libdevice` (e.g. `libdevice.erf` in GELU). On a GPU those
are calls into the vendor's device library, filled in when Triton compiles; the interpreter
compiles nothing, so the generic `triton.language.extra.libdevice` stubs return None there.
This module stands in for it while kernels run interpreted: functions Triton's own math module
has (erf, exp, log, sqrt, floor...) are Triton's (the interpreter maps them to NumPy); a few
tests and roundings are written here from those; every other function Inductor's Triton code
emits (tanh, pow, asinh, lgamma, atan2, erfinv, the Bessel functions...) is PyTorch's own CPU
kernel applied to the block's NumPy data, so it computes what eager computes on the CPU: pow
of a negative base and a fractional exponent is NaN, tanh(1e-8) is 1e-8, -0.0 has its sign
bit. A name outside all three raises `InductorDeviceError` naming the function. A departure on
purpose: results can differ from the CUDA libdevice in the last bits (they are the host's).

Must be imported with TRITON_INTERPRET=1 set (its @triton.jit functions are interpreted ones).
"""

from __future__ import annotations

import functools
import types

import numpy as np
import torch
import triton
import triton.language as tl

from . import _compat
from .errors import InductorDeviceError


@triton.jit
def isnan(x):
    return x != x


@triton.jit
def isinf(x):
    return tl.abs(x) == float("inf")


@triton.jit
def nearbyint(x):
    f = tl.floor(x)
    d = x - f
    even = (f % 2) == 0
    return tl.where(d > 0.5, f + 1.0, tl.where(d < 0.5, f, tl.where(even, f, f + 1.0)))


@triton.jit
def rsqrt(x):
    return tl.rsqrt(x)


_OWN = {"isnan": isnan, "isinf": isinf, "nearbyint": nearbyint,
        "rint": nearbyint, "rsqrt": rsqrt}
_FROM_MATH = {"exp", "exp2", "log", "log2", "cos", "sin", "sqrt", "sqrt_rn", "abs", "fdiv",
              "div_rn", "erf", "floor", "ceil", "fma", "umulhi"}


def _ilogb(x: torch.Tensor) -> torch.Tensor:
    return (torch.frexp(x).exponent - 1).to(torch.int32)


# libdevice name -> (PyTorch's CPU function, the result's dtype or None for the first
# argument's): the functions of torch/_inductor/codegen/triton.py's TritonOverrides.
_FROM_TORCH = {
    "tanh": (torch.tanh, None), "expm1": (torch.expm1, None), "log1p": (torch.log1p, None),
    "pow": (torch.pow, None), "tan": (torch.tan, None), "sinh": (torch.sinh, None),
    "cosh": (torch.cosh, None),
    "asin": (torch.asin, None), "acos": (torch.acos, None), "atan": (torch.atan, None),
    "asinh": (torch.asinh, None), "acosh": (torch.acosh, None), "atanh": (torch.atanh, None),
    "atan2": (torch.atan2, None), "hypot": (torch.hypot, None), "fmod": (torch.fmod, None),
    "copysign": (torch.copysign, None), "nextafter": (torch.nextafter, None),
    "ldexp": (lambda x, e: torch.ldexp(x, e).to(x.dtype), None),
    "log10": (torch.log10, None), "trunc": (torch.trunc, None),
    "lgamma": (torch.lgamma, None), "erfc": (torch.erfc, None),
    "erfcx": (torch.special.erfcx, None), "erfinv": (torch.erfinv, None),
    "fast_tanhf": (torch.tanh, None), "mul_rn": (torch.mul, None),
    "signbit": (torch.signbit, tl.int1), "llrint": (torch.round, tl.int64),
    "ilogb": (_ilogb, tl.int32),
    "j0": (torch.special.bessel_j0, None), "j1": (torch.special.bessel_j1, None),
    "y0": (torch.special.bessel_y0, None), "y1": (torch.special.bessel_y1, None),
    "cyl_bessel_i0": (torch.special.i0, None), "cyl_bessel_i1": (torch.special.i1, None),
}


@functools.cache  # one function per name, not one per call of the kernel
def _torch_elementwise(name: str):
    """An interpreted libdevice function computed by PyTorch's CPU kernel on the operands'
    NumPy data (broadcast as Triton broadcasts them). Program by program it runs at once;
    over the whole grid it is a step of the builder (`create_np`), so that a replayed launch
    (whole_grid/tape.py) computes it again on its own data, not the recorded launch's."""
    fn, out_dtype = _FROM_TORCH[name]

    def call(*args, **_):
        tri = _compat.triton_interpreter()  # its TensorHandle holds a block's NumPy data
        tensors = [a for a in args if isinstance(a, tl.core.tensor)]
        at = [i for i, a in enumerate(args) if isinstance(a, tl.core.tensor)]
        dtype = out_dtype or tensors[0].dtype

        def on_arrays(*arrays):
            values = list(args)
            for i, array in zip(at, arrays, strict=True):
                values[i] = array
            operands = np.broadcast_arrays(*(np.asarray(v) for v in values))
            return fn(*(torch.from_numpy(np.array(a)) for a in operands)).numpy()  # copies

        builder = tri.interpreter_semantic.builder
        handles = [t.handle for t in tensors]
        if hasattr(builder, "create_np"):  # the whole-grid builder, which records its steps
            (handle,) = builder.create_np(on_arrays, (dtype,), *handles)
        else:
            data = on_arrays(*(h.data for h in handles))
            handle = tri.TensorHandle(data.astype(tri._get_np_dtype(dtype), copy=False), dtype)
        # the block's shape, from the operands' types: a whole-grid value's data also has a
        # leading axis of programs, which is no part of the block
        shape = list(np.broadcast_shapes(*(tuple(t.type.shape) if t.type.is_block() else ()
                                           for t in tensors)))
        return tl.core.tensor(handle, tl.block_type(dtype, shape) if shape else dtype)

    call.__name__ = name
    return call


class _Libdevice(types.ModuleType):
    """Looks functions up at each call: the interpreter patches tl.math while a kernel runs."""

    def __getattr__(self, name: str):
        if name in _OWN:
            return _OWN[name]
        if name in _FROM_MATH:
            return getattr(tl.math, name)
        if name in _FROM_TORCH:
            return _torch_elementwise(name)
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
