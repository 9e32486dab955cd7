"""Dynamic shapes with real TorchInductor + Triton (interpreted) on mtia_sim, against eager CPU.

The three ways to ask for them -- `torch.compile(dynamic=True)`, `torch._dynamo.mark_dynamic`
and Dynamo's automatic dynamic recompile after a second size -- each compile one graph with
symbolic sizes that serves the next sizes, forward and backward. Compiles are counted by the
plans Inductor made for the device (`mtia_lab.inductor.PLANS`: one per graph, forward and
backward apart). Graphs stay tiny: the interpreter runs each Triton program in Python. Sizes 0
and 1 are left out on purpose: Dynamo specializes them even under dynamic shapes.
"""

import copy
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mtia_lab
from mtia_lab.inductor import PLANS, inductor_plan, triton_launch
from mtia_lab.viz.fusion_graph import fusion_graph

DEVICE = "mtia_sim"
TOL = {"atol": 1e-5, "rtol": 1e-4}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch.compiler.reset()
    yield
    torch.compiler.reset()


def _symbol_of(plan, size: str) -> str:
    """The plan's symbol standing for `size` ("x.size(0)")."""
    found = [name for name, meaning in plan.symbols.items() if meaning.startswith(size + ",")]
    assert found, f"no symbol for {size} in {plan.symbols}"
    return found[0]


def _constant_numel(source: str) -> bool:
    """Whether a Triton kernel fixes its size in its body (`xnumel = 24`): a static kernel."""
    return re.search(r"^\s+(x|r0_)numel = \d", source, re.MULTILINE) is not None


def _softmax_mix(x, w):
    return torch.softmax(x * 2, -1) @ w + x.sum(-1, keepdim=True)


def test_dynamic_true_compiles_one_graph_for_three_batch_sizes():
    w = torch.randn(8, 4)
    compiled = torch.compile(_softmax_mix, dynamic=True)
    start = len(PLANS)
    for n in (3, 5, 7):
        x = torch.randn(n, 8)
        got = compiled(x.to(DEVICE), w.to(DEVICE))
        assert got.device.type == DEVICE
        torch.testing.assert_close(got.cpu(), _softmax_mix(x, w), **TOL)
    plans = PLANS[start:]
    assert len(plans) == 1, [p.name for p in plans]
    assert plans[0].symbols and plans[0].ir.sources
    for name, source in plans[0].ir.sources.items():
        assert "xnumel" in source.split(")", 1)[0], name  # a kernel argument
        assert not _constant_numel(source), f"{name} was compiled for one size:\n{source}"


def _seq_norms(x):
    """Reductions over dim 1, the dynamic sequence length: a softmax, a mean/variance norm and
    layer norm (an ATen call on the device, MTIA's keep-list)."""
    p = torch.softmax(x, 1)
    centered = x - x.mean(1, keepdim=True)
    normed = centered * torch.rsqrt(x.var(1, keepdim=True) + 1e-5)
    layer = F.layer_norm(x.transpose(1, 2), (x.shape[1],))
    return p + normed + layer.transpose(1, 2)


def test_mark_dynamic_sequence_length_reductions_compile_once():
    compiled = torch.compile(_seq_norms)
    start = len(PLANS)
    for t in (3, 6, 9):
        x = torch.randn(2, t, 4)
        xd = x.to(DEVICE)
        torch._dynamo.mark_dynamic(xd, 1)
        torch.testing.assert_close(compiled(xd).cpu(), _seq_norms(x), **TOL)
    plans = PLANS[start:]
    assert len(plans) == 1, [p.name for p in plans]
    seq = _symbol_of(plans[0], "x.size(1)")
    reductions = [g for g in plans[0].groups if g.kind == "reduction"]
    assert any(g.sizes[-1] == seq for g in reductions), [g.sizes for g in reductions]


def test_automatic_dynamic_recompiles_once_then_serves_the_third_size():
    w = torch.randn(8, 4)
    compiled = torch.compile(_softmax_mix)  # dynamic=None: Dynamo's automatic dynamic shapes
    start = len(PLANS)
    counts = []
    for n in (3, 5, 7):
        x = torch.randn(n, 8)
        torch.testing.assert_close(compiled(x.to(DEVICE), w.to(DEVICE)).cpu(),
                                   _softmax_mix(x, w), **TOL)
        counts.append(len(PLANS) - start)
    assert counts == [1, 2, 2]
    static, dynamic = PLANS[start:]
    assert not static.symbols
    assert _symbol_of(dynamic, "x.size(0)")


def _assert_grads(cpu, dev) -> None:
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters(), strict=True):
        torch.testing.assert_close(q.grad.cpu(), p.grad, msg=lambda m, n=name: f"{n}: {m}",
                                   **TOL)


