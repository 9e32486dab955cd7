"""Each fusion rule on a tiny graph: kernel count first, then the decision that made it.

Graphs are traced with make_fx on CPU tensors (no torch.compile): scheduling is pure data.
"""

import pytest
import torch
import torch.nn.functional as F

import mtia_lab  # noqa: F401
from mtia_lab.compiler import Kind, build_ir, config, schedule, trace


def plan_of(fn, *args):
    return schedule(trace(fn, *args), fn.__name__)


def rules_used(plan, fused=True):
    return {d.rule for d in plan.decisions if d.fused is fused}


def x48():
    return torch.randn(4, 8)


def test_kinds_of_aten_ops():
    def f(x, w):
        return F.layer_norm(torch.mm(x, w).relu(), (8,)).sum(-1)

    ir = trace(f, x48(), torch.randn(8, 8))
    kinds = {n.target.split(".")[1]: n.kind for n in ir.nodes}
    assert kinds == {"mm": Kind.TEMPLATE, "relu": Kind.POINTWISE,
                     "native_layer_norm": Kind.EXTERN, "sum": Kind.REDUCTION}
    reduction = next(n for n in ir.nodes if n.kind is Kind.REDUCTION)
    assert (reduction.numel, reduction.rnumel) == (4, 8)
    assert ir.buffers[ir.by_name["mm"].writes[0]].nbytes == 4 * 8 * 4


def test_single_use_pointwise_is_inlined_as_inductor_lowers_it():
    def chain(x):
        return (x * 2).relu() + 1

    plan = plan_of(chain, x48())
    assert plan.kernel_count == 1
    assert rules_used(plan) == {"inlined_while_lowering"}
    assert plan.after.bytes_moved == 2 * 4 * 8 * 4  # read x once, write the result once
    assert plan.before.bytes_moved == 3 * plan.after.bytes_moved


def test_vertical_pointwise_fuses_a_realized_producer():
    def chain(x):
        y = x * 2  # a graph output: realized, so the scheduler (not lowering) fuses it
        return y, y.relu()

    plan = plan_of(chain, x48())
    assert plan.kernel_count == 1
    assert rules_used(plan) == {"vertical_pointwise"}


def test_vertical_pointwise_refuses_different_spaces():
    def sliced(x):
        y = x * 2
        return y, y[:, :4] * 3

    plan = plan_of(sliced, x48())
    assert plan.kernel_count == 2
    refusal = plan.refusals()[0]
    assert refusal.rule == "no_shared_data"  # a slice reads other addresses: Inductor's score 0
    assert "no shared data" in refusal.reason


def test_reduction_with_prologue_and_epilogue():
    def norm(x):
        y = x * x  # returned too: realized, so it is a prologue, not inlined
        return y, y.sum(-1) + 1

    plan = plan_of(norm, x48())
    assert plan.kernel_count == 1
    assert {"reduction_prologue", "reduction_epilogue"} <= rules_used(plan)


def test_reduction_over_outer_dims_fuses_only_once_loops_may_be_reordered():
    def colnorm(x):
        return x - x.mean(0)  # the pointwise loops rows-first, the reduction columns-first

    ir = trace(colnorm, torch.randn(16, 16))
    plan = schedule(ir)
    assert plan.kernel_count == 1
    refused, fused = plan.decisions[0], plan.decisions[-1]
    assert not refused.fused and "reduction over outer dims" in refused.reason
    assert fused.fused and "loop_ordering_after_fusion" in fused.reason
    with config.patch(loop_ordering_after_fusion=False):
        assert schedule(ir).kernel_count == 2


def test_softmax_is_one_kernel():
    plan = plan_of(lambda x: torch.softmax(x, -1), x48())
    assert plan.kernel_count == 1
    assert plan.groups[0].kind == "reduction"


def test_template_takes_pointwise_epilogue_not_prologue():
    def epilogue(a, b):
        return torch.mm(a, b).relu() * 2

    def prologue(a, b):
        return torch.mm(a.relu(), b)

    plan = plan_of(epilogue, x48(), torch.randn(8, 8))
    assert plan.kernel_count == 1
    assert "template_epilogue" in rules_used(plan)
    epilogue_fusion = next(d for d in plan.decisions if d.rule == "template_epilogue")
    assert epilogue_fusion.ours and "(ours)" in str(epilogue_fusion)  # not Inductor's default
    plan = plan_of(prologue, x48(), torch.randn(8, 8))
    assert plan.kernel_count == 2
    assert plan.refusals()[0].rule == "template_epilogue"
    assert "prologue" in plan.refusals()[0].reason


