"""Native kernels of kernels_nn.py (convolution, BatchNorm, pooling, attention, view backward,
in-place activations, foreach and fused optimizer ops) against the CPU.

PyTorch's own OpInfo samples (mtia_lab.testing.opinfo) check every result *and every tensor
argument* after the op, so BatchNorm's running statistics and the lists a foreach op writes are
compared too; backward ops, the fused optimizers and multi-head attention's fast path are reached
through the modules that call them, in strict mode (a fallback raises).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing._internal import common_methods_invocations as cmi

import mtia_lab
from mtia_lab.backend.aten.registry import KERNELS
from mtia_lab.backend.runtime import cost
from mtia_lab.backend.runtime.profile import MTIA_V2
from mtia_lab.testing.opinfo import check_op, has_variant, supported_ops

DEVICE = "mtia_sim"
NN_OPINFOS = [
    "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv_transpose2d",
    "native_batch_norm", "_native_batch_norm_legit", "_batch_norm_with_update",
    "nn.functional.batch_norm", "nn.functional.group_norm", "nn.functional.max_pool2d",
    "nn.functional.max_pool3d", "nn.functional.avg_pool2d", "nn.functional.avg_pool3d",
    "nn.functional.adaptive_avg_pool2d", "nn.functional.adaptive_max_pool2d",
    "max_pool2d_with_indices_backward", "torch.ops.aten._safe_softmax.default",
    "select_scatter", "slice_scatter", "diagonal_scatter", "as_strided_scatter",
    "nn.functional.hardswish", "nn.functional.hardsigmoid", "nn.functional.mish",
]
VARIANT_CASES = [
    (name, variant) for op in supported_ops(NN_OPINFOS) for name, variant in
    [(op.full_name, v) for v in ("op", "inplace", "out") if has_variant(op, v)]
    # the out= overload of _batch_norm_with_update takes arguments its OpInfo does not give
    if (name, variant) != ("_batch_norm_with_update", "out")
]
FOREACH_OPINFOS = [
    op for op in cmi.foreach_unary_op_db + cmi.foreach_binary_op_db + cmi.foreach_pointwise_op_db
    + cmi.foreach_reduce_op_db + cmi.foreach_other_op_db
    if torch.float32 in op.supported_dtypes("cpu")
]


def _explain(result) -> str:
    return f"{result.name} is {result.klass!r}: {result.problem or sorted(result.fallbacks)}"


@pytest.fixture(scope="module")
def nn_ops() -> dict:
    return {op.full_name: op for op in supported_ops(NN_OPINFOS)}


@pytest.mark.parametrize("name,variant", VARIANT_CASES, ids=[f"{n}-{v}" for n, v in VARIANT_CASES])
def test_nn_opinfos_run_natively_like_cpu(nn_ops, name, variant):
    result = check_op(nn_ops[name], variant=variant)
    assert result.samples > 0, _explain(result)
    assert result.klass == "native", _explain(result)


@pytest.mark.parametrize("op", FOREACH_OPINFOS, ids=lambda op: op.name)
def test_foreach_opinfos_run_natively_like_cpu(op):
    for variant in ("op", "inplace") if op.inplace_variant is not None else ("op",):
        result = check_op(op, variant=variant, max_samples=3)
        assert result.samples > 0, _explain(result)
        assert result.klass == "native", _explain(result)


def test_oracle_reports_an_argument_the_op_did_not_write(nn_ops):
    """A BatchNorm kernel that forgets its running statistics (the fallback bug of issue 9)."""

    def forgetful(func, args, kwargs, device):
        args = list(args)
        args[3:5] = [a.clone() if a is not None else a for a in args[3:5]]
        return func(*args, **kwargs)

    saved = KERNELS[torch.ops.aten.native_batch_norm.default]
    mtia_lab.register_kernel(torch.ops.aten.native_batch_norm.default)(forgetful)
    try:
        result = check_op(nn_ops["native_batch_norm"])
    finally:
        KERNELS[torch.ops.aten.native_batch_norm.default] = saved
    assert result.klass == "wrong", _explain(result)
    assert result.problem.startswith("AssertionError: argument 3 after the op"), result.problem


def _both(make, *shapes, seed: int = 0):
    """The same leaf tensors (requires_grad) on the CPU and on the device."""
    torch.manual_seed(seed)
    cpu = [make(shape) for shape in shapes]
    dev = [t.detach().to(DEVICE).requires_grad_(t.requires_grad) for t in cpu]
    return cpu, dev


BACKWARD_CASES = {
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1, groups=2), [(2, 4, 6, 6), (6, 2, 3, 3)]),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w, stride=2), [(2, 4, 5, 5),
                                                                           (4, 3, 3, 3)]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, stride=2, padding=1), [(2, 3, 8, 8)]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2, ceil_mode=True), [(2, 3, 7, 7)]),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (3, 2)), [(2, 3, 7, 5)]),
    "slice and select": (lambda x: x[:, 1:3].sum(0) + x[0, :2], [(4, 5)]),
    "hardswish_": (lambda x: F.hardswish(x * 3, inplace=True), [(4, 5)]),
    # 3-D: SDPA's math path, whose softmax is _safe_softmax (4-D takes the fused kernel)
    "safe softmax": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
                     [(2, 5, 4), (2, 5, 4), (2, 5, 4)]),
}


@pytest.mark.parametrize("case", BACKWARD_CASES)
def test_forward_and_backward_stay_on_the_device(case):
    fn, shapes = BACKWARD_CASES[case]
    cpu, dev = _both(lambda s: torch.randn(s, requires_grad=True), *shapes)
    expected = fn(*cpu)
    with mtia_lab.strict():
        got = fn(*dev)
        got.backward(torch.ones_like(got))
    expected.backward(torch.ones_like(expected))
    torch.testing.assert_close(got.cpu(), expected.detach())
    for c, d in zip(cpu, dev, strict=True):
        torch.testing.assert_close(d.grad.cpu(), c.grad)


def test_batch_norm_training_writes_running_stats_on_the_device():
    cpu_bn = torch.nn.BatchNorm2d(3)
    dev_bn = torch.nn.BatchNorm2d(3).to(DEVICE)
    cpu, dev = _both(lambda s: torch.randn(s, requires_grad=True), (4, 3, 5, 5))
    with mtia_lab.strict():
        for _ in range(2):
            dev_bn(dev[0]).square().sum().backward()
    for _ in range(2):
        cpu_bn(cpu[0]).square().sum().backward()
    for name, expected in cpu_bn.state_dict().items():
        torch.testing.assert_close(dev_bn.state_dict()[name].cpu(), expected)
    torch.testing.assert_close(dev[0].grad.cpu(), cpu[0].grad)
    torch.testing.assert_close(dev_bn.weight.grad.cpu(), cpu_bn.weight.grad)
    assert cpu_bn.num_batches_tracked.item() == 2


def test_native_multi_head_attention_matches_cpu():
    """The op nn.MultiheadAttention's inference fast path calls (with need_weights too)."""
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 5, 8)
    args = (x, x, x, 8, 2, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight,
            mha.out_proj.bias)
    dev_args = [a.detach().to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args]
    for need_weights in (False, True):
        with torch.no_grad():
            expected = torch._native_multi_head_attention(*args, need_weights=need_weights)
            with mtia_lab.strict(), mtia_lab.trace() as trace:
                got = torch._native_multi_head_attention(*dev_args, need_weights=need_weights)
        assert [e.op for e in trace.events] == ["aten::_native_multi_head_attention"]
        assert trace.events[0].kind == "native"
        for g, e in zip(got, expected, strict=True):  # no weights: None on both sides
            assert (g is None) == (e is None)
            if e is not None:
                torch.testing.assert_close(g.cpu(), e)


