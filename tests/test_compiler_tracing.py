"""torch.compile on the device, around the scheduler: what tracing costs (nothing), dynamic
shapes, random ops, output memory, AMP, and finding the backend without importing Dynamo."""

import importlib.metadata

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from fresh_python import run_python
from models import GeluMLP as MLP

import mtia_lab
from mtia_lab.backend.aten import dispatch
from mtia_lab.backend.runtime.allocator import round_size
from mtia_lab.compare import mtia_lab_backend
from mtia_lab.compiler import COMPILED, config

DEV = "mtia_sim"


class CountingObserver:
    def __init__(self):
        self.ops = []

    def before_op(self, func, kind, args, kwargs, device_state):
        self.ops.append(str(func))

    def after_op(self, func, kind, result, price, span):
        pass


def allocations() -> int:
    return torch.mtia_sim.memory_stats()["allocation.all.allocated"]


def test_compiling_costs_the_device_nothing():
    """The first (compiling) call moves the clock, the allocator and the observer exactly as
    much as a later call: Dynamo's and AOTAutograd's fake tensors run no device work."""
    torch.manual_seed(0)
    model, x = MLP().to(DEV), torch.randn(4, 8, device=DEV)
    stream = torch.mtia_sim.current_stream()
    torch.compiler.reset()
    compiled = torch.compile(model, backend="mtia_lab")
    observer = CountingObserver()
    previous = dispatch.set_observer(observer)
    mtia_lab.reset_fallback_counts()
    try:
        figures = []
        with torch.no_grad():
            for _ in range(2):
                clock, allocs, memory = stream.clock_us, allocations(), \
                    torch.mtia_sim.memory_allocated()
                out = compiled(x)
                figures.append((stream.clock_us - clock, allocations() - allocs,
                                torch.mtia_sim.memory_allocated() - memory))
                del out
    finally:
        dispatch.set_observer(previous)
    (first_us, first_allocs, first_bytes), second = figures
    plan = COMPILED[-1].plan
    assert first_us == pytest.approx(plan.after.time_us)  # only the kernels, no traced ops
    assert figures[0] == pytest.approx(second)
    assert first_allocs == 2  # gelu's buffer between the kernels, the output: no fakes
    assert first_bytes == round_size(4 * 4 * 4)
    assert observer.ops == []  # compiled kernels do not go through dispatch
    assert mtia_lab.fallback_counts() == {}


def test_a_fallback_op_compiles_without_fallback_counts_even_in_strict_mode():
    """cumprod has no native kernel: eager runs it on the host (a counted fallback); compiled,
    it is part of a generated kernel, so neither the count nor strict mode applies."""
    x = torch.randn(5, 6, device=DEV)
    torch.compiler.reset()
    mtia_lab.reset_fallback_counts()
    with mtia_lab.strict():
        out = torch.compile(lambda t: torch.cumprod(t * 2, 1), backend="mtia_lab")(x)
    assert mtia_lab.fallback_counts() == {}
    torch.testing.assert_close(out.cpu(), torch.cumprod(x.cpu() * 2, 1))
    with mtia_lab.strict(), pytest.raises(mtia_lab.StrictModeError, match="cumprod"):
        torch.cumprod(x, 1)  # eager strict mode still refuses


