"""Higher-order gradients on the device: Hessian-vector products, eager and compiled."""

import pytest
import torch

from mtia_lab.instruments.higher_order import hvp_check

DEV = "mtia_sim:0"


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


def f(w):
    return (w.sin() * w).sum() + (w @ w) ** 2


def test_hessian_vector_products_on_the_device_match_cpu_and_compiled_ones_refuse():
    torch.manual_seed(0)
    w, v = torch.randn(8, device=DEV), torch.randn(8, device=DEV)
    results = {(r.route, r.compiled): r for r in hvp_check(f, w, v)}
    for route in ("double backward", "autograd.functional"):
        assert results[(route, False)].error < 1e-4
        # The teaching backend's compiled backward is not differentiable: refused, never a
        # silently wrong Hessian (autograd.functional would otherwise return one).
        compiled = results[(route, True)]
        assert compiled.error is None and "not differentiable" in compiled.refusal


def test_real_inductor_refuses_a_double_backward_through_its_compiled_graph():
    torch.manual_seed(0)
    w, v = torch.randn(8, device=DEV), torch.randn(8, device=DEV)
    results = {(r.route, r.compiled): r for r in hvp_check(f, w, v, backend="inductor")}
    assert results[("double backward", False)].error < 1e-4
    assert "does not currently support double backward" in results[
        ("double backward", True)].refusal
