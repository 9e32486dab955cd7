"""torch.func (grad, vjp, jvp, vmap and what is built of them) over device tensors, against CPU.

Forward-over-reverse (jvp of grad: Hessian-vector products, `hessian`, `jacfwd` of a gradient)
used to kill the process: autograd makes a gradient known to be zero as a *ZeroTensor*, which
has no memory, and on the device its wrapper hid the ZeroTensor key from the dispatcher, so a
host kernel read a null pointer. Those cases run in a subprocess here, so that a regression
fails one test instead of the whole run. The OpInfo part follows functorch's test_ops.py
(`test_vjp`, `test_jvp`, `test_vmap_exhaustive`) on a few ops: each transform of the op's
samples on the device against the same on the CPU.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn
from torch.func import (
    functional_call,
    grad,
    jacrev,
    jvp,
    linearize,
    vjp,
    vmap,
)

from mtia_lab.backend.aten.dispatch import UntrackedByMakeFx

DEV = "mtia_sim:0"


def f(x):
    return (x.sin() * x).sum()


def g(x):
    return x.sin() * x.exp()


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def data(device: str):
    gen = torch.Generator().manual_seed(1)
    x, b, y = torch.randn(4, generator=gen), torch.randn(5, 4, generator=gen), torch.randn(
        5, 2, generator=gen)
    return x.to(device), b.to(device), y.to(device)


def module_case(name: str, device: str) -> torch.Tensor:
    """A small nn.Module through torch.func on `device`, its result on the host."""
    model = mlp().to(device)
    params = {k: v.detach() for k, v in model.named_parameters()}
    _, b, y = data(device)

    def loss(p, xb, yb):
        return ((functional_call(model, p, (xb,)) - yb) ** 2).mean()

    if name == "functional_call":
        out = functional_call(model, params, (b,))
    elif name == "grad":
        out = torch.cat([t.flatten() for t in grad(loss)(params, b, y).values()])
    elif name == "per-sample grads":  # vmap of grad over the batch
        per = vmap(grad(loss), in_dims=(None, 0, 0))(params, b.unsqueeze(1), y.unsqueeze(1))
        out = torch.cat([t.flatten(1) for t in per.values()], 1)
    elif name == "vmap":
        out = vmap(lambda row: functional_call(model, params, (row,)))(b)
    elif name == "jvp":
        tangents = {k: torch.ones_like(v) for k, v in params.items()}
        out = jvp(lambda p: functional_call(model, p, (b,)), (params,), (tangents,))[1]
    else:
        raise ValueError(name)
    return out.detach().cpu()


FUNCTIONS = {
    "grad": lambda x, b: grad(f)(x),
    "vjp": lambda x, b: vjp(g, x)[1](torch.ones_like(x))[0],
    "jvp": lambda x, b: jvp(g, (x,), (torch.ones_like(x),))[1],
    "vmap": lambda x, b: vmap(g)(b),
    "vmap in_dims": lambda x, b: vmap(lambda r, c: r * c, in_dims=(0, None))(b, x),
    "jacrev": lambda x, b: jacrev(g)(x),
    "vmap of vjp": lambda x, b: vmap(lambda r: vjp(g, r)[1](torch.ones_like(r))[0])(b),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_transform_of_a_function_on_the_device_matches_cpu(name):
    x, b, _ = data("cpu")
    expected = FUNCTIONS[name](x, b)
    out = FUNCTIONS[name](x.to(DEV), b.to(DEV))
    assert out.device == torch.device(DEV)
    torch.testing.assert_close(out.cpu(), expected)


@pytest.mark.parametrize("name", ["functional_call", "grad", "per-sample grads", "vmap", "jvp"])
def test_transform_of_a_module_on_the_device_matches_cpu(name):
    torch.testing.assert_close(module_case(name, DEV), module_case(name, "cpu"))


# Forward-over-reverse: each used to end the process (SIGSEGV). One subprocess for all.
_CRASHERS = textwrap.dedent("""
    import torch, mtia_lab
    from torch.func import grad, hessian, jacfwd, jvp, vjp
    def f(x):
        return (x.sin() * x).sum()
    x = torch.randn(4, generator=torch.Generator().manual_seed(1))
    v = torch.randn(4, generator=torch.Generator().manual_seed(2))
    cases = {
        "hvp (jvp of grad)": lambda x, v: jvp(grad(f), (x,), (v,))[1],
        "vhp (vjp of grad)": lambda x, v: vjp(grad(f), x)[1](v)[0],
        "hessian": lambda x, v: hessian(f)(x),
        "jacfwd": lambda x, v: jacfwd(lambda y: y.sin() * y.exp())(x),
        "zero tensor": lambda x, v: torch._efficientzerotensor(4, device=x.device) * x,
    }
    for name, fn in cases.items():
        cpu = fn(x, v)
        dev = fn(x.to("mtia_sim"), v.to("mtia_sim"))
        assert dev.device.type == "mtia_sim", name
        print(name, float((dev.cpu() - cpu).abs().max()), flush=True)
