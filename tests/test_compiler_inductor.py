"""Our plan beside Inductor's real plan for the device (mtia_lab.inductor), node by node."""

import torch
import torch.nn.functional as F

import mtia_lab  # noqa: F401
from mtia_lab.compare import compare
from mtia_lab.compiler import config


def block(x, w, b):
    y = F.gelu(F.linear(x, w, b))
    return torch.softmax(F.layer_norm(y, (16,)), -1) * 2


def args():
    torch.manual_seed(0)
    return [t.to("mtia_sim") for t in (torch.randn(4, 8), torch.randn(16, 8), torch.randn(16))]


def test_every_group_lines_up_and_every_difference_is_named():
    comparison = compare(block, *args())[0]
    ours, groups = comparison.ours, comparison.groups
    # Every aten node of ours is computed by exactly one of Inductor's kernels.
    covered = sorted(n for g in groups for n in g)
    assert covered == sorted(n for g in ours.groups for n in g.nodes)
    # Layer norm stays one ATen kernel on both sides (the device's keep-list); the softmax
    # and its scale are one reduction kernel on both.
    softmax = ("amax", "sub", "exp", "sum_1", "div", "mul")
    assert any(set(softmax) <= set(g) for g in groups)
    assert ("native_layer_norm",) in groups
    # Our matmul takes its epilogue (ours); Inductor calls aten addmm: named, not hidden.
    assert comparison.differences and not comparison.unexplained
    assert {r for d in comparison.differences for r in d.rules} == {"template_epilogue"}
    assert "explained by template_epilogue (ours)" in str(comparison)


def test_without_our_departure_the_groups_are_inductors():
    with config.patch(matmul_templates=False):
        comparison = compare(block, *args())[0]
    assert comparison.identical == comparison.inductor_kernels
    assert not comparison.differences
    assert comparison.ours.after.bytes_moved == comparison.priced.bytes_moved


def test_both_count_buffers_not_aten_ops():
    """Inductor inlines pointwise chains while lowering: one scheduler node for six muls, so
    its max_fusion_size never sees them; ours models that inlining and counts alike."""

    def chain(x):
        for _ in range(6):
            x = x * 2
        return x

    with config.patch(max_fusion_size=3):  # passed on to Inductor's own config too
        comparison = compare(chain, torch.randn(4, 8).to("mtia_sim"))[0]
    assert comparison.ours.kernel_count == comparison.inductor.kernel_count == 1
    assert comparison.inductor.settings["max_fusion_size"] == 3
