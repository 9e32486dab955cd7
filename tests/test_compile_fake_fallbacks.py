"""Ops without a meta kernel (geqrf, histogram, histogramdd) under torch.compile: Dynamo's fake
tensors run them for real on zeros of their device with the Python key off, which a Python
device cannot serve (mtia_lab/_compat.py, `run_fake_fallbacks_on_host`)."""

import pytest
import torch
from torch.utils import _pytree as pytree

import mtia_lab  # noqa: F401

DEVICE = "mtia_sim"
OPS = {
    "geqrf": (torch.geqrf, (5, 5)),
    "histogram": (lambda t: torch.histogram(t, 4), (5, 5)),
    "histogramdd": (lambda t: torch.histogramdd(t, [3, 3]), (6, 2)),
}


@pytest.mark.parametrize("backend", ["eager", "mtia_lab", "inductor"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_an_op_without_a_meta_kernel_compiles_and_matches_cpu(name, backend):
    fn, shape = OPS[name]
    torch.manual_seed(0)
    x = torch.randn(*shape)
    torch.compiler.reset()
    got = torch.compile(fn, backend=backend)(x.to(DEVICE))
    assert all(t.device.type == DEVICE for t in pytree.tree_leaves(got))
    torch.testing.assert_close(pytree.tree_map(lambda t: t.cpu(), got), fn(x))
