"""The device's results laid out as PyTorch's fake kernels promise for mtia_sim (issue 15).

TorchInductor plans its buffers from fake tensors and asserts the strides of every extern
kernel's result; so each device op must return the sizes and strides FakeTensorMode reports for
a `mtia_sim` tensor (mtia_lab/backend/aten/layouts.py names where that departs from CPU eager). The
oracle (mtia_lab/testing/meta_strides.py) runs OpInfo samples on the device, in four input
layouts, forward and backward, and compares every aten call's results with its fake kernel's.

Here: the ops whose CPU kernel lays results out otherwise (each fixed in layouts.py) and the
layers of vision models, then a broad slice of op_db; `scripts/meta_strides_sweep.py --backward`
runs the whole op_db (about 3 minutes).
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from mtia_lab.backend.aten import dispatch, layouts
from mtia_lab.testing.meta_strides import (
    LAYOUTS,
    CallRecorder,
    check_op_strides,
    replay,
)
from mtia_lab.testing.opinfo import supported_ops

DEVICE = "mtia_sim"
# Ops whose CPU kernel returned another layout (or size) than the fake kernel says, each fixed in
# layouts.py, and the layers of vision models (pooling, upsampling, normalization, padding).
FOCUS = [
    # device-specific promises: convolution (ConvBackend::Overrideable), BatchNorm in eval,
    # EmbeddingBag's bookkeeping, pixel_shuffle
    "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv_transpose1d",
    "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d", "native_batch_norm",
    "_native_batch_norm_legit", "_batch_norm_with_update", "nn.functional.batch_norm",
    "nn.functional.instance_norm", "nn.functional.embedding_bag", "nn.functional.pixel_shuffle",
    "nn.functional.channel_shuffle",
    # meta kernels that lay results out otherwise than eager (on the CPU too)
    "copysign", "div.floor_rounding", "remainder", "floor_divide", "ldexp", "logaddexp",
    "logaddexp2", "logical_and", "logical_xor", "heaviside", "normal", "native_dropout_backward",
    "nn.functional.dropout", "log_softmax", "nn.functional.cross_entropy",
    "nn.functional.mse_loss", "nn.functional.huber_loss", "nn.functional.smooth_l1_loss",
    "nn.functional.multilabel_soft_margin_loss", "native_layer_norm", "nn.functional.layer_norm",
    "nn.functional.pad.replicate_negative", "nn.functional.max_unpool2d",
    # ops that already matched: views' backward (a fresh result's storage offset is not
    # compared: see meta_strides.layout_difference), and the layers of vision models
    "slice_scatter", "select_scatter", "diagonal_scatter", "as_strided_scatter",
    "nn.functional.conv3d", "nn.functional.pixel_unshuffle", "nn.functional.max_unpool3d",
    "nn.functional.max_pool2d", "nn.functional.avg_pool2d", "nn.functional.adaptive_avg_pool2d",
    "nn.functional.adaptive_max_pool2d", "nn.functional.interpolate.nearest",
    "nn.functional.interpolate.bilinear", "nn.functional.upsample_nearest",
    "nn.functional.group_norm", "nn.functional.pad.reflect", "nn.functional.grid_sample",
    "nn.functional.unfold",
]
SLICE_EVERY = 7  # every 7th op of op_db, forward, in every layout


@pytest.fixture(scope="module")
def ops() -> dict:
    return {op.full_name: op for op in supported_ops()}


def _explain(results) -> str:
    return "; ".join(f"{r.name} [{r.layout}] {r.problem}" for r in results if r.mismatches)


@pytest.mark.parametrize("name", FOCUS)
def test_device_results_have_the_fake_kernels_layout(ops, name):
    results = [check_op_strides(ops[name], layout, backward=True)
               for layout in LAYOUTS]
    assert not any(r.mismatches for r in results), _explain(results)
    assert sum(r.calls for r in results) > 0, f"{name}: no aten call could be compared"


def test_a_broad_slice_of_op_db_matches(ops):
    names = sorted(ops)[::SLICE_EVERY]
    results = [check_op_strides(ops[n], layout, max_samples=3) for n in names
               for layout in LAYOUTS]
    assert not any(r.mismatches for r in results), _explain(results)
    assert sum(r.klass == "match" for r in results) > len(names)


def test_the_oracle_sees_a_convolution_that_follows_the_cpu(ops, monkeypatch):
    """Without its rule, the device's convolution keeps the CPU's channels-last result: the
    oracle must say so, and say that the fake kernel promises this for the device only."""
    for op in [op for op in layouts.RULES if op.name().startswith("aten::convolution")]:
        monkeypatch.delitem(layouts.RULES, op)
    monkeypatch.setattr(dispatch, "_PLANS", {})  # plans cache their layout rule
    result = check_op_strides(ops["nn.functional.conv2d"], "channels_last", max_samples=2)
    assert result.klass == "mismatch"
    problem = result.mismatches["aten.convolution.default"]
    assert "device stride" in problem and "[device-specific]" in problem


def _recorded(fn, *args):
    with CallRecorder() as recorder:
        out = fn(*args)
    return out, recorder.calls


def test_batch_norm_in_eval_returns_per_channel_statistics_as_on_cuda():
    """The fake kernel (and CUDA) give eval BatchNorm's saved statistics one value per channel:
    the running mean and 1/sqrt(running_var + eps). The CPU's are empty."""
    x, mean, var = torch.randn(2, 3, 4, 4), torch.randn(3), torch.rand(3) + 0.5
    weight, bias = torch.randn(3), torch.randn(3)
    args = [t.to(DEVICE) for t in (x, weight, bias, mean, var)]
    for op, extra in ((torch.ops.aten.native_batch_norm.default, (False, 0.1, 1e-5)),
                      (torch.ops.aten._native_batch_norm_legit_no_training.default, (0.1, 1e-5))):
        out, calls = _recorded(op, *args, *extra)
        expected = torch.ops.aten.native_batch_norm.default(x, weight, bias, mean, var, False,
                                                            0.1, 1e-5)
        torch.testing.assert_close(out[0].cpu(), expected[0])
        torch.testing.assert_close(out[1].cpu(), mean)
        torch.testing.assert_close(out[2].cpu(), torch.rsqrt(var + 1e-5))
        assert replay(calls[-1]) == ("", "")
    outs = [torch.empty(0, device=DEVICE) for _ in range(3)]  # out= resizes them, as the fake
    _, calls = _recorded(lambda: torch.ops.aten.native_batch_norm.out(
        *args, False, 0.1, 1e-5, out=outs[0], save_mean=outs[1], save_invstd=outs[2]))
    torch.testing.assert_close(outs[1].cpu(), mean)
    torch.testing.assert_close(outs[2].cpu(), torch.rsqrt(var + 1e-5))
    assert replay(calls[-1]) == ("", "")


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("include_last_offset", [False, True])
def test_embedding_bag_forward_and_backward_match_cpu(mode, include_last_offset):
    """EmbeddingBag's bookkeeping results take CUDA's sizes on the device (as its fake kernel
    says); the values and the gradient stay the CPU's."""
    torch.manual_seed(0)
    bag = torch.nn.EmbeddingBag(10, 3, mode=mode, include_last_offset=include_last_offset)
    device_bag = copy.deepcopy(bag).to(DEVICE)
    indices = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = torch.tensor([0, 4, 8] if include_last_offset else [0, 4])
    weights = torch.rand(8) if mode == "sum" else None
    expected = bag(indices, offsets, per_sample_weights=weights)
    expected.square().sum().backward()
    with CallRecorder() as recorder:
        out = device_bag(indices.to(DEVICE), offsets.to(DEVICE),
                         per_sample_weights=None if weights is None else weights.to(DEVICE))
        out.square().sum().backward()
    torch.testing.assert_close(out.cpu(), expected)
    torch.testing.assert_close(device_bag.weight.grad.cpu(), bag.weight.grad)
    forward = next(c for c in recorder.calls if c.func == torch.ops.aten._embedding_bag.default)
    assert replay(forward) == ("", "")


def test_contiguous_inputs_never_ask_the_fake_kernel(monkeypatch):
    """The rules that follow a fake kernel run it only for inputs that are not contiguous (and
    then once per op and argument metadata): the common case costs nothing."""
    runs = []
    original = layouts._run_fake
    monkeypatch.setattr(layouts, "_run_fake", lambda *a: runs.append(a[0]) or original(*a))
    monkeypatch.setattr(layouts, "_RESTRIDES", {})
    x = torch.randn(4, 5, device=DEVICE, requires_grad=True)
    F.mse_loss(x.logsumexp(-1), torch.zeros(4, device=DEVICE)).backward()
    torch.logical_and(x, x)
    assert runs == []
    xt = torch.randn(5, 4).to(DEVICE).t()
    for _ in range(3):
        torch.logical_and(xt, xt.clone())
    assert runs == [torch.ops.aten.logical_and.default]  # once: then cached