def test_extern_never_fuses():
    def ln(x):
        return F.layer_norm(x.relu(), (8,)) * 2

    plan = plan_of(ln, x48())
    assert plan.kernel_count == 3
    assert {d.rule for d in plan.refusals()} == {"extern_never_fuses"}
    assert all("native_layer_norm" in d.reason for d in plan.refusals())


def test_horizontal_fuses_siblings_sharing_an_input():
    def siblings(x):
        return x.sin(), x.cos()

    plan = plan_of(siblings, x48())
    assert plan.kernel_count == 1
    assert rules_used(plan) == {"horizontal"}
    assert plan.after.bytes_moved == 3 * 128  # x read once, two outputs


def test_fusion_never_creates_a_cycle():
    def diamond(x):
        y = x.relu()
        return y + F.layer_norm(y, (8,))  # relu -> layer_norm (extern) -> add

    plan = plan_of(diamond, x48())
    assert plan.kernel_count == 3
    assert "would_create_cycle" in {d.rule for d in plan.refusals()}


def test_combo_kernels_pack_independent_kernels_only_when_enabled():
    def independent(a, b):
        return a.sin(), b.cos()

    assert plan_of(independent, x48(), x48()).kernel_count == 2
    with config.patch(combo_kernels=True):
        plan = plan_of(independent, x48(), x48())
    assert len(plan.groups) == 2 and plan.kernel_count == 1  # two kernels, one launch
    assert plan.combos == [(0, 1)]
    assert plan.after.time_us < plan.before.time_us


def test_candidates_are_fused_best_score_first():
    def two_consumers(x):
        y = x * 2  # 128 bytes, read by both consumers
        return (y + 1), (y[:2] * 3)

    plan = plan_of(two_consumers, x48())
    first = plan.decisions[0]
    assert first.score == max(d.score for d in plan.decisions)


@pytest.mark.parametrize("fn", [lambda x: x.relu() * 2, lambda x: torch.softmax(x, -1)])
def test_decisions_name_aten_nodes_and_user_source(fn):
    plan = plan_of(fn, x48())
    assert plan.decisions
    for decision in plan.decisions:
        assert all(": aten." in a for a in decision.aten_nodes)
        assert set(decision.nodes) <= {n for g in plan.groups for n in g.nodes}


def test_factory_fuses_into_its_consumer_a_scatter():
    def scatter(src, index):
        return torch.zeros(4, 16).scatter_add(1, index, src)

    plan = plan_of(scatter, x48(), torch.randint(0, 16, (4, 8)))
    assert plan.kernel_count == 1
    assert rules_used(plan) == {"inlined_while_lowering"}
    assert plan.after.bytes_moved == plan.before.bytes_moved - 2 * 4 * 16 * 4  # no zeros buffer


# ---- ops Inductor lowers to fusible code, and Inductor's other checks ----------------------

@pytest.mark.parametrize("name, fn, args", [
    ("embedding", lambda ids, t: F.embedding(ids, t).sum(1) * 2,
     (torch.randint(0, 10, (4, 16)), torch.randn(10, 8))),
    ("gather", lambda x, i: x.exp().gather(1, i).neg(), (x48(), torch.randint(0, 8, (4, 3)))),
    ("index", lambda x, i: x[i].relu() * 2, (x48(), torch.tensor([0, 2]))),
    ("cat", lambda a, b: torch.cat([a.sin(), b.cos()]) + 1, (x48(), x48())),
    ("constant_pad", lambda x: F.pad(x.relu(), (1, 1)) * 2, (x48(),)),
    ("pooling", lambda x: F.max_pool2d(x.relu(), 2) + 1, (torch.randn(1, 2, 8, 8),)),
    ("dropout", lambda x: F.dropout(x * 2, 0.5, training=True) + 1, (x48(),)),
])
def test_ops_inductor_lowers_to_pointwise_code_fuse(name, fn, args):
    plan = plan_of(fn, *args)
    assert plan.kernel_count == 1, str(plan)
    assert "extern" not in {g.kind for g in plan.groups}