def test_default_compile_follows_new_batch_sizes_with_one_dynamic_graph():
    """Dynamo compiles batch 4 static, then goes symbolic at 7: that graph serves 9 too."""
    torch.manual_seed(0)
    model = MLP().to(DEV)
    torch.compiler.reset()
    start = len(COMPILED)
    compiled = torch.compile(model, backend="mtia_lab")
    for batch in (4, 7, 9):
        x = torch.randn(batch, 8, device=DEV)
        out = compiled(x)
        out.sum().backward()
        grads = [p.grad.cpu() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
        expected = model(x)
        expected.sum().backward()
        torch.testing.assert_close(out.cpu(), expected.cpu(), rtol=1e-4, atol=1e-5)
        for got, want in zip(grads, [p.grad.cpu() for p in model.parameters()], strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        model.zero_grad(set_to_none=True)
    forwards = [c for c in COMPILED[start:] if c.name.startswith("forward")]
    assert len(forwards) == 2  # static at 4, symbolic from 7 on: no recompile at 9


def test_a_dynamic_graph_charges_the_clock_for_the_size_it_runs_at():
    """Planned at the size it compiled for, priced again at each new size: a call at batch
    900 costs what the graph compiled statically for 900 costs."""
    torch.manual_seed(0)
    model = MLP().to(DEV)
    stream = torch.mtia_sim.current_stream()
    with torch.no_grad():
        torch.compiler.reset()
        compiled = torch.compile(model, backend="mtia_lab")
        for batch in (4, 7):  # the second call makes the batch dimension symbolic
            compiled(torch.randn(batch, 8, device=DEV))
        big = torch.randn(900, 8, device=DEV)
        before = stream.clock_us
        compiled(big)
        dynamic_us = stream.clock_us - before
        torch.compiler.reset()
        start = len(COMPILED)
        torch.compile(model, backend="mtia_lab", dynamic=False)(big)
    static_plan = COMPILED[start].plan
    small_plan_us = COMPILED[start - 1].plan.after.time_us  # the dynamic graph, at batch 7
    assert dynamic_us == pytest.approx(static_plan.after.time_us)
    assert dynamic_us > small_plan_us


def dropout_fn(x):
    return F.dropout(x, 0.5, training=True) * 3


def test_compiled_dropout_draws_from_the_device_generator():
    x = torch.ones(64, 16, device=DEV)
    torch.compiler.reset()
    compiled = torch.compile(dropout_fn, backend="mtia_lab")

    def run(device_seed, host_seed):
        torch.mtia_sim.manual_seed(device_seed)
        torch.default_generator.manual_seed(host_seed)  # the CPU generator only
        return compiled(x).cpu()

    first = run(1, 10)
    torch.testing.assert_close(run(1, 11), first, rtol=0, atol=0)  # the host seed is ignored
    assert not torch.equal(run(2, 10), first)  # the device seed decides
    assert 0.3 < (first != 0).float().mean() < 0.7
    state = torch.mtia_sim.get_rng_state()
    compiled(x)
    assert not torch.equal(torch.mtia_sim.get_rng_state(), state)  # the draw advanced it


def test_compiled_outputs_hold_device_memory_until_freed():
    torch.manual_seed(0)
    model, x = MLP().to(DEV), torch.randn(300, 8, device=DEV)
    with torch.no_grad():
        torch.compiler.reset()
        compiled = torch.compile(model, backend="mtia_lab")
        compiled(x)  # compile first
        before = torch.mtia_sim.memory_allocated()
        out = compiled(x)
        held = torch.mtia_sim.memory_allocated() - before
        block = mtia_lab.storage_of(out).block
        assert block is not None and block.op == "compiled"
        assert held == round_size(out.numel() * out.element_size())
        del out
    assert torch.mtia_sim.memory_allocated() == before


def test_intermediates_hold_device_memory_from_writer_to_last_reader():
    """The gelu output between the two matmuls takes a block while the second matmul reads it;
    unfused, the first matmul's output is another one, alive at the same time."""
    torch.manual_seed(0)
    model, x = MLP().to(DEV), torch.randn(300, 8, device=DEV)
    hidden = round_size(300 * 32 * 4)  # one (300, 32) float buffer

    def peak_of_a_call(**settings):
        with torch.no_grad(), config.patch(**settings):
            torch.compiler.reset()
            compiled = torch.compile(model, backend="mtia_lab")
            compiled(x)  # compile first
            torch.mtia_sim.reset_peak_memory_stats()
            base = torch.mtia_sim.memory_allocated()
            out = compiled(x)
            peak = torch.mtia_sim.max_memory_allocated() - base
            held = torch.mtia_sim.memory_allocated() - base
            torch.testing.assert_close(out.cpu(), model(x).cpu())
        return peak, held, COMPILED[-1].plan.kernel_count

    fused_peak, fused_held, fused_kernels = peak_of_a_call()
    unfused_peak, unfused_held, unfused_kernels = peak_of_a_call(max_fusion_size=1)
    assert (fused_kernels, unfused_kernels) == (2, 3)
    assert fused_peak == hidden  # gelu's buffer, while the second matmul runs
    assert unfused_peak == 2 * hidden  # addmm's and gelu's outputs, while gelu runs
    assert fused_held == unfused_held == round_size(300 * 4 * 4)  # only the output stays


def test_amp_training_step_compiled_matches_eager_autocast():
    """A bf16 autocast training step (linear, layer norm, softmax) compiled == eager."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.ln, self.fc2 = nn.Linear(16, 32), nn.LayerNorm(32), nn.Linear(32, 8)

        def forward(self, x):
            return torch.softmax(self.fc2(F.gelu(self.ln(self.fc1(x)))), dim=-1)

    def step(fn, model, x, target):
        with torch.autocast(DEV, dtype=torch.bfloat16):
            out = fn(x)
            loss = F.mse_loss(out.float(), target)
        loss.backward()
        grads = [p.grad.cpu() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
        return out, loss, grads

    torch.manual_seed(0)
    model = Net().to(DEV)
    x, target = torch.randn(6, 16, device=DEV), torch.rand(6, 8, device=DEV)
    torch.compiler.reset()
    start = len(COMPILED)
    out, loss, grads = step(torch.compile(model, backend="mtia_lab"), model, x, target)
    eager_out, eager_loss, eager_grads = step(model, model, x, target)
    assert out.dtype == eager_out.dtype  # softmax runs in float32 under autocast
    torch.testing.assert_close(out.cpu(), eager_out.cpu(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(loss.cpu(), eager_loss.cpu(), rtol=2e-2, atol=1e-3)
    for got, want in zip(grads, eager_grads, strict=True):
        assert got.dtype == want.dtype == torch.float32  # the parameters' dtype
        torch.testing.assert_close(got, want, rtol=5e-2, atol=5e-3)
    forward = COMPILED[start]
    matmuls = [n for n in forward.gm.graph.nodes if n.target == torch.ops.aten.addmm.default]
    assert matmuls and all(n.meta["val"].dtype == torch.bfloat16 for n in matmuls)
    assert any(g.cost.low_precision for g in forward.plan.groups)


def test_the_backend_is_an_entry_point_and_import_leaves_dynamo_alone():
    """pyproject.toml's `torch_dynamo_backends` entry point is how Dynamo finds "mtia_lab";
    `import mtia_lab` does not import torch._dynamo (about a second)."""
    entry = importlib.metadata.entry_points(group="torch_dynamo_backends")["mtia_lab"]
    assert entry.load() is mtia_lab_backend
    code = (
        "import sys, torch, mtia_lab\n"
        "assert 'torch._dynamo' not in sys.modules, 'import mtia_lab imported torch._dynamo'\n"
        "m = torch.nn.Linear(3, 2).to('mtia_sim')\n"
        "x = torch.randn(4, 3, device='mtia_sim')\n"
        "out = torch.compile(m, backend='mtia_lab')(x)\n"
        "torch.testing.assert_close(out.cpu(), m(x).cpu())\n"
        "from mtia_lab.compiler import COMPILED\n"
        "assert len(COMPILED) == 1\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr[-2000:]


# Tensors the compiled function creates on the device itself (`device=x.device`).


def positions(i, w):
    pos = torch.arange(i.shape[0], device=i.device)
    return F.embedding(pos, w) + torch.ones(4, device=w.device)


def device_kwargs(gm: torch.fx.GraphModule) -> list[str]:
    return [n.name for n in gm.graph.nodes
            if isinstance(n.kwargs.get("device"), torch.device)
            and n.kwargs["device"].type == DEV]


def test_factories_on_the_device_inside_a_compiled_function_match_eager():
    """arange and ones with `device=` inside the function: the compiled graph makes them as
    host buffers like any intermediate (no device= left, no copies), and the result is a device
    tensor equal to the CPU reference. Compiling costs the allocator nothing."""
    torch.manual_seed(0)
    w, idx = torch.randn(10, 4), torch.tensor([3, 1, 4, 1, 5])
    wd, idxd = w.to(DEV), idx.to(DEV)
    torch.compiler.reset()
    start = len(COMPILED)
    compiled = torch.compile(positions, backend="mtia_lab", dynamic=False)
    counts = []
    for _ in range(2):
        before = allocations()
        out = compiled(idxd, wd)
        counts.append(allocations() - before)
        assert out.device == torch.device(DEV, 0) and isinstance(out, mtia_lab.MTIATensor)
        torch.testing.assert_close(out.cpu(), positions(idx, w))
        del out
    assert counts[0] == counts[1]  # the traced factories took no device memory
    (forward,) = COMPILED[start:]
    assert device_kwargs(forward.gm) == []
    ops = {n.target for n in forward.gm.graph.nodes}
    assert torch.ops.aten._to_copy.default not in ops


def hard_assign(q, k):
    """GroupViT's hard softmax: a one-hot made by `zeros_like` of scores no kernel stores."""
    scores = (q @ k.transpose(-2, -1)) * 0.17
    soft = scores.softmax(-2)
    one_hot = torch.zeros_like(scores).scatter_(-2, soft.max(-2, keepdim=True)[1], 1.0)
    return one_hot - soft.detach() + soft


def test_a_like_factory_of_an_unstored_intermediate_compiles_and_matches_eager():
    """`zeros_like(x)` reads x's metadata only, so the kernel that computes x (fused into a
    softmax here) does not store it; the factory's kernel must not ask for it either."""
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 32), torch.randn(2, 16, 32)
    torch.compiler.reset()
    start = len(COMPILED)
    out = torch.compile(hard_assign, backend="mtia_lab", dynamic=False)(q.to(DEV), k.to(DEV))
    torch.testing.assert_close(out.cpu(), hard_assign(q, k))
    (forward,) = COMPILED[start:]
    stored = {name for kernel in forward.program.kernels for name in kernel.outputs}
    produced = stored | set(forward.program.inputs)
    for kernel in forward.program.kernels:
        assert set(kernel.inputs) <= produced, kernel.source


def causal_attention(q, k, v):
    n = q.shape[-2]
    mask = torch.ones(n, n, device=q.device).tril()
    scores = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    return scores.masked_fill(mask == 0, float("-inf")).softmax(-1) @ v


def test_causal_mask_made_on_the_device_inside_compiled_attention():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 6, 8) for _ in range(3))
    torch.compiler.reset()
    out = torch.compile(causal_attention, backend="mtia_lab")(q.to(DEV), k.to(DEV), v.to(DEV))
    assert out.device.type == DEV
    torch.testing.assert_close(out.cpu(), causal_attention(q, k, v), rtol=1e-5, atol=1e-5)


