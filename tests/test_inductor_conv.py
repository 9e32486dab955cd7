"""Convolutions compiled by real TorchInductor for mtia_sim, with Inductor's default config.

Inductor's layout optimization plans convolutions' inputs and weights channels-last (when its
heuristics say so: always in inference here, for channels above 64 in training) and asserts the
strides of each convolution's result against the fake kernel's, which for a PrivateUse1 device
is contiguous. These tests check that such compiles run and match CPU eager, and that a device
kernel breaking its fake kernel's promise is reported as the device's bug, naming the op.
"""

from __future__ import annotations

import copy
import re

import pytest
import torch
from torch import nn

from mtia_lab.backend.aten import dispatch, layouts
from mtia_lab.inductor._compat import run_and_get_code
from mtia_lab.inductor.errors import DeviceLayoutError

DEVICE = "mtia_sim"
TOL = {"atol": 1e-5, "rtol": 1e-4}
# Gradients of 72-channel convolutions summed over a batch: oneDNN's CPU kernels pick their
# algorithm by the layout (channels-last on the device's side), differing in the last bits.
GRAD_TOL = {"atol": 1e-4, "rtol": 1e-4}
_PAIR = re.compile(r"\((\d+), (\d+), (\d+), (\d+)\), \((\d+), (\d+), (\d+), (\d+)\)")


def _conv_net(channels: int, batch_norm: bool) -> nn.Sequential:
    """A 3x3 convolution, BatchNorm or not, ReLU, then a 1x1 convolution."""
    layers = [nn.Conv2d(3, channels, 3, padding=1)]
    layers += [nn.BatchNorm2d(channels)] if batch_norm else []
    return nn.Sequential(*layers, nn.ReLU(), nn.Conv2d(channels, channels, 1))


def _plans_channels_last(code: list[str]) -> bool:
    """Whether the generated code lays a 4-D buffer out channels-last (Inductor's layout
    optimization ran), read from the (size, stride) pairs it allocates and asserts."""
    for match in _PAIR.finditer("\n".join(code)):
        size, stride = match.groups()[:4], match.groups()[4:]
        size, stride = tuple(map(int, size)), tuple(map(int, stride))
        if min(size[1:]) > 1 and stride == torch.empty(size).to(
                memory_format=torch.channels_last).stride():
            return True
    return False


@pytest.fixture(autouse=True)
def fresh_compile():
    torch.compiler.reset()
    yield
    torch.compiler.reset()


@pytest.mark.parametrize("batch_norm", [True, False], ids=["bn", "no_bn"])
def test_eval_conv_net_compiles_with_layout_optimization(batch_norm):
    torch.manual_seed(0)
    cpu = _conv_net(8, batch_norm).eval()
    dev = copy.deepcopy(cpu).to(DEVICE)
    x = torch.randn(2, 3, 16, 16)
    compiled = torch.compile(dev)
    with torch.no_grad():
        out, code = run_and_get_code(compiled, x.to(DEVICE))
        torch.testing.assert_close(out.cpu(), cpu(x), **TOL)
    assert _plans_channels_last(code), "Inductor did not plan channels-last: nothing tested"


@pytest.mark.parametrize("batch_norm", [True, False], ids=["bn", "no_bn"])
def test_training_step_of_conv_net_compiles_with_layout_optimization(batch_norm):
    torch.manual_seed(1)
    cpu = _conv_net(72, batch_norm).train()  # > 64 channels: Inductor's training heuristic
    dev = copy.deepcopy(cpu).to(DEVICE)
    opt_cpu = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt_dev = torch.optim.SGD(dev.parameters(), lr=0.1)
    x = torch.randn(2, 3, 8, 8)
    compiled = torch.compile(dev)

    def step():
        loss = compiled(x.to(DEVICE)).square().mean()
        loss.backward()
        return loss

    loss, code = run_and_get_code(step)
    expected = cpu(x).square().mean()
    expected.backward()
    torch.testing.assert_close(loss.cpu(), expected, **TOL)
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters(), strict=True):
        torch.testing.assert_close(q.grad.cpu(), p.grad, **GRAD_TOL, msg=name)
    opt_cpu.step()
    opt_dev.step()
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters(), strict=True):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), **GRAD_TOL, msg=name)
    for (name, b), c in zip(cpu.named_buffers(), dev.buffers(), strict=True):
        torch.testing.assert_close(c.cpu(), b, **TOL, msg=name)  # BatchNorm's running stats
    assert _plans_channels_last(code), "Inductor did not plan channels-last: nothing tested"


def test_zoo_resnet_compiles_with_plain_torch_compile():
    pytest.importorskip("transformers")
    from mtia_lab.testing import to_device
    from mtia_lab.testing.zoo import build, logits

    model, batch = build("resnet")
    model.eval()
    compiled = torch.compile(copy.deepcopy(model).to(DEVICE))
    with torch.no_grad():
        out, code = run_and_get_code(compiled, **to_device(batch))
        torch.testing.assert_close(logits(out).cpu(), logits(model(**batch)), **TOL)
    assert "extern_kernels.convolution" in "\n".join(code)
    assert _plans_channels_last(code)


def test_a_device_kernel_breaking_its_layout_is_named_as_the_devices_bug(monkeypatch):
    """Break the convolution's layout rule: the device then returns the CPU's channels-last
    result where Inductor planned contiguous. The error names the op and whose bug it is; with
    the rule back, the same compiled model runs."""
    torch.manual_seed(2)
    cpu = _conv_net(8, True).eval()
    compiled = torch.compile(copy.deepcopy(cpu).to(DEVICE))
    x = torch.randn(2, 3, 16, 16)
    with monkeypatch.context() as patch:
        for op in [op for op in layouts.RULES if op.name().startswith("aten::convolution")]:
            patch.delitem(layouts.RULES, op)
        patch.setattr(dispatch, "_PLANS", {})  # plans cache their layout rule
        with torch.no_grad(), pytest.raises(DeviceLayoutError) as caught:
            compiled(x.to(DEVICE))
    message = str(caught.value)
    assert "aten.convolution.default" in message and "bug of the mtia_sim device" in message
    assert "stride" in message  # Inductor's own finding is kept
    with torch.no_grad():
        torch.testing.assert_close(compiled(x.to(DEVICE)).cpu(), cpu(x), **TOL)
