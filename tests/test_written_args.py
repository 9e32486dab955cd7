"""Ops that write to their arguments: the device must write every one, as the CPU does.

The CPU fallback copies the host kernel's writes back to the device, so it must know every
argument an op writes: each `Tensor(a!)` and each `Tensor(a!)[]` list of its schema (several
lists share one, empty, alias set), plus the writes PyTorch's schema does not declare
(`native_batch_norm` updates the running statistics in place).
"""

from __future__ import annotations

import pytest
import torch
from torch.utils import _pytree as pytree

from mtia_lab.backend.aten.schema import facts

DEVICE = "mtia_sim"


def _to(value, device):
    return pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone().to(device), value)


def _assert_same(device_values, cpu_values) -> None:
    for got, want in zip(pytree.tree_leaves(device_values), pytree.tree_leaves(cpu_values),
                         strict=True):
        if isinstance(want, torch.Tensor):
            torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("norm, shape", [
    (torch.nn.BatchNorm1d, (6, 3)), (torch.nn.BatchNorm2d, (4, 3, 5, 5)),
    (torch.nn.BatchNorm3d, (2, 3, 2, 3, 3)),
])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_running_stats_follow_cpu_in_training(norm, shape, momentum):
    torch.manual_seed(0)
    cpu = norm(3, momentum=momentum)
    dev = norm(3, momentum=momentum).to(DEVICE)
    for _ in range(3):
        x = torch.randn(shape) * 3 + 1
        torch.testing.assert_close(dev(x.to(DEVICE)).cpu(), cpu(x))
    for name, buffer in cpu.named_buffers():
        torch.testing.assert_close(getattr(dev, name).cpu(), buffer, msg=name)
    cpu.eval(), dev.eval()
    x = torch.randn(shape)
    torch.testing.assert_close(dev(x.to(DEVICE)).cpu(), cpu(x))


@pytest.mark.parametrize("optimizer, options, flavour", [
    (torch.optim.AdamW, {"lr": 0.1, "weight_decay": 0.1}, "fused"),
    (torch.optim.Adam, {"lr": 0.1, "amsgrad": True}, "fused"),
    (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}, "fused"),
    (torch.optim.AdamW, {"lr": 0.1, "weight_decay": 0.1}, "foreach"),
    (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}, "foreach"),
    (torch.optim.Adagrad, {"lr": 0.1}, "foreach"),
])
def test_optimizer_steps_follow_cpu(optimizer, options, flavour):
    torch.manual_seed(0)
    cpu_params = [torch.randn(4, 3, requires_grad=True), torch.randn(5, requires_grad=True)]
    initial = [p.detach().clone() for p in cpu_params]
    dev_params = [p.detach().to(DEVICE).requires_grad_() for p in cpu_params]
    cpu_opt = optimizer(cpu_params, **options, **{flavour: True})
    dev_opt = optimizer(dev_params, **options, **{flavour: True})
    for _ in range(3):
        grads = [torch.randn_like(p) for p in cpu_params]
        for p, q, g in zip(cpu_params, dev_params, grads, strict=True):
            p.grad, q.grad = g, g.to(DEVICE)
        cpu_opt.step()
        dev_opt.step()
    for p, q, before in zip(cpu_params, dev_params, initial, strict=True):
        assert not torch.equal(p.detach(), before)  # the steps moved the parameters
        torch.testing.assert_close(q.detach().cpu(), p.detach())
    for p, q in zip(cpu_params, dev_params, strict=True):
        for key, value in cpu_opt.state[p].items():
            if isinstance(value, torch.Tensor):
                torch.testing.assert_close(dev_opt.state[q][key].cpu(), value, msg=key)


def _lists(n=3):
    return [torch.randn(2, 3) for _ in range(n)]