def test_training_step_through_a_device_made_causal_mask():
    """The compiled forward makes its mask on the device; its compiled backward gives the
    gradients of the input and of a projection that eager CPU gives, on the device."""
    torch.manual_seed(0)
    proj = nn.Linear(8, 8)
    x = torch.randn(2, 6, 8)

    def grads(module, inp, compile_it):
        inp = inp.detach().requires_grad_()

        def forward(t):
            return causal_attention(module(t), t, t)

        out = (torch.compile(forward, backend="mtia_lab") if compile_it else forward)(inp)
        out.square().mean().backward()
        return [inp.grad] + [p.grad for p in module.parameters()]

    device_proj = nn.Linear(8, 8).to(DEV)
    device_proj.load_state_dict(proj.state_dict())
    torch.compiler.reset()
    start = len(COMPILED)
    got, want = grads(device_proj, x.to(DEV), True), grads(proj, x, False)
    for g, r in zip(got, want, strict=True):
        assert g.device.type == DEV
        torch.testing.assert_close(g.cpu(), r, rtol=1e-4, atol=1e-5)
    phases = [c.name.split("_")[0] for c in COMPILED[start:]]
    assert phases == ["forward", "backward"]
    assert all(device_kwargs(c.gm) == [] for c in COMPILED[start:])


