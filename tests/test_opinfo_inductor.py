"""Both compile paths on mtia_sim against the CPU, on PyTorch's own OpInfo samples.

Each op's float32 samples run eagerly on the CPU and compiled by `torch.compile` (real
Inductor, and our backend "mtia_lab"; static shapes) on the device. Where Inductor's answer
differs, CPU Inductor decides: an answer Inductor gives on the CPU too (the variance of one
element: 0 where eager says NaN) is Inductor's, not the device's; ours must match eager.
A plain run checks the families test_opinfo.py names and the ops that reach a
device-library function; the `slow` tier sweeps every op of op_db. The sweep found silent wrong
values here (bfloat16 casts cut toward zero, pow of a negative base) and ops that did not
compile (empty inputs, ops without a meta kernel, non-blocking host copies); in ours, a
crash on a 0-dim logsumexp.
"""

from __future__ import annotations

import pytest
import torch
from test_inductor_libdevice import OPS as LIBDEVICE_OPS
from test_opinfo import FALLBACK, NATIVE
from torch.utils import _pytree as pytree

import mtia_lab  # noqa: F401
from mtia_lab._compat import opinfo_db
from mtia_lab.testing.opinfo import device_sample, in_device_conventions

DEVICE = "mtia_sim"
TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}  # decompositions sum in another order than eager
# Ops that do not compile for the device, each with why; the test fails if one starts to.
# By backend: "*" for both.
KNOWN = {"*": {
    "sparse.sampled_addmm": "a sparse CSR result: mtia_sim stores dense and COO tensors only",
    "sparse.mm.reduce": "a sparse CSR result: mtia_sim stores dense and COO tensors only",
    "to_sparse": "a sparse COO fake tensor on the device: Dynamo cannot make one",
}}
# Ops left out for one backend, with why: their result depends on what ran before them in the
# process, so no mark can say whether they pass.
SKIPPED = {"inductor": {
    "as_strided.partial_views": "Inductor's as_strided of an input that is a view of a larger "
                                "storage reached past the device copy's storage (setStorage out "
                                "of bounds) after other tests, not alone: not understood yet",
}}
EVERY_RUN = sorted({*NATIVE, *FALLBACK, *LIBDEVICE_OPS, "logsumexp"} - set(KNOWN["*"]))


def _ops(names=None) -> list:
    ops = [o for o in opinfo_db() if torch.float32 in o.supported_dtypes("cpu")]
    if names is not None:
        ops = [o for o in ops if _name(o) in names]
    return ops


def _name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _to(device, value):
    return pytree.tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, value)


def _compiled(op, sample, device, backend):
    torch.compiler.reset()
    value, args, kwargs = (device_sample(sample, _name(op)) if device == DEVICE else
                           (sample.input, sample.args, sample.kwargs))
    out = torch.compile(op.op, backend=backend, dynamic=False)(value, *args, **kwargs)
    return _to("cpu", out)


def _values_vary(op, sample) -> bool:
    """Random or uninitialised results (`randn`, `empty`): compared on shape and dtype only."""
    if op.has_nondeterministic_output:
        return True
    runs = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        runs.append(op.op(sample.input, *sample.args, **sample.kwargs))
    return bool(_close(*runs))


def _shapes(value):
    return pytree.tree_map(lambda t: (t.shape, t.dtype) if isinstance(t, torch.Tensor) else t,
                           value)


def _close(got, expected) -> str:
    try:
        torch.testing.assert_close(got, expected, equal_nan=True, check_device=False,
                                   **TOLERANCE)
    except (AssertionError, TypeError, ValueError) as error:
        return str(error)
    return ""


def check(op, max_samples: int, backend: str = "inductor") -> None:
    torch.manual_seed(0)
    for sample in list(op.sample_inputs("cpu", torch.float32))[:max_samples]:
        try:
            torch.manual_seed(0)
            expected = in_device_conventions(  # BatchNorm's eval statistics, as on CUDA
                _name(op), sample, op.op(sample.input, *sample.args, **sample.kwargs))
        except Exception:  # noqa: BLE001  the CPU refuses this sample: nothing to compare
            continue
        torch.manual_seed(0)
        got = _compiled(op, sample, DEVICE, backend)
        if _values_vary(op, sample):
            assert _shapes(got) == _shapes(expected), f"{_name(op)} on {sample}"
            continue
        if (why := _close(got, expected)) and (
                backend != "inductor" or _close(got, _compiled(op, sample, "cpu", backend))):
            raise AssertionError(f"{_name(op)} on {sample}: {backend} on the device differs "
                                 f"from CPU eager (and CPU Inductor): {why}")


def _params(names=None, slow=False):
    params = []
    for backend in ("inductor", "mtia_lab"):
        known = {**KNOWN["*"], **KNOWN.get(backend, {})}
        for op in _ops(names):
            marks = [pytest.mark.slow] if slow else []
            if _name(op) in known:
                marks.append(pytest.mark.xfail(strict=True, reason=known[_name(op)]))
            if _name(op) in SKIPPED.get(backend, {}):
                marks.append(pytest.mark.skip(reason=SKIPPED[backend][_name(op)]))
            params.append(pytest.param(backend, op, id=f"{backend}-{_name(op)}", marks=marks))
    return params


@pytest.mark.parametrize(("backend", "op"), _params(EVERY_RUN))
def test_both_compile_paths_on_the_device_match_cpu_on_the_first_sample(backend, op):
    check(op, max_samples=1, backend=backend)


@pytest.mark.parametrize(("backend", "op"), _params(slow=True))
def test_both_compile_paths_on_the_device_match_cpu_on_every_op(backend, op):
    check(op, max_samples=5, backend=backend)