# A representative call of each kind of writing op: (op, args builder, kwargs). Each runs on the
# CPU and on the device, and then every argument (written or not) must agree.
WRITERS = {
    "_foreach_add_.List": (torch.ops.aten._foreach_add_.List, lambda: (_lists(), _lists()), {}),
    "_foreach_addcmul_.Scalar": (
        torch.ops.aten._foreach_addcmul_.Scalar, lambda: (_lists(), _lists(), _lists()),
        {"value": 0.5}),
    "_foreach_lerp_.Scalar": (
        torch.ops.aten._foreach_lerp_.Scalar, lambda: (_lists(), _lists(), 0.3), {}),
    "_amp_foreach_non_finite_check_and_unscale_": (
        torch.ops.aten._amp_foreach_non_finite_check_and_unscale_.default,
        lambda: ([torch.randn(3), torch.tensor([1.0, float("inf")])], torch.zeros(1),
                 torch.full((1,), 0.5)), {}),
    "_amp_update_scale_": (
        torch.ops.aten._amp_update_scale_.default,
        lambda: (torch.full((1,), 4.0), torch.zeros(1, dtype=torch.int32), torch.ones(1),
                 2.0, 0.5, 1), {}),
    "_fused_adam_": (
        torch.ops.aten._fused_adam_.default,
        lambda: (_lists(), _lists(), _lists(), [t.abs() for t in _lists()], [],
                 [torch.tensor(1.0)] * 3),
        {"lr": 0.1, "beta1": 0.9, "beta2": 0.99, "weight_decay": 0.0, "eps": 1e-8,
         "amsgrad": False, "maximize": False}),
    "_fused_sgd_": (
        torch.ops.aten._fused_sgd_.default, lambda: (_lists(), _lists(), _lists()),
        {"weight_decay": 0.0, "momentum": 0.9, "lr": 0.1, "dampening": 0.0, "nesterov": False,
         "maximize": False, "is_first_step": False}),
    "unbind_copy.int_out": (
        torch.ops.aten.unbind_copy.int_out, lambda: (torch.randn(3, 2),),
        {"out": [torch.empty(2) for _ in range(3)]}),
    "split_copy.Tensor_out": (
        torch.ops.aten.split_copy.Tensor_out, lambda: (torch.randn(4, 2), 2),
        {"out": [torch.empty(2, 2) for _ in range(2)]}),
    "native_batch_norm": (
        torch.ops.aten.native_batch_norm.default,
        lambda: (torch.randn(4, 3), None, None, torch.zeros(3), torch.ones(3), True, 0.1, 1e-5),
        {}),
    "_native_batch_norm_legit": (
        torch.ops.aten._native_batch_norm_legit.default,
        lambda: (torch.randn(4, 3), None, None, torch.zeros(3), torch.ones(3), True, 0.1, 1e-5),
        {}),
    "aminmax.out": (
        torch.ops.aten.aminmax.out, lambda: (torch.randn(4, 3),),
        {"dim": 0, "min": torch.empty(3), "max": torch.empty(3)}),
    "sort.values": (
        torch.ops.aten.sort.values, lambda: (torch.randn(4, 3),),
        {"values": torch.empty(4, 3), "indices": torch.empty(4, 3, dtype=torch.long)}),
}


@pytest.mark.parametrize("name", list(WRITERS))
def test_every_written_argument_reaches_the_device(name):
    op, build, kwargs = WRITERS[name]
    torch.manual_seed(0)
    args = build()
    cpu_args, cpu_kwargs = _to(args, "cpu"), _to(kwargs, "cpu")
    dev_args, dev_kwargs = _to(args, DEVICE), _to(kwargs, DEVICE)
    cpu_out = op(*cpu_args, **cpu_kwargs)
    dev_out = op(*dev_args, **dev_kwargs)
    _assert_same(dev_out, cpu_out)
    _assert_same((dev_args, dev_kwargs), (cpu_args, cpu_kwargs))


def _written_positions(schema) -> set[int]:
    return {i for i, a in enumerate(schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write}


def test_schema_facts_name_every_written_argument_of_every_aten_op():
    """Across all aten overloads: an op that writes several lists (`_fused_adamw_`: five) or
    several tensors has each of them among its written arguments."""
    checked = 0
    for packet_name in dir(torch.ops.aten):
        packet = getattr(torch.ops.aten, packet_name, None)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            written = _written_positions(op._schema)
            if not written:
                continue
            checked += 1
            assert written <= {position for position, _ in facts(op).mutated}, op
    assert checked > 500