def made_inside(x):
    """A factory's result returned as is, a host tensor moved with .to(x.device), and an
    in-place write into a buffer made on the device."""
    buffer = torch.zeros(x.shape, device=x.device)
    buffer.add_(x * 2)
    return torch.arange(4, device=x.device), x + torch.arange(4).to(x.device), buffer


def test_factory_outputs_moved_host_tensors_and_in_place_writes_compile():
    x = torch.randn(3, 4)
    torch.compiler.reset()
    outs = torch.compile(made_inside, backend="mtia_lab", dynamic=False)(x.to(DEV))
    for got, want in zip(outs, made_inside(x), strict=True):
        assert got.device.type == DEV and isinstance(got, mtia_lab.MTIATensor)
        torch.testing.assert_close(got.cpu(), want)
    assert device_kwargs(COMPILED[-1].gm) == []


def round_trip_plus_one(x, device=DEV):
    """Through the host and back: the result is made from a host tensor moved to the device."""
    return x.cpu().to(device) + 1


def moved_input(x, h):
    """A host input moved to the device and returned without touching a device tensor."""
    return h.to(x.device), h.to(device=x.device, dtype=torch.float64) * 2


def buffer_filled_by_copy(x, device=DEV):
    """A device buffer made inside, filled with `copy_`, then used."""
    buffer = torch.empty(x.shape[0], device=device)
    buffer.copy_(x[:, 0])
    return buffer * 2