@pytest.mark.parametrize("fn, args", [
    (lambda x, i, v: x.index_put((i,), v.relu()) * 2, (x48(), torch.tensor([1, 3]),
                                                        torch.randn(2, 8))),
    (lambda x, i, s: x.scatter(1, i, s.exp()) + 1, (x48(), torch.randint(0, 8, (4, 2)),
                                                    torch.randn(4, 2))),
    (lambda x, s: x.slice_scatter(s.sin(), 1, 0, 2) * 3, (x48(), torch.randn(4, 2))),
    (lambda x, s: x.select_scatter(s.sin(), 0, 1) * 3, (x48(), torch.randn(8))),
])
def test_scatters_take_their_source_and_store_through_an_index(fn, args):
    ir = trace(fn, *args)
    plan = schedule(ir)
    assert all(n.kind is Kind.POINTWISE for n in ir.nodes)  # fusible code, no ATen call
    assert plan.kernel_count <= 2
    refused = {d.rule for d in plan.refusals()}
    assert refused <= {"scatter_output", "no_shared_data"}


def test_empty_permuted_is_an_allocation_not_a_kernel():
    from torch.fx.experimental.proxy_tensor import make_fx

    def fill(x):
        out = torch.empty_permuted((4, 8), (1, 0))
        return out.copy_(x * 2)

    ir = schedule(build_ir(make_fx(fill)(x48())))
    assert all("empty_permuted" not in a for g in ir.groups for a in g.aten_nodes)
    assert ir.kernel_count == 1


def test_long_distance_siblings_stay_apart():
    def far(x, y):
        first = x.sin()
        outs = [first]
        for _ in range(70):  # realized nodes in between (each returned)
            y = y * 2
            outs.append(y)
        outs.append(x.cos())
        return tuple(outs)

    plan = plan_of(far, x48(), x48())
    refused = [d for d in plan.refusals() if d.rule == "long_distance"]
    assert refused and "too far apart" in refused[0].reason


def test_peak_memory_check_refuses_before_the_threshold():
    def two_heads(x, w1, w2, b):
        return (x @ w1).relu() + b, (x @ w2).relu() + b  # b: 4 bytes shared, 1,024 reusable

    with config.patch(matmul_templates=False):
        plan = plan_of(two_heads, torch.randn(16, 8), torch.randn(8, 64), torch.randn(8, 64),
                       torch.randn(1))
    refused = [d for d in plan.refusals() if d.rule == "peak_memory"]
    assert refused and "1,024 elements could be reused > 32 x 4 bytes" in refused[0].reason


def test_small_reductions_are_unrolled_into_pointwise_code():
    def rows(x, y):
        return x.sum(-1) * y  # 4 elements per sum: under unroll_reductions_threshold (8)

    args = (torch.randn(16, 4), torch.randn(16))
    plan = plan_of(rows, *args)
    assert plan.kernel_count == 1 and plan.groups[0].kind == "pointwise"
    with config.patch(unroll_reductions_threshold=2):
        assert plan_of(rows, *args).groups[0].kind == "reduction"


def test_candidates_follow_inductors_priority():
    from mtia_lab.compiler.ir import FusedSchedulerNode
    from mtia_lab.compiler.scheduler import fusion_priority

    ir = trace(lambda a, w: (torch.mm(a, w), a.sin()), x48(), torch.randn(8, 8))
    mm, sin = (FusedSchedulerNode([n]) for n in ir.nodes)
    # same bytes saved: a pair of pointwise/reduction kernels comes before a template epilogue
    assert fusion_priority(sin, sin, 100, False) < fusion_priority(mm, sin, 100, False)
    # lowering's inlining comes before everything
    assert fusion_priority(mm, sin, 0, True) < fusion_priority(sin, sin, 10**6, False)


def test_plan_names_the_inductor_checks_it_leaves_out():
    plan = plan_of(lambda x: x.sum(-1), x48())
    left_out = {note.split(":")[0] for note in plan.notes}
    assert {"split_reductions", "mix_order_reduction", "realize_reads_threshold"} <= left_out
    assert all("left out on purpose" in note for note in plan.notes)
