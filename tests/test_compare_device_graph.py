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


def _cat_onto_empty_keys(x):
    """transformers' DynamicLayer: the cache's keys start as an empty tensor constant."""
    keys = torch.tensor([], dtype=x.dtype, device=x.device)
    return torch.cat([keys, x], dim=-2) * 2


def test_an_empty_tensor_constant_reaches_inductors_copy_as_an_empty_device_tensor():
    """Dynamo cannot trace an empty device tensor constant (its fake copy resizes a PrivateUse1
    storage): the copy makes it with aten.empty on the device instead; ours keeps its own."""
    start = len(COMPILED)
    rows = fidelity_rows({"empty_keys": (_cat_onto_empty_keys,
                                         lambda: [torch.randn(2, 4, 8)])})
    assert_aligned(rows)
    assert_matches_eager(rows)
    constants = [getattr(COMPILED[start].gm, n.target) for n in COMPILED[start].gm.graph.nodes
                 if n.op == "get_attr"]
    assert [c.shape for c in constants] == [(0,)] and constants[0].device.type == "cpu"


def test_a_view_of_a_cat_whose_strides_inductor_decomposes_otherwise_is_compiled():
    rows = fidelity_rows({"empty_cat": (_empty_cat_then_matmul,
                                        lambda: [torch.randn(2, 8, 4, 8)])})
    assert_aligned(rows)
    assert_matches_eager(rows)


def _matmul_then_relu(x, w):
    return (x @ w).relu() * 2


def test_a_compiled_function_runs_another_plan_of_its_graph_without_a_second_trace():
    from mtia_lab.compiler import config
    from mtia_lab.compiler.codegen import generate
    from mtia_lab.compiler.scheduler import schedule

    torch.compiler.reset()
    compiled_fn = torch.compile(_matmul_then_relu, backend="mtia_lab", fullgraph=True)
    x, w = torch.randn(8, 16).to("mtia_sim"), torch.randn(16, 4).to("mtia_sim")
    start = len(COMPILED)
    compiled_fn(x, w)
    compiled = COMPILED[start]
    with config.patch(matmul_templates=False):  # the matmul an extern call: one more kernel
        plain = schedule(compiled.plan.ir, "plain")
    assert plain.kernel_count == compiled.plan.kernel_count + 1
    runner = compiled.runner
    with runner.running(generate(plain, plain.ir)):
        got = compiled_fn(x, w)
        assert runner.launches == plain.kernel_count  # the other plan's kernels ran
    assert len(COMPILED) == start + 1  # no second trace
    assert runner.program is compiled.program and runner.launches == compiled.plan.kernel_count
    torch.testing.assert_close(got.cpu(), _matmul_then_relu(x.cpu(), w.cpu()))
