"""Inductor compiling for mtia_sim leaves Inductor unchanged for every other device.

A notebook compares CPU and device compiles side by side: CPU Inductor must keep writing its
C++ kernels with its own lowerings (mm's `tuned_mm`...) whatever the device compiled before,
and the device's keep-list fallbacks (layer norm as one ATen call) must be gone once its
compile ends. C++ compiles are slow here, so the graphs are tiny and few. Whether Triton was
imported before mtia_lab or after must not matter either (fresh interpreters).
"""

import pytest
import torch
import torch.nn.functional as F
from fresh_python import run_python

from mtia_lab.inductor import _compat

DEVICE = "mtia_sim"
_LAYER_NORM_CALL = "torch.ops.aten.native_layer_norm.default("


def _matmul_relu(a, w):
    return (a @ w).relu() + 1


def _linear_norm(a, w, b):
    return F.layer_norm(torch.addmm(b, a, w).relu(), (w.shape[1],))


def _cpu_compile(fn, *args):
    """fn compiled by CPU Inductor (fresh caches): its result and generated code."""
    torch.compiler.reset()
    with _compat.fresh_inductor_cache():
        return _compat.run_and_get_code(torch.compile(fn, dynamic=False), *args)


def _assert_cpu_code(code: list[str]) -> None:
    source = "\n".join(code)
    assert "cpp_fused" in source, "CPU Inductor writes C++ kernels"
    assert "@triton.jit" not in source and "triton_" not in source


def test_cpu_and_device_compiles_interleave_in_one_process():
    torch.manual_seed(0)
    a, w, b = torch.randn(4, 8), torch.randn(8, 8), torch.randn(8)

    out, code = _cpu_compile(_matmul_relu, a, w)  # CPU first
    _assert_cpu_code(code)
    torch.testing.assert_close(out, _matmul_relu(a, w))

    torch.compiler.reset()  # then the device: mm, addmm and the layer-norm fallback
    args = [t.to(DEVICE) for t in (a, w, b)]
    dev, dev_code = _compat.run_and_get_code(torch.compile(_linear_norm, dynamic=False), *args)
    assert "@triton.jit" in "\n".join(dev_code)
    assert _LAYER_NORM_CALL in "\n".join(dev_code)  # kept whole (an ATen call), as on MTIA
    torch.testing.assert_close(dev.cpu(), _linear_norm(a, w, b), rtol=1e-4, atol=1e-5)

    out, code = _cpu_compile(_linear_norm, a, w, b)  # CPU again: mm, addmm, layer norm
    _assert_cpu_code(code)
    assert _LAYER_NORM_CALL not in "\n".join(code)  # fused in C++, as CPU Inductor does
    torch.testing.assert_close(out, _linear_norm(a, w, b), rtol=1e-4, atol=1e-5)


def test_a_device_compile_leaves_inductors_tables_as_they_were():
    """Forward and backward (layer norm and its backward get temporary fallbacks)."""
    torch.manual_seed(0)
    host = [torch.randn(*s, requires_grad=True) for s in ((4, 8), (8, 8), (8,))]
    dev = [t.detach().to(DEVICE).requires_grad_() for t in host]
    before = _compat.lowering_tables()
    torch.compiler.reset()
    torch.compile(_linear_norm, dynamic=False)(*dev).sum().backward()
    after = _compat.lowering_tables()
    assert after.keys() == before.keys()
    for name in before:
        assert after[name] == before[name], f"Inductor's {name} changed"
    _linear_norm(*host).sum().backward()
    for d, h in zip(dev, host, strict=True):
        torch.testing.assert_close(d.grad.cpu(), h.grad, rtol=1e-4, atol=1e-5)


_IMPORT_ORDER = """
import importlib, os
assert "TRITON_INTERPRET" not in os.environ  # the switch comes from mtia_lab, or too late
importlib.import_module({before!r})
import triton.language as tl
from triton.runtime.jit import JITFunction
assert isinstance(tl.sum, JITFunction)  # Triton's library made in compiled mode
import torch
import mtia_lab
x = torch.randn(8, 16)
fn = lambda t: torch.softmax(t * 2, -1).sum(0)  # reductions call Triton's library (tl.max...)
out = torch.compile(fn, dynamic=False)(x.to("mtia_sim"))
torch.testing.assert_close(out.cpu(), fn(x))
print("ok")
"""


# mtia_lab first is the order of every other test process (conftest.py imports it first).
@pytest.mark.parametrize("before", ["triton", "torch._inductor"])
def test_triton_imported_before_mtia_lab_still_runs_device_kernels(before):
    done = run_python(_IMPORT_ORDER.format(before=before), unset=("TRITON_INTERPRET",))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "ok"