@pytest.mark.parametrize("backend", ["mtia_lab", "aot_eager"])
def test_a_host_tensor_moved_to_the_device_inside_comes_back_on_the_device(backend):
    x = torch.randn(3, 4)
    torch.compiler.reset()
    got = torch.compile(round_trip_plus_one, backend=backend, dynamic=False)(x.to(DEV))
    assert got.device == torch.device(DEV, 0) and isinstance(got, mtia_lab.MTIATensor)
    torch.testing.assert_close(got.cpu(), round_trip_plus_one(x, "cpu"))


@pytest.mark.parametrize("backend", ["mtia_lab", "aot_eager"])
def test_a_moved_host_input_is_a_device_copy_not_the_callers_tensor(backend):
    """As in eager, `.to(device)` copies: writing the result leaves the caller's host tensor."""
    x, h = torch.randn(3, 4, device=DEV), torch.randn(3, 4)
    want = [t.cpu() for t in moved_input(x, h)]
    before = h.clone()
    torch.compiler.reset()
    got = torch.compile(moved_input, backend=backend, dynamic=False)(x, h)
    for g, w in zip(got, want, strict=True):
        assert g.device == torch.device(DEV, 0) and isinstance(g, mtia_lab.MTIATensor)
        torch.testing.assert_close(g.cpu(), w)
    got[0].add_(1)
    torch.testing.assert_close(h, before, rtol=0, atol=0)


@pytest.mark.parametrize("backend", ["mtia_lab", "aot_eager"])
def test_a_buffer_made_inside_and_filled_by_copy_matches_cpu(backend):
    x = torch.randn(3, 2)
    torch.compiler.reset()
    got = torch.compile(buffer_filled_by_copy, backend=backend, dynamic=False)(x.to(DEV))
    assert got.device == torch.device(DEV, 0) and isinstance(got, mtia_lab.MTIATensor)
    torch.testing.assert_close(got.cpu(), buffer_filled_by_copy(x, "cpu"))