@pytest.mark.parametrize("optimizer,options", [
    ("AdamW", {"fused": True}), ("Adam", {"fused": True, "amsgrad": True}),
    ("SGD", {"fused": True, "momentum": 0.9}), ("AdamW", {"foreach": True}),
    ("Adam", {}), ("SGD", {"momentum": 0.9, "nesterov": True}),
])
def test_optimizer_steps_write_every_list_like_cpu(optimizer, options):
    """Fused optimizers write parameters, moments and momentum buffers (several `Tensor(a!)[]`
    lists); the default AdamW/Adam/SGD take the foreach path on the device."""
    cpu, dev = _both(lambda s: torch.randn(s, requires_grad=True), (3, 4), (5,), (2, 2, 2))
    cpu_opt = getattr(torch.optim, optimizer)(cpu, lr=0.1, **options)
    dev_opt = getattr(torch.optim, optimizer)(dev, lr=0.1, **options)
    for step in range(3):
        for params, opt in ((cpu, cpu_opt), (dev, dev_opt)):
            opt.zero_grad()
            sum((p * (p + step)).sum() for p in params).backward()
            if opt is dev_opt:
                with mtia_lab.strict():
                    opt.step()
            else:
                opt.step()
    for c, d in zip(cpu, dev, strict=True):
        torch.testing.assert_close(d.detach().cpu(), c.detach())
    for c_state, d_state in zip(cpu_opt.state.values(), dev_opt.state.values(), strict=True):
        for key, value in c_state.items():
            if key != "step":
                torch.testing.assert_close(d_state[key].cpu(), value, msg=key)


