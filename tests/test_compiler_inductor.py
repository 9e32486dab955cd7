"""Inductor's own scheduler on the same aten graph: its groups, priced by our cost model."""

import torch
import torch.nn.functional as F

import mtia_lab  # noqa: F401
from mtia_lab.compiler import config, trace
from mtia_lab.compiler.inductor_compare import compare_graph


def block(x, w, b):
    y = F.gelu(F.linear(x, w, b))
    return torch.softmax(F.layer_norm(y, (16,)), -1) * 2


def test_inductor_groups_cover_our_nodes_and_are_priced_alike():
    ir = trace(block, torch.randn(4, 8), torch.randn(16, 8), torch.randn(16))
    comparison = compare_graph(ir.gm, "block")
    ours, theirs = comparison.ours, comparison.inductor
    # Kernel counts first: both keep layer_norm as an ATen kernel and fuse the softmax.
    assert ours.kernel_count == 3
    assert theirs.kernel_count == 4  # on CPU Inductor calls aten mm: no matmul epilogue
    softmax = {"amax", "sub", "exp", "sum_1", "div", "mul_3"}
    assert any(softmax <= set(k.nodes) for k in theirs.kernels)
    assert any(softmax <= set(g.nodes) for g in ours.groups)
    covered = sorted(n for k in theirs.kernels for n in k.nodes)
    assert covered == sorted(n for g in ours.groups for n in g.nodes)
    # Numbers second: the same cost model prices both.
    assert theirs.bytes_moved == sum(k.bytes_moved for k in theirs.kernels)
    assert ours.after.bytes_moved <= theirs.bytes_moved
    assert "Inductor" in comparison.table()


def test_inductor_runs_under_our_guardrails():
    ir = trace(lambda x: torch.softmax(x, -1), torch.randn(4, 8))
    assert compare_graph(ir.gm).inductor.kernel_count == 1
    with config.patch(max_fusion_size=1):
        comparison = compare_graph(ir.gm)
    # sub is inlined into exp while lowering (no guardrail sees it); the rest stay apart
    assert comparison.ours.kernel_count == len(ir.nodes) - 1
    assert comparison.inductor.kernel_count == comparison.ours.kernel_count


def test_both_count_buffers_not_aten_ops():
    """Inductor inlines pointwise chains while lowering: one scheduler node for six muls, so
    its max_fusion_size never sees them; ours models that inlining and counts alike."""

    def chain(x):
        for _ in range(6):
            x = x * 2
        return x

    ir = trace(chain, torch.randn(4, 8))
    with config.patch(max_fusion_size=3):
        comparison = compare_graph(ir.gm, "chain")
    assert comparison.ours.kernel_count == 1
    assert comparison.inductor.kernel_count == 1