def test_a_buffer_filled_from_the_host_by_copy_matches_cpu():
    """`buffer.copy_(host)` into a device buffer made inside: the copy crosses devices as in
    eager, and the result stays on the device."""

    def fill(x, h):
        buffer = torch.empty(h.shape, device=x.device)
        buffer.copy_(h)
        return buffer + x

    x, h = torch.randn(3, 4), torch.randn(3, 4)
    torch.compiler.reset()
    got = torch.compile(fill, backend="mtia_lab", dynamic=False)(x.to(DEV), h)
    assert got.device == torch.device(DEV, 0)
    torch.testing.assert_close(got.cpu(), fill(x, h))


def test_a_random_factory_on_the_device_draws_from_the_device_generator():
    x = torch.zeros(8, 16, device=DEV)

    def noisy(t):
        return t + torch.randn(8, 16, device=t.device)

    torch.compiler.reset()
    compiled = torch.compile(noisy, backend="mtia_lab", dynamic=False)
    torch.mtia_sim.manual_seed(3)
    got = compiled(x).cpu()
    torch.mtia_sim.manual_seed(3)
    torch.testing.assert_close(got, noisy(x).cpu(), rtol=0, atol=0)  # the eager draw


def grad_through_a_device_mask(x):
    """A training step that builds its mask inside `torch.func.grad`: the factory's result is
    functorch's TensorWrapper at the grad level, not a plain tensor."""

    def loss(w):
        mask = torch.ones(2, 16, device=x.device)
        return ((x * w).sum(-1) * mask).sin().sum()

    return torch.func.grad(loss)(torch.linspace(0, 1, 8, device=x.device))


def grad_of_grad_through_a_device_mask(x):
    """The mask two grad levels deep: a TensorWrapper around a TensorWrapper."""
    return torch.func.grad(lambda w: grad_through_a_device_mask(x * w).square().sum())(
        torch.ones(8, device=x.device))


def vmap_of_a_device_factory(x):
    """`ones_like` of a batched row with `device=` inside vmap: a BatchedTensor."""
    return torch.vmap(lambda r: r * torch.ones_like(r, device=r.device)
                      + torch.arange(8, device=r.device))(x)


@pytest.mark.parametrize("fn", [grad_through_a_device_mask, grad_of_grad_through_a_device_mask,
                                vmap_of_a_device_factory], ids=lambda fn: fn.__name__)