def _train_steps(make, shapes, mark=(), dynamic=None) -> list:
    """Forward and backward of `make()` compiled on the device against eager CPU, one input
    shape after the other; returns the plans compiled."""
    torch.manual_seed(0)
    cpu = make()
    dev = copy.deepcopy(cpu).to(DEVICE)
    compiled = torch.compile(dev, dynamic=dynamic)
    start = len(PLANS)
    for shape in shapes:
        x = torch.randn(*shape)
        xd = x.to(DEVICE)
        for dim in mark:
            torch._dynamo.mark_dynamic(xd, dim)
        out, ref = compiled(xd), cpu(x)
        torch.testing.assert_close(out.cpu(), ref.detach(), **TOL)
        out.square().sum().backward()
        ref.square().sum().backward()
        _assert_grads(cpu, dev)
        cpu.zero_grad()
        dev.zero_grad()
    return PLANS[start:]


@pytest.mark.parametrize("dynamic", [True, None], ids=["dynamic_true", "automatic"])
def test_mlp_training_with_dynamic_batch_compiles_forward_and_backward_once(dynamic):
    def mlp():
        return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))

    plans = _train_steps(mlp, [(3, 8), (5, 8), (7, 8)], dynamic=dynamic)
    if dynamic is None:  # static at 3; the recompile at 5 is dynamic, and serves 7
        static, plans = plans[:2], plans[2:]
        assert not any(p.symbols for p in static)
    assert [p.name.split("_")[0] for p in plans] == ["forward", "backward"]
    assert all(_symbol_of(p, "args[0].size(0)") for p in plans)


class Block(nn.Module):
    """A pre-norm transformer block: attention over the (dynamic) sequence, then an MLP."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


def test_transformer_block_training_with_dynamic_batch_and_sequence_compiles_once():
    plans = _train_steps(Block, [(2, 3, 16), (3, 5, 16), (2, 7, 16)], mark=(0, 1))
    assert [p.name.split("_")[0] for p in plans] == ["forward", "backward"]
    backward = plans[1]
    assert _symbol_of(backward, "x.size(0)") and _symbol_of(backward, "x.size(1)")


def test_one_kernel_launches_on_each_call_s_grid_and_is_priced_at_its_size(monkeypatch):
    priced = []
    monkeypatch.setattr(triton_launch, "LISTENERS", [*triton_launch.LISTENERS,
                                              lambda _, cost, __: priced.append(cost)])
    compiled = torch.compile(lambda x: (x * 2).relu() + 1, dynamic=True)
    events = []
    for n in (64, 4096):
        x = torch.randn(n, 8)
        with mtia_lab.trace() as t:
            got = compiled(x.to(DEVICE))
        torch.testing.assert_close(got.cpu(), (x * 2).relu() + 1)
        events += [e for e in t.events if e.op.startswith("inductor.")]
    small, large = events
    assert small.op == large.op  # the same kernel served both sizes
    grids = [int(re.search(r"grid \((\d+),", e.reason).group(1)) for e in events]
    assert grids[1] > grids[0]
    # moves x and the result, n x 8 floats each, at the size of the call (not the traced one)
    assert [c.bytes_read + c.bytes_written for c in priced] == [n * 8 * 4 * 2 for n in (64, 4096)]


def test_inductor_plan_reports_symbolic_sizes_as_symbols():
    x = torch.randn(3, 32).to(DEVICE)
    torch._dynamo.mark_dynamic(x, 0)
    plan = inductor_plan(lambda x: (x * 2).relu(), x, dynamic=None)
    s = _symbol_of(plan, "x.size(0)")
    assert plan.symbols[s] == "x.size(0), 3 when traced"
    [group] = plan.groups
    assert group.sizes == (f"32*{s}",)
    assert f"pointwise over 32*{s}," in str(plan)
    text = fusion_graph(plan).to_text()
    assert f"symbolic sizes: {s} = x.size(0), 3 when traced" in text
    assert f"kernel 0 (pointwise over 32*{s})" in text
    static = inductor_plan(lambda x: (x * 2).relu(), torch.randn(3, 32))
    assert not static.symbols and "over" not in str(static)


def test_a_data_dependent_size_compiles_once_for_any_count():
    def positives(x):
        idx = torch.nonzero(x > 0)
        return (idx.float() * 2).sum(0) + idx.shape[0]

    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compiled = torch.compile(positives, fullgraph=True)
        start = len(PLANS)
        for x in (torch.randn(5, 3), torch.randn(5, 3).abs()):
            torch.testing.assert_close(compiled(x.to(DEVICE)).cpu(), positives(x))
    [plan] = PLANS[start:]
    assert "data-dependent (known at run time)" in plan.symbols.values()


def test_gpt2_eval_with_dynamic_sequence_length_compiles_once():
    pytest.importorskip("transformers")
    from mtia_lab.testing.zoo import build, logits

    model, _ = build("gpt2")
    model.eval()
    compiled = torch.compile(copy.deepcopy(model).to(DEVICE))
    start = len(PLANS)
    for tokens in (6, 9, 12):
        ids = torch.randint(0, 96, (2, tokens))
        device_ids = ids.to(DEVICE)
        torch._dynamo.mark_dynamic(device_ids, 1)
        with torch.no_grad():
            got, expected = logits(compiled(input_ids=device_ids)), logits(model(input_ids=ids))
        torch.testing.assert_close(got.cpu(), expected, **TOL)
    [plan] = PLANS[start:]
    assert _symbol_of(plan, "kwargs.input_ids.size(1)")  # forward(**kwargs) of the module
