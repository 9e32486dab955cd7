"""Real TorchInductor + Triton (interpreted) on mtia_sim against eager CPU: the model suite.

Each model is compiled once per module (fixtures) and kept tiny: the interpreter runs Triton
kernels with NumPy, one program at a time. Compiled outputs and gradients must match eager CPU.
"""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mtia_lab.inductor import PLANS

DEVICE = "mtia_sim"
TOL = {"atol": 1e-5, "rtol": 1e-4}


class Attention(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv, self.out, self.norm = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim), \
            nn.LayerNorm(dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5).softmax(-1)
        return x + self.out((att @ v).transpose(1, 2).reshape(b, t, d))


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(F.relu(self.bn(self.conv(x))).mean((2, 3)))


def _mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))


def _pair(make, train: bool):
    torch.manual_seed(0)
    cpu = make().train(train)
    dev = copy.deepcopy(cpu).to(DEVICE)
    return cpu, dev


def _compare(cpu, dev, x, backward: bool):
    torch.compiler.reset()
    compiled = torch.compile(dev)
    out = compiled(x.to(DEVICE))
    ref = cpu(x)
    assert out.device.type == DEVICE
    torch.testing.assert_close(out.cpu(), ref, **TOL)
    if backward:
        out.square().sum().backward()
        ref.square().sum().backward()
        for (name, p), q in zip(cpu.named_parameters(), dev.parameters(), strict=True):
            torch.testing.assert_close(q.grad.cpu(), p.grad, **TOL, msg=name)
    return out


@pytest.mark.parametrize("name", ["mlp", "attention", "conv_eval", "conv_train"])
def test_model_matches_eager_cpu(name):
    make, shape, train = {
        "mlp": (_mlp, (4, 8), True), "attention": (Attention, (2, 4, 16), True),
        "conv_eval": (ConvNet, (2, 3, 6, 6), False), "conv_train": (ConvNet, (2, 3, 6, 6), True),
    }[name]
    torch.manual_seed(1)
    x = torch.randn(*shape)
    cpu, dev = _pair(make, train)
    start = len(PLANS)
    _compare(cpu, dev, x, backward=train)
    plans = PLANS[start:]
    assert plans, "Inductor compiled no graph for the device"
    # Inductor scheduled for the device: Triton kernels, matmuls / convolutions as externs
    kinds = {g.kind for p in plans for g in p.groups}
    assert kinds & {"pointwise", "reduction"} and "extern" in kinds
    if train and name == "conv_train":  # BatchNorm's running stats updated in place, as eager
        torch.testing.assert_close(dev.bn.running_mean.cpu(), cpu.bn.running_mean, **TOL)
        torch.testing.assert_close(dev.bn.running_var.cpu(), cpu.bn.running_var, **TOL)


def test_training_step_matches_eager_cpu():
    torch.manual_seed(2)
    cpu, dev = _pair(_mlp, True)
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt_d = torch.optim.SGD(dev.parameters(), lr=0.1)
    x, y = torch.randn(4, 8), torch.randn(4, 4)
    torch.compiler.reset()

    @torch.compile
    def step(model, opt, x, y):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    for _ in range(2):
        loss_d = step(dev, opt_d, x.to(DEVICE), y.to(DEVICE))
        opt_d.step()
        opt_d.zero_grad()
        loss_c = F.mse_loss(cpu(x), y)
        loss_c.backward()
        opt_c.step()
        opt_c.zero_grad()
        torch.testing.assert_close(loss_d.cpu(), loss_c, **TOL)
    for p, q in zip(cpu.parameters(), dev.parameters(), strict=True):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), **TOL)


def test_bf16_autocast_step_matches_eager_cpu():
    torch.manual_seed(3)
    cpu, dev = _pair(_mlp, True)
    x = torch.randn(4, 8)
    torch.compiler.reset()
    compiled = torch.compile(dev)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        out = compiled(x.to(DEVICE))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = cpu(x)
    assert out.dtype == ref.dtype == torch.bfloat16
    torch.testing.assert_close(out.float().cpu(), ref.float(), atol=2e-2, rtol=2e-2)
    out.float().sum().backward()
    ref.float().sum().backward()
    for p, q in zip(cpu.parameters(), dev.parameters(), strict=True):
        torch.testing.assert_close(q.grad.cpu(), p.grad, atol=3e-2, rtol=3e-2)


def test_backend_option_engine_inductor_is_the_same_path():
    torch.manual_seed(4)
    cpu, dev = _pair(_mlp, False)
    x = torch.randn(4, 8)
    torch.compiler.reset()
    start = len(PLANS)
    out = torch.compile(dev, backend="mtia_lab", options={"engine": "inductor"})(x.to(DEVICE))
    torch.testing.assert_close(out.cpu(), cpu(x), **TOL)
    assert len(PLANS) > start  # Inductor's scheduler ran for the device


def test_generated_code_holds_the_triton_kernels_that_run():
    import mtia_lab

    def f(x, y):
        return (x.sin() + y).relu().sum(-1)

    x, y = torch.randn(4, 8), torch.randn(4, 8)
    torch.compiler.reset()
    from torch._inductor.utils import run_and_get_code

    with mtia_lab.trace() as t:
        out, code = run_and_get_code(torch.compile(f), x.to(DEVICE), y.to(DEVICE))
    torch.testing.assert_close(out.cpu(), f(x, y), **TOL)
    source = "\n".join(code)
    assert "@triton.jit" in source and "device='mtia_sim'" in source
    launched = [e for e in t.events if e.kind == "compiled"]
    assert len(launched) == 1
    kernel = launched[0].op.rsplit(".", 1)[-1]
    assert f"def {kernel}(" in source  # the kernel that ran is the one in the code
    assert launched[0].sim_us > 0 and "sin" in launched[0].reason