def test_a_factory_inside_a_func_transform_compiles_and_matches_cpu(fn):
    """factories.on_device puts what functorch's wrapper holds on the device and wraps
    it again at the same level, as eager builds it (it used to hand the wrapper itself to
    `wrap`, which took it for a sparse tensor)."""
    torch.manual_seed(0)
    x = torch.randn(2, 16, 8)
    torch.compiler.reset()
    got = torch.compile(fn, backend="mtia_lab", dynamic=False)(x.to(DEV))
    assert got.device == torch.device(DEV, 0) and isinstance(got, mtia_lab.MTIATensor)
    torch.testing.assert_close(got.cpu(), fn(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["mtia_lab", "aot_eager"])
def test_backward_inside_a_compiled_function_matches_cpu(backend):
    """`loss.backward()` is a graph break: Dynamo runs it eagerly, and must not trace the device's
    own Python (MTIATensor.__new__, the kernels) that autograd calls back into."""
    torch.manual_seed(0)
    cpu_lin, x = nn.Linear(4, 2), torch.randn(3, 4)
    dev_lin = nn.Linear(4, 2)
    dev_lin.load_state_dict(cpu_lin.state_dict())
    dev_lin.to(DEV)

    def step(lin, x):
        loss = lin(x).sum()
        loss.backward()
        return loss

    want = step(cpu_lin, x)
    torch.compiler.reset()
    got = torch.compile(step, backend=backend)(dev_lin, x.to(DEV))
    assert got.device.type == DEV
    torch.testing.assert_close(got.detach().cpu(), want.detach())
    for name, param in cpu_lin.named_parameters():
        dev_grad = dict(dev_lin.named_parameters())[name].grad
        assert dev_grad is not None and dev_grad.device.type == DEV, name
        torch.testing.assert_close(dev_grad.cpu(), param.grad, msg=name)


STORED = None  # written by a compiled function below


def store_doubled(x):
    """A global store, then `tolist()`: a graph break whose eager code reads the stored device
    tensor back through the device's own Python (which Dynamo must leave untraced)."""
    global STORED
    STORED = x * 2
    values = STORED.tolist()
    return STORED + 1, values


@pytest.mark.parametrize("backend", ["mtia_lab", "aot_eager"])
def test_a_compiled_function_stores_a_device_tensor_in_a_global(backend):
    global STORED
    x = torch.randn(3, 4)
    STORED = None
    torch.compiler.reset()
    got, got_values = torch.compile(store_doubled, backend=backend)(x.to(DEV))
    stored, STORED = STORED, None
    want, want_values = store_doubled(x)
    assert isinstance(stored, mtia_lab.MTIATensor) and got.device.type == DEV
    torch.testing.assert_close(stored.cpu(), STORED)
    torch.testing.assert_close(got.cpu(), want)
    assert got_values == want_values


@pytest.mark.parametrize("dynamo_first", [False, True])
def test_dynamo_skips_the_device_internals_whichever_is_imported_first(dynamo_first):
    """The skip rule reaches Dynamo both when it is imported after mtia_lab (an import hook)
    and before it; with any backend, without `import mtia_lab` importing Dynamo itself."""
    code = (
        "import sys, torch\n"
        + ("import torch._dynamo\n" if dynamo_first else "")
        + "import mtia_lab\n"
        f"assert ('torch._dynamo' in sys.modules) == {dynamo_first}\n"
        "x = torch.randn(3, 4, device='mtia_sim', requires_grad=True)\n"
        "def step(x):\n"
        "    loss = (x * x).sum()\n"
        "    loss.backward()\n"  # a graph break: autograd runs the device's Python eagerly
        "    return loss\n"
        "torch.compile(step, backend='aot_eager')(x)\n"
        "torch.testing.assert_close(x.grad.cpu(), 2 * x.detach().cpu())\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_dynamic_graph_recomputing_a_value_is_priced_with_its_recomputation():
    """computed_once=False: each reduction's kernel computes v again. At a new size the
    runner prices the same kernels again, recomputation included: a call at 900 rows costs
    what the graph compiled statically for 900 rows costs, and matches eager."""
    def fn(a, b, c, d):
        v = a + b + c + d
        return v.sum(-1), v.amax(0)

    stream = torch.mtia_sim.current_stream()
    with config.patch(computed_once=False):
        torch.compiler.reset()
        compiled = torch.compile(fn, backend="mtia_lab")
        for rows in (4, 7):  # the second call makes the row dimension symbolic
            compiled(*[torch.randn(rows, 16, device=DEV) for _ in range(4)])
        big = [torch.randn(900, 16, device=DEV) for _ in range(4)]
        before = stream.clock_us
        out = compiled(*big)
        dynamic_us = stream.clock_us - before
        torch.compiler.reset()
        start = len(COMPILED)
        torch.compile(fn, backend="mtia_lab", dynamic=False)(*big)
    static_plan = COMPILED[start].plan
    assert static_plan.recomputed and COMPILED[start - 1].plan.recomputed
    assert dynamic_us == pytest.approx(static_plan.after.time_us)
    for got, want in zip(out, fn(*[t.cpu() for t in big]), strict=True):
        torch.testing.assert_close(got.cpu(), want)