""")


def test_forward_over_reverse_on_the_device_matches_cpu_without_killing_the_process():
    run = subprocess.run([sys.executable, "-c", _CRASHERS], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, f"exit {run.returncode}: {run.stderr[-2000:]}"
    errors = dict(line.rsplit(" ", 1) for line in run.stdout.splitlines())
    assert len(errors) == 5, run.stdout
    assert all(float(e) < 1e-5 for e in errors.values()), errors


def test_a_zero_tensor_made_for_the_device_holds_real_zeros():
    zero = torch._efficientzerotensor(3, device=DEV)
    assert zero.cpu().tolist() == [0.0, 0.0, 0.0]


def test_wrapping_a_tensor_without_storage_names_the_wrapper_not_a_sparse_layout():
    """A functorch wrapper has no storage: `wrap` refuses it as what it is (it used to take
    it for a sparse tensor and refuse a 'torch.strided' layout)."""
    from mtia_lab.backend.aten.tensor import wrap

    def loss(w):
        with pytest.raises(NotImplementedError, match=r"probe returns a dense Tensor with no "
                                                      r"storage.*TensorWrapper.*get_unwrapped"):
            wrap(torch.ones(3), 0, "probe")  # inside grad, ones is a TensorWrapper
        return w.sum()

    torch.func.grad(loss)(torch.ones(3))


def test_linearize_is_refused_with_the_reason_not_a_wrong_graph():
    # linearize traces jvp with make_fx over real tensors; a device tensor it closes over is
    # untracked (PyTorch's make_fx leaves any wrapper subclass so), and its graph would ignore
    # the tangent. Refused by name instead.
    x = torch.randn(4, device=DEV)
    with pytest.raises(UntrackedByMakeFx, match="as an input, or use torch.func.jvp"):
        linearize(torch.sin, x)


def test_make_fx_of_device_inputs_alone_still_traces():
    from torch.fx.experimental.proxy_tensor import make_fx

    x = torch.randn(4, device=DEV)
    graph = make_fx(lambda t: t.cos() * t)(x)
    assert [n.target for n in graph.graph.nodes if n.op == "call_function"] == [
        torch.ops.aten.cos.default, torch.ops.aten.mul.Tensor]
    torch.testing.assert_close(graph(x).cpu(), (x.cpu().cos() * x.cpu()))


# -- OpInfo samples, functorch's way ------------------------------------------------------------

OPS = ["sin", "mul", "add", "matmul", "softmax", "nn.functional.linear", "sum", "tanh",
       "nn.functional.gelu", "div.no_rounding_mode"]


@pytest.fixture(scope="module")
def op_samples() -> dict:
    from mtia_lab.testing.opinfo import samples_of, supported_ops

    return {op.full_name: (op, samples_of(op, max_samples=2)) for op in supported_ops(OPS)}


def _tensor_positions(sample) -> tuple[list, list[int]]:
    args = [sample.input, *sample.args]
    return args, [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)
                  and a.is_floating_point()]


def _transforms(op, sample, device: str) -> dict[str, torch.Tensor]:
    args, where = _tensor_positions(sample)
    args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]

    def fn(*primals):
        full = list(args)
        for i, p in zip(where, primals, strict=True):
            full[i] = p
        return op(*full, **sample.kwargs)

    primals = tuple(args[i].detach() for i in where)
    gen = torch.Generator().manual_seed(3)
    tangents = tuple(torch.randn(p.shape, generator=gen).to(device) for p in primals)
    out, pullback = vjp(fn, *primals)
    cotangent = torch.randn(out.shape, generator=gen).to(device)
    results = {"vjp": torch.cat([t.flatten() for t in pullback(cotangent)]),
               "jvp": jvp(fn, primals, tangents)[1].flatten()}
    batched = tuple(torch.stack([p, p * 2]) for p in primals)
    results["vmap"] = vmap(fn)(*batched).flatten()
    return {k: v.detach().cpu() for k, v in results.items()}


@pytest.mark.parametrize("name", OPS)
def test_opinfo_vjp_jvp_vmap_on_the_device_match_cpu(op_samples, name):
    op, samples = op_samples[name]
    for sample in samples:
        if not _tensor_positions(sample)[1]:
            continue
        cpu, dev = _transforms(op, sample, "cpu"), _transforms(op, sample, DEV)
        for transform in cpu:
            torch.testing.assert_close(dev[transform], cpu[transform], rtol=1e-4, atol=1e-5,
                                       msg=lambda m, t=transform: f"{name} {t}: {m}")


def test_a_device_tensor_moved_to_meta_is_a_meta_tensor_and_costs_no_device_time():
    # PyTorch's ZeroTensor kernels compute an output's shape on `meta` copies of the operands.
    x = torch.randn(3, 2, device=DEV)
    clock = torch.mtia_sim.current_stream().clock_us
    meta = x.t().to("meta")
    assert (meta.device.type, meta.shape, meta.stride()) == ("meta", (2, 3), (1, 2))
    assert torch.mtia_sim.current_stream().clock_us == clock
