"""Real TorchInductor on mtia_sim against the CPU, on PyTorch's own OpInfo samples.

Each op's float32 samples run eagerly on the CPU and compiled by `torch.compile` (Inductor,
static shapes) on the device. Where the two differ, CPU Inductor decides: an answer Inductor
gives on the CPU too (the variance of one element: 0 where eager says NaN) is Inductor's, not
the device's. A plain run checks the families test_opinfo.py names and the ops that reach a
device-library function; the `slow` tier sweeps every op of op_db. The sweep found silent wrong
values here (bfloat16 casts cut toward zero, pow of a negative base) and ops that did not
compile (empty inputs, ops without a meta kernel, non-blocking host copies).
"""

from __future__ import annotations

import pytest
import torch
from test_inductor_libdevice import OPS as LIBDEVICE_OPS
from test_opinfo import FALLBACK, NATIVE
from torch.utils import _pytree as pytree

import mtia_lab  # noqa: F401
from mtia_lab._compat import opinfo_db

DEVICE = "mtia_sim"
TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}  # decompositions sum in another order than eager
# Ops that do not compile for the device, each with why; the test fails if one starts to.
KNOWN = {
    "sparse.sampled_addmm": "a sparse CSR result: mtia_sim stores dense and COO tensors only",
    "sparse.mm.reduce": "a sparse CSR result: mtia_sim stores dense and COO tensors only",
    "to_sparse": "a sparse COO fake tensor on the device: Dynamo cannot make one",
    "tensor_split": "the sample's index tensor moved to the device (must stay on the host)",
}
EVERY_RUN = sorted({*NATIVE, *FALLBACK, *LIBDEVICE_OPS} - set(KNOWN))


def _ops(names=None) -> list:
    ops = [o for o in opinfo_db() if torch.float32 in o.supported_dtypes("cpu")]
    if names is not None:
        ops = [o for o in ops if _name(o) in names]
    return ops


def _name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _to(device, value):
    return pytree.tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, value)


def _compiled(op, sample, device):
    torch.compiler.reset()
    inputs = _to(device, (sample.input, sample.args, sample.kwargs))
    out = torch.compile(op.op, dynamic=False)(inputs[0], *inputs[1], **inputs[2])
    return _to("cpu", out)


def _close(got, expected) -> str:
    try:
        torch.testing.assert_close(got, expected, equal_nan=True, check_device=False,
                                   **TOLERANCE)
    except (AssertionError, TypeError, ValueError) as error:
        return str(error)
    return ""


def check(op, max_samples: int) -> None:
    torch.manual_seed(0)
    for sample in list(op.sample_inputs("cpu", torch.float32))[:max_samples]:
        try:
            expected = op.op(sample.input, *sample.args, **sample.kwargs)
        except Exception:  # noqa: BLE001  the CPU refuses this sample: nothing to compare
            continue
        got = _compiled(op, sample, DEVICE)
        if (why := _close(got, expected)) and _close(got, _compiled(op, sample, "cpu")):
            raise AssertionError(f"{_name(op)} on {sample}: device Inductor differs from CPU "
                                 f"eager and CPU Inductor: {why}")


def _params(names=None, **marks):
    return [pytest.param(op, id=_name(op), marks=[
        *([pytest.mark.xfail(strict=True, reason=KNOWN[_name(op)])] if _name(op) in KNOWN
          else []), *marks.get("marks", [])]) for op in _ops(names)]


@pytest.mark.parametrize("op", _params(EVERY_RUN))
def test_inductor_on_the_device_matches_cpu_on_the_first_sample(op):
    check(op, max_samples=1)


@pytest.mark.parametrize("op", _params(marks=[pytest.mark.slow]))
def test_inductor_on_the_device_matches_cpu_on_every_op(op):
    check(op, max_samples=5)
