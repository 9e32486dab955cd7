"""Inductor's own plan for mtia_sim as a FusionPlan, and the two seed guardrails on Inductor.

Every number asserted here comes from Inductor's scheduler (its decisions, its kernels, its
Triton source); the tests check that the guardrails change Inductor's plan as its decisions say.
"""

import pytest
import torch
import torch.nn.functional as F

from mtia_lab.compiler import FusionPlan, FusionSplitError
from mtia_lab.inductor import assert_single_kernel, inductor_plan

torch.manual_seed(0)
ARGS = [torch.randn(8, 32) for _ in range(4)]


def chain(a, b, c, d):
    x = a * b + c
    return x, (x.relu() * d).sum(-1)


def four(a, b, c, d):
    return a.sin() + 1, b.cos() * 2, c.exp() - 1, d.relu()


def norm(x, w, b):
    return F.layer_norm(x, (32,), w, b).relu()


@pytest.fixture(scope="module")
def chain_plans():
    return (inductor_plan(chain, *ARGS),
            inductor_plan(chain, *ARGS, config={"max_fusion_unique_io_buffers": 3}))


@pytest.fixture(scope="module")
def combo_plans():
    return (inductor_plan(four, *ARGS, config={"combo_kernels": True}),
            inductor_plan(four, *ARGS, config={"combo_kernels": True,
                                               "combo_kernel_max_num_args": 5}))


def test_plan_is_the_project_record_with_node_identity(chain_plans):
    plan = chain_plans[0]
    assert isinstance(plan, FusionPlan) and plan.settings["engine"] == "inductor"
    gm_nodes = {n.name for n in plan.ir.gm.graph.nodes if n.op == "call_function"}
    homes = [n for g in plan.groups for n in g.nodes]
    assert len(homes) == len(set(homes))  # each aten node in exactly one kernel
    assert set(homes) <= gm_nodes and {"mul", "add", "relu", "sum_1"} <= set(homes)
    assert plan.kernel_count == 1 and plan.before.kernels == 2
    fused = [d for d in plan.decisions if d.fused]
    assert fused and fused[0].first == ("mul", "add")
    name = plan.ir.kernel_names[0]
    assert f"def {name}(" in plan.ir.source(name)


def test_unique_io_guardrail_refuses_the_fusion_inductor_made(chain_plans):
    default, lowered = chain_plans
    assert lowered.settings["max_fusion_unique_io_buffers"] == 3
    assert lowered.kernel_count == default.kernel_count + 1
    refused = [d for d in lowered.refusals() if d.rule == "max_fusion_unique_io_buffers"]
    assert refused, [str(d) for d in lowered.decisions]
    d = refused[0]
    assert d.first == ("mul", "add") and "relu" in d.second
    assert "fusion_prevent_too_many_reads_and_writes" in d.reason  # Inductor's own text
    assert "unique I/O buffers > max_fusion_unique_io_buffers=3" in d.reason
    # the same pair was fused under the default: the guardrail flipped it
    assert any(x.fused and x.first == d.first for x in default.decisions)
    # and the Triton source says so: two kernels now, one before
    assert len(set(lowered.ir.kernel_names.values())) == 2
    assert len(set(default.ir.kernel_names.values())) == 1


def test_combo_kernel_max_num_args_splits_a_combo_kernel(combo_plans):
    whole, split = combo_plans
    assert whole.combos == [(0, 1, 2, 3)] and whole.kernel_count == 1
    assert len(split.combos) == 2 and split.kernel_count == 2
    refused = [d for d in split.decisions if d.rule == "combo_kernel_max_num_args"]
    assert len(refused) == 1 and "> combo_kernel_max_num_args=5" in refused[0].reason
    names = split.ir.kernel_names
    first, second = {names[i] for i in split.combos[0]}, {names[i] for i in split.combos[1]}
    assert len(first) == len(second) == 1 and first != second  # two launches in the source
    for name in first | second:
        assert f"def {name}(" in split.ir.source(name)


def test_layer_norm_keep_list_on_and_off():
    args = [torch.randn(4, 32), torch.randn(32), torch.randn(32)]
    kept = inductor_plan(norm, *args)
    decomposed = inductor_plan(norm, *args, keep=False)
    kept_ops = {a for g in kept.groups for a in g.aten_nodes}
    assert any("native_layer_norm" in a for a in kept_ops)
    assert [g.kind for g in kept.groups if any("layer_norm" in a for a in g.aten_nodes)] == \
        ["extern"]
    assert not any("layer_norm" in a for g in decomposed.groups for a in g.aten_nodes)
    assert {g.kind for g in decomposed.groups} == {"reduction"}  # Inductor's own Triton


def test_assert_single_kernel_on_inductors_plan():
    out = assert_single_kernel(chain, *ARGS)
    torch.testing.assert_close(out[1].cpu(), chain(*ARGS)[1])
    with pytest.raises(FusionSplitError, match="max_fusion_unique_io_buffers=3"):
        assert_single_kernel(chain, *ARGS, config={"max_fusion_unique_io_buffers": 3})


def test_views_draw_inductors_plan(chain_plans):
    from mtia_lab.viz import fusion_graph

    text = fusion_graph(chain_plans[1])._repr_mimebundle_()["text/plain"]
    assert "max_fusion_unique_io_buffers" in text


def test_playground_switches_to_inductor_and_moves_its_own_config():
    from mtia_lab.viz import playground

    ours = playground(chain, *ARGS)
    pg = ours.switch("inductor")
    assert pg.engine == "inductor" and pg.settings["max_fusion_unique_io_buffers"] is None
    assert pg.plan.kernel_count == 1
    pg.set(max_fusion_unique_io_buffers="3")
    assert pg.plan.kernel_count == 2 and pg.plan.settings["engine"] == "inductor"
    (before, after), = pg.flipped
    assert before.fused and not after.fused and after.rule == "max_fusion_unique_io_buffers"
    assert "TorchInductor's scheduler" in pg.to_text()
    widget = pg.widget(show_graph=False)
    assert set(widget.controls) == set(pg.controls) and widget.engine.value == "inductor"
    widget.engine.value = "ours"
    assert widget.playground.engine == "ours" and "on_chip_memory_budget" in widget.controls