def test_torch_optim_takes_the_foreach_path_on_the_device():
    from torch.optim.optimizer import _default_to_fused_or_foreach

    params = list(torch.nn.Linear(3, 3).to(DEVICE).parameters())
    assert _default_to_fused_or_foreach(params, differentiable=False) == (False, True)
    params[0].sum().backward()
    with mtia_lab.trace() as trace:
        torch.optim.AdamW(params).step()
    ops = {e.op for e in trace.events}
    assert "aten::_foreach_lerp_.Scalar" in ops and "aten::lerp_.Scalar" not in ops


def test_convolution_is_priced_on_the_gemm_engine():
    x, w = torch.randn(2, 8, 16, 16), torch.randn(16, 8, 3, 3)
    out = torch.ops.aten.convolution.default(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0],
                                              1)
    price = cost.estimate(torch.ops.aten.convolution.default, (x, w), out)
    assert price.gemm_flops == 2.0 * out.numel() * 8 * 3 * 3 and price.vector_flops == 0
    # backward: the input's gradient and the weight's, each as much work as the forward
    backward = torch.ops.aten.convolution_backward.default
    args = (out, x, w, [16], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
    grads = backward(*args)
    assert cost.estimate(backward, args, grads).gemm_flops == 2 * price.gemm_flops
    # a convolution big enough to be compute-bound takes longer than its bytes alone would
    big_x, big_w = torch.empty(8, 256, 32, 32), torch.empty(256, 256, 3, 3)
    big = cost.estimate(torch.ops.aten.convolution.default, (big_x, big_w), big_x)
    as_bytes = cost.KernelCost(bytes_read=big.bytes_read, bytes_written=big.bytes_written)
    assert big.duration_us(MTIA_V2) > as_bytes.duration_us(MTIA_V2)


def test_fused_adamw_is_priced_by_what_it_writes():
    params = [torch.randn(1000) for _ in range(3)]
    lists = [params, [p.clone() for p in params], [p.clone() for p in params],
             [p.clone() for p in params], [], [torch.tensor(1.0)] * 3]
    price = cost.estimate(torch.ops.aten._fused_adamw_.default, lists, None)
    assert price.bytes_written == 3 * 3 * 1000 * 4  # parameters, exp_avg, exp_avg_sq
    assert price.vector_flops == 12 * 3000
