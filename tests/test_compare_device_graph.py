"""The comparison hands Inductor a copy of our aten graph on the device (compare/plans.py
`_device_graph`): graphs that our backend and Inductor each compile must compile there too.
Both cases came from models (held-out-9's NOT_COMPILED: SuperGlue's keypoint scale, Phi-3's
rotary) that crashed the comparison before it printed anything."""

import torch
from fidelity_checks import assert_aligned, assert_matches_eager

import mtia_lab  # noqa: F401
from mtia_lab.compare.fidelity import fidelity_rows
from mtia_lab.compiler.aot import COMPILED


def _scale_by_constant(x):
    return x - torch.tensor([2.0, 3.0], device=x.device)  # a tensor constant of the graph


def _empty_cat_then_matmul(q):
    q = q.transpose(1, 2)  # attention's heads: transposed strides
    rotated = q * 2
    joined = torch.cat([rotated, q[..., :0]], dim=-1)  # a pass-through part of size 0
    return joined @ joined.transpose(-1, -2)  # bmm's reshape is a view in our graph


def test_a_host_tensor_constant_goes_to_the_device_in_inductors_copy_only():
    start = len(COMPILED)
    rows = fidelity_rows({"constant": (_scale_by_constant, lambda: [torch.randn(4, 2)])})
    assert_aligned(rows)
    assert_matches_eager(rows)
    constants = [getattr(COMPILED[start].gm, n.target) for n in COMPILED[start].gm.graph.nodes
                 if n.op == "get_attr"]
    assert constants and all(c.device.type == "cpu" for c in constants)  # ours untouched


def test_a_view_of_a_cat_whose_strides_inductor_decomposes_otherwise_is_compiled():
    rows = fidelity_rows({"empty_cat": (_empty_cat_then_matmul,
                                        lambda: [torch.randn(2, 8, 4, 8)])})
    assert_aligned(rows)
    assert_matches_eager(rows)
