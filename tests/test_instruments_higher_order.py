"""Higher-order gradients on the device: Hessian-vector products, eager and compiled."""

import pytest
import torch

from mtia_lab.instruments.higher_order import ROUTES, hvp_check

DEV = "mtia_sim:0"


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


def f(w):
    return (w.sin() * w).sum() + (w @ w) ** 2


# Each compiled route PyTorch supports, on the device, against the CPU's double backward: the
# whole HVP traced by Dynamo (forward-over-reverse, reverse-over-reverse), or both backward
# passes captured by compiled autograd.
SUPPORTED = ("compiled autograd", "jvp of grad", "vjp of grad")


# Double backward *through* a compiled f is PyTorch's limit: refused with its reason. The
# teaching backend's gradient has no graph: refused, never a silently wrong Hessian
# (autograd.functional would return one).
REFUSALS = {"inductor": "does not currently support double backward",
            "mtia_lab": "not differentiable"}


@pytest.mark.parametrize("backend", ["mtia_lab", "inductor"])
def test_hessian_vector_products_on_the_device_match_cpu_by_every_supported_route(backend):
    torch.manual_seed(0)
    w, v = torch.randn(8, device=DEV), torch.randn(8, device=DEV)
    results = {(r.route, r.compiled): r for r in hvp_check(f, w, v, backend=backend)}
    assert {route for route, _ in results} == set(ROUTES)
    for route in ROUTES:
        if route != "compiled autograd":  # eager: every route
            assert results[(route, False)].error < 1e-4, results[(route, False)]
    for route in SUPPORTED:
        compiled = results[(route, True)]
        assert compiled.error is not None and compiled.error < 1e-4, compiled
        # compiled for the device: its plans have kernels and simulated time
        assert compiled.kernels > 0 and compiled.time_us > 0, compiled
    for route in ("double backward", "autograd.functional"):
        compiled = results[(route, True)]
        assert compiled.error is None and REFUSALS[backend] in compiled.refusal, compiled


def test_an_unknown_backend_is_refused_by_name():
    w = torch.randn(8, device=DEV)
    with pytest.raises(ValueError, match="backend='tvm'"):
        hvp_check(f, w, w, backend="tvm")
