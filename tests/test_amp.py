"""Autocast and GradScaler on mtia_sim: CUDA's cast policy, a bf16 training step, loss scaling."""

from __future__ import annotations

import copy
import pathlib
import re

import pytest
import torch
import torch.nn.functional as F

import mtia_lab
from mtia_lab.backend.aten import amp

BF16 = torch.bfloat16
LOW, FP32, WIDEST, SAME = "low", "fp32", "widest", "same"

# What CUDA's autocast documentation promises, op by op: (name, fn, inputs' dtypes, expected).
# Each fn gets fresh device tensors of the listed dtypes (shapes fixed per case).
POLICY_CASES = [
    ("mm", lambda a, b: torch.mm(a, b), [(3, 4), (4, 5)], LOW),
    ("matmul", lambda a, b: a @ b, [(2, 3, 4), (4, 5)], LOW),
    ("linear", lambda x, w, b: F.linear(x, w, b), [(3, 4), (5, 4), (5,)], LOW),
    ("addmm", lambda c, a, b: torch.addmm(c, a, b), [(3, 5), (3, 4), (4, 5)], LOW),
    ("bmm", lambda a, b: torch.bmm(a, b), [(2, 3, 4), (2, 4, 5)], LOW),
    ("baddbmm", lambda c, a, b: torch.baddbmm(c, a, b), [(2, 3, 5), (2, 3, 4), (2, 4, 5)], LOW),
    ("einsum", lambda a, b: torch.einsum("ij,jk->ik", a, b), [(3, 4), (4, 5)], LOW),
    ("conv2d", lambda x, w: F.conv2d(x, w), [(1, 2, 5, 5), (3, 2, 3, 3)], LOW),
    ("conv1d", lambda x, w: F.conv1d(x, w), [(1, 2, 7), (3, 2, 3)], LOW),
    ("conv_transpose2d", lambda x, w: F.conv_transpose2d(x, w), [(1, 2, 4, 4), (2, 3, 3, 3)], LOW),
    ("addmv", lambda c, a, v: torch.addmv(c, a, v), [(3,), (3, 4), (4,)], LOW),
    ("addr", lambda c, a, b: torch.addr(c, a, b), [(3, 4), (3,), (4,)], LOW),
    ("prelu", lambda x, w: F.prelu(x, w), [(2, 3), (3,)], LOW),
    ("multi_dot", lambda a, b, c: torch.linalg.multi_dot([a, b, c]), [(2, 3), (3, 4), (4, 2)],
     LOW),
    ("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
     [(1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)], LOW),
    ("exp", lambda x: torch.exp(x), [(4,)], FP32),
    ("cosine_similarity", lambda a, b: F.cosine_similarity(a, b), [(3, 4), (3, 4)], FP32),
    ("kl_div", lambda a, b: F.kl_div(a, b, reduction="batchmean"), [(3, 4), (3, 4)], FP32),
    ("bce_with_logits", lambda a, b: F.binary_cross_entropy_with_logits(a, b.sigmoid()),
     [(3, 4), (3, 4)], FP32),
    ("cdist", lambda a, b: torch.cdist(a, b), [(3, 4), (5, 4)], FP32),
    ("interpolate", lambda x: F.interpolate(x, scale_factor=2.0), [(1, 2, 3, 3)], FP32),
    ("prod", lambda x: torch.prod(x, 1), [(3, 4)], FP32),
    ("cumprod", lambda x: torch.cumprod(x, 1), [(3, 4)], FP32),
    ("log", lambda x: torch.log(x.abs() + 1), [(4,)], FP32),
    ("pow", lambda x: torch.pow(x, 2), [(4,)], FP32),
    ("rsqrt", lambda x: torch.rsqrt(x.abs() + 1), [(4,)], FP32),
    ("layer_norm", lambda x: F.layer_norm(x, (4,)), [(3, 4)], FP32),
    ("group_norm", lambda x: F.group_norm(x, 2), [(2, 4, 3)], FP32),
    ("mse_loss", lambda a, b: F.mse_loss(a, b), [(3, 4), (3, 4)], FP32),
    ("l1_loss", lambda a, b: F.l1_loss(a, b), [(3, 4), (3, 4)], FP32),
    ("softmax", lambda x: torch.softmax(x, -1), [(3, 4)], FP32),
    ("log_softmax", lambda x: torch.log_softmax(x, -1), [(3, 4)], FP32),
    ("sum", lambda x: x.sum(), [(3, 4)], FP32),
    ("sum_dim", lambda x: x.sum(1), [(3, 4)], FP32),
    ("cumsum", lambda x: torch.cumsum(x, 0), [(3, 4)], FP32),
    ("logsumexp", lambda x: torch.logsumexp(x, 1), [(3, 4)], FP32),
    ("norm", lambda x: torch.norm(x), [(3, 4)], FP32),
    ("norm_Scalar", lambda x: torch.ops.aten.norm.Scalar(x, 2), [(3, 4)], FP32),
    ("norm_ScalarOpt_dim", lambda x: torch.ops.aten.norm.ScalarOpt_dim(x, 2, [1]), [(3, 4)], FP32),
    ("cross_entropy", lambda x: F.cross_entropy(x, torch.zeros(3, dtype=torch.long,
                                                                device=x.device)), [(3, 4)], FP32),
    ("addcmul", lambda a, b, c: torch.addcmul(a, b, c), [(4,), (4,), (4,)], WIDEST),
    ("atan2", lambda a, b: torch.atan2(a, b), [(4,), (4,)], WIDEST),
    ("dot", lambda a, b: torch.dot(a, b), [(4,), (4,)], WIDEST),
    ("add", lambda a, b: a + b, [(4,), (4,)], SAME),  # native type promotion, no autocast
    ("relu", lambda x: torch.relu(x), [(4,)], SAME),
    ("cat", lambda a, b: torch.cat([a, b]), [(4,), (4,)], SAME),
]
NO_HOST_KERNEL = {("cdist", BF16)}  # the CPU has no bf16 cdist: only autocast's fp32 runs


def _expected(kind: str, dtypes: list[torch.dtype]) -> torch.dtype:
    if kind == LOW:
        return BF16
    if kind == FP32:
        return torch.float32
    widest = BF16 if kind == WIDEST else dtypes[0]
    for dtype in dtypes:
        widest = torch.promote_types(widest, dtype)
    return widest


@pytest.mark.parametrize("input_dtype", [torch.float32, BF16])
@pytest.mark.parametrize("name,fn,shapes,kind", POLICY_CASES, ids=[c[0] for c in POLICY_CASES])
def test_output_dtype_follows_cuda_policy(device, name, fn, shapes, kind, input_dtype):
    dtypes = [input_dtype] * len(shapes)
    if kind == WIDEST:
        dtypes[0] = torch.float32 if input_dtype == BF16 else BF16  # mixed on purpose
    inputs = [torch.randn(s, device=device, dtype=d) for s, d in zip(shapes, dtypes, strict=True)]
    with torch.autocast(device.type, dtype=BF16):
        out = fn(*inputs)
    assert out.device == device
    assert out.dtype == _expected(kind, dtypes), f"{name} on {dtypes}"
    if kind != WIDEST and (name, input_dtype) not in NO_HOST_KERNEL:
        # outside autocast the op keeps its inputs' dtype
        assert fn(*inputs).dtype == input_dtype


def test_float16_is_the_low_dtype_when_asked(device):
    a = torch.randn(3, 4, device=device)
    with torch.autocast(device.type, dtype=torch.float16):
        assert (a @ a.t()).dtype == torch.float16
        assert torch.exp(a.half()).dtype == torch.float32


def test_float64_integers_and_host_tensors_are_not_cast(device):
    a64 = torch.randn(3, 3, device=device, dtype=torch.float64)
    host = torch.randn(3, 3)
    values = torch.randn(5, device=device)
    with torch.autocast(device.type, dtype=BF16):
        assert (a64 @ a64).dtype == torch.float64
        assert (host @ host).dtype == torch.float32  # CPU autocast is not enabled
        index = torch.tensor([0, 2], device=device)
        out = torch.index_put(values, (index,), torch.ones(2, device=device, dtype=BF16))
    assert out.dtype == torch.float32 and index.dtype == torch.int64
    torch.testing.assert_close(out.cpu()[[0, 2]], torch.ones(2))


def test_explicit_dtype_and_disabled_region_are_respected(device):
    x = torch.randn(3, 4, device=device, dtype=BF16)
    with torch.autocast(device.type, dtype=BF16):
        assert torch.softmax(x, -1, dtype=torch.float64).dtype == torch.float64
        with torch.autocast(device.type, enabled=False):
            assert (x @ x.t().float().bfloat16()).dtype == BF16
            assert torch.exp(x).dtype == BF16
        assert torch.exp(x).dtype == torch.float32


def test_binary_cross_entropy_is_refused_with_the_safe_alternative(device):
    p = torch.rand(4, device=device)
    with torch.autocast(device.type, dtype=BF16), pytest.raises(RuntimeError, match="with_logits"):
        F.binary_cross_entropy(p, torch.ones(4, device=device))


def test_autocast_values_equal_cpu_with_the_same_casts(device):
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    with torch.autocast(device.type, dtype=BF16):
        out = torch.mm(a.to(device), b.to(device))
        soft = torch.softmax(out, -1)
    torch.testing.assert_close(out.cpu(), a.bfloat16() @ b.bfloat16(), rtol=0, atol=0)
    torch.testing.assert_close(soft.cpu(), torch.softmax(a.bfloat16() @ b.bfloat16(), -1,
                                                         dtype=torch.float32), rtol=0, atol=0)


def test_policy_of_names_the_rule_an_op_gets():
    aten = torch.ops.aten
    assert amp.policy_of(aten.mm.default) == "lower_precision_fp"
    assert amp.policy_of(aten.pow.Tensor_Scalar) == "fp32"
    assert amp.policy_of(aten.pow.Tensor_Tensor) == "fp32"
    assert amp.policy_of(aten.softmax.int) == "fp32_set_opt_dtype"
    assert amp.policy_of(aten.norm.Scalar) == "fp32_append_dtype"
    assert amp.policy_of(aten.addcmul.default) == "promote"
    assert amp.policy_of(aten.binary_cross_entropy.default) == "banned"
    assert amp.policy_of(aten.add.Tensor) == "fallthrough"
    assert amp.policy_of(aten.sum.IntList_out) == "fallthrough"  # only listed overloads


def test_policy_lists_match_atens_cuda_lists():
    """Our op lists are ATen's AT_FORALL_* macros, which CUDA's autocast registers."""
    header = pathlib.Path(torch.__file__).parent / "include/ATen/autocast_mode.h"
    if not header.exists():
        pytest.skip("this torch build ships no ATen headers")
    text = header.read_text()

    def macro(name: str) -> list[str]:
        body = re.search(rf"#define {name}\(_\)(.*?)\n\n", text, re.S).group(1)
        entries = re.findall(r"_\(([^()]*)\)", body)
        return [".".join(part.strip() for part in entry.split(",")) for entry in entries]

    assert amp.LOWER_PRECISION_FP == macro("AT_FORALL_LOWER_PRECISION_FP")
    assert amp.FP32 == macro("AT_FORALL_FP32")
    assert amp.FP32_SET_OPT_DTYPE == macro("AT_FORALL_FP32_SET_OPT_DTYPE")
    assert amp.PROMOTE == macro("AT_FORALL_PROMOTE")
    for name in amp.POLICIES:
        amp.overload(name)  # every listed overload exists on this torch


# -- a training step -----------------------------------------------------------------------------
class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(self.norm(torch.relu(self.fc1(x))))


def _batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(16, 12, generator=g), torch.randint(0, 5, (16,), generator=g)


def _casts_by_hand(model: MLP, x, y):
    """CUDA's policy written out on the host: linear in bf16, layer norm and the loss in fp32."""
    h = torch.relu(F.linear(x.bfloat16(), model.fc1.weight.bfloat16(), model.fc1.bias.bfloat16()))
    h = F.layer_norm(h.float(), (32,), model.norm.weight, model.norm.bias)
    logits = F.linear(h.bfloat16(), model.fc2.weight.bfloat16(), model.fc2.bias.bfloat16())
    # cross_entropy calls log_softmax with an explicit dtype (the logits' own: bf16), so
    # fp32_set_opt_dtype leaves it alone; only nll_loss, on the fp32 list, upcasts.
    return F.nll_loss(torch.log_softmax(logits, -1).float(), y)


def _step(model, loss_fn):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = loss_fn()
    loss.backward()
    grads = {n: p.grad.detach().cpu().clone() for n, p in model.named_parameters()}
    optimizer.step()
    return loss.detach().cpu(), grads, {n: p.detach().cpu() for n, p in model.named_parameters()}


def test_training_step_matches_cpu(device):
    torch.manual_seed(0)
    host_model = MLP()
    device_model = copy.deepcopy(host_model).to(device)
    cpu_autocast_model = copy.deepcopy(host_model)
    x, y = _batch()

    def on_device():
        with torch.autocast(device.type, dtype=BF16):
            logits = device_model(x.to(device))
            assert logits.dtype == BF16
            assert device_model.norm(device_model.fc1(x.to(device))).dtype == torch.float32
            loss = F.cross_entropy(logits, y.to(device))
        assert loss.dtype == torch.float32
        return loss

    def on_cpu_autocast():
        with torch.autocast("cpu", dtype=BF16):
            return F.cross_entropy(cpu_autocast_model(x), y)

    loss, grads, params = _step(device_model, on_device)
    ref_loss, ref_grads, ref_params = _step(host_model, lambda: _casts_by_hand(host_model, x, y))
    cpu_loss, cpu_grads, cpu_params = _step(cpu_autocast_model, on_cpu_autocast)

    # The same casts at the same places: the device computes exactly what the host computes.
    torch.testing.assert_close(loss, ref_loss, rtol=0, atol=0)
    for name in ref_grads:
        assert grads[name].dtype == torch.float32  # parameters and their grads stay fp32
        torch.testing.assert_close(grads[name], ref_grads[name], rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(params[name], ref_params[name], rtol=1e-6, atol=1e-7)
    # CPU autocast keeps layer_norm in bf16 where CUDA's policy uses fp32: close, not equal.
    torch.testing.assert_close(loss, cpu_loss, rtol=2e-2, atol=2e-2)
    for name in cpu_grads:
        torch.testing.assert_close(grads[name], cpu_grads[name], rtol=5e-2, atol=2e-2)


# -- GradScaler ----------------------------------------------------------------------------------
def test_grad_scaler_scale_unscale_and_update(device):
    scaler = torch.amp.GradScaler(device.type, init_scale=1024.0, growth_interval=2)
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0], device=device))
    optimizer = torch.optim.SGD([p], lr=0.5)
    expected_p, scale = torch.tensor([1.0, -2.0, 3.0]), 1024.0
    for step in range(3):
        loss = (p * p).sum()
        scaled = scaler.scale(loss)
        assert scaled.device == device
        torch.testing.assert_close(scaled.cpu(), loss.detach().cpu() * scale)
        scaled.backward()
        torch.testing.assert_close(p.grad.cpu(), 2 * expected_p * scale)
        scaler.unscale_(optimizer)
        torch.testing.assert_close(p.grad.cpu(), 2 * expected_p)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        expected_p = expected_p - 0.5 * 2 * expected_p
        if step % 2 == 1:  # growth_interval clean steps in a row double the scale
            scale *= 2.0
        torch.testing.assert_close(p.detach().cpu(), expected_p)
        assert scaler.get_scale() == scale


def test_grad_scaler_skips_the_step_on_inf_and_backs_off(device):
    scaler = torch.amp.GradScaler(device.type, init_scale=256.0, backoff_factor=0.25)
    p = torch.nn.Parameter(torch.ones(4, device=device))
    q = torch.nn.Parameter(torch.ones(2, device=device))
    optimizer = torch.optim.SGD([p, q], lr=0.1)
    scaler.scale((p * 2).sum() + q.sum()).backward()
    with torch.no_grad():
        q.grad[1] = float("inf")  # one bad gradient anywhere poisons the whole step
    scaler.unscale_(optimizer)
    torch.testing.assert_close(p.grad.cpu(), torch.full((4,), 2.0))  # still unscaled
    scaler.step(optimizer)
    scaler.update()
    torch.testing.assert_close(p.detach().cpu(), torch.ones(4))  # step skipped
    torch.testing.assert_close(q.detach().cpu(), torch.ones(2))
    assert scaler.get_scale() == 256.0 * 0.25


def test_grad_scaler_kernels_match_cpu(device):
    grads = [torch.randn(5) * 100, torch.tensor([1.0, float("nan")]), torch.randn(3)]
    inv = torch.tensor([0.125])
    for poison in (False, True):
        host = [g.clone() for g in (grads if poison else grads[::2])]
        dev = [g.to(device) for g in host]
        found, found_dev = torch.zeros(1), torch.zeros(1, device=device)
        torch._amp_foreach_non_finite_check_and_unscale_(host, found, inv)
        torch._amp_foreach_non_finite_check_and_unscale_(dev, found_dev, inv.to(device))
        for h, d in zip(host, dev, strict=True):
            torch.testing.assert_close(d.cpu(), h, equal_nan=True)
        torch.testing.assert_close(found_dev.cpu(), found)
        scale, tracker = torch.tensor([8.0]), torch.tensor([3], dtype=torch.int32)
        scale_d, tracker_d = scale.to(device), tracker.to(device)
        torch._amp_update_scale_(scale, tracker, found, 2.0, 0.5, 4)
        out = torch._amp_update_scale_(scale_d, tracker_d, found_dev, 2.0, 0.5, 4)
        assert out is scale_d
        torch.testing.assert_close(scale_d.cpu(), scale)
        torch.testing.assert_close(tracker_d.cpu(), tracker)


def test_grad_scaler_training_loop_matches_cpu(device):
    torch.manual_seed(0)
    host_model = MLP()
    device_model = copy.deepcopy(host_model).to(device)
    x, y = _batch()
    runs = {}
    for where, model in (("cpu", host_model), (device.type, device_model)):
        scaler = torch.amp.GradScaler(where, init_scale=2.0**16, growth_interval=1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        for _ in range(3):
            optimizer.zero_grad()
            if where == "cpu":
                loss = _casts_by_hand(model, x, y)
            else:
                with torch.autocast(where, dtype=BF16):
                    loss = F.cross_entropy(model(x.to(device)), y.to(device))
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        params = {n: p.detach().cpu() for n, p in model.named_parameters()}
        runs[where] = (scaler.get_scale(), params)
    assert runs["cpu"][0] == runs[device.type][0] == 2.0**19
    for name, value in runs["cpu"][1].items():
        torch.testing.assert_close(runs[device.type][1][name], value, rtol=1e-5, atol=1e-6)


def test_amp_training_step_with_grad_scaler_needs_no_cpu_fallback(device):
    """Casts, the fp32 ops, loss scaling and unscaling all have device kernels."""
    model = MLP().to(device)
    before = [p.detach().cpu().clone() for p in model.parameters()]
    x, y = _batch()
    scaler = torch.amp.GradScaler(device.type)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with mtia_lab.strict():
        with torch.autocast(device.type, dtype=BF16):
            loss = F.cross_entropy(model(x.to(device)), y.to(device))
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    assert scaler.get_scale() == 2.0**16  # no inf/nan found: the step was taken
    after = [p.detach().cpu() for p in model.parameters()]
    assert all(not torch.equal(a, b) for a, b in zip(after, before, strict=True))


def test_autocast_inside_torch_compile_matches_eager(device):
    import mtia_lab.compiler  # noqa: F401  (registers the "mtia_lab" backend)

    def f(a, b):
        with torch.autocast(device.type, dtype=BF16):
            h = torch.relu(a @ b)
            return h, torch.softmax(h, -1), h.sum()

    a, b = torch.randn(8, 16, device=device), torch.randn(16, 8, device=device)
    eager = f(a, b)
    compiled = torch.compile(f, backend="mtia_lab", fullgraph=True)(a, b)
    for e, c in zip(eager, compiled, strict=True):
        assert c.dtype == e.dtype and c.device == device
        torch.testing.assert_close(c.cpu(), e.cpu())


def test_active_rule_tells_a_trace_which_ops_autocast_produced(device):
    from mtia_lab.backend.aten import dispatch

    seen = []

    class Observer:
        def before_op(self, func, kind, args, kwargs, device_state):
            seen.append((func, torch.is_autocast_enabled(device.type), amp.active_rule()))

        def after_op(self, *args):
            pass

    a = torch.randn(3, 4, device=device)
    previous = dispatch.set_observer(Observer())
    try:
        with torch.autocast(device.type, dtype=BF16):
            torch.exp(torch.mm(a, a.t()) + 1)
    finally:
        dispatch.set_observer(previous)
    aten = torch.ops.aten
    rules = {(func, rule) for func, _, rule in seen}
    assert (aten._to_copy.default, ("mm", "lower_precision_fp")) in rules  # the casts
    assert (aten.mm.default, ("mm", "lower_precision_fp")) in rules
    assert (aten.add.Tensor, None) in rules  # fell through
    assert (aten._to_copy.default, ("exp", "fp32")) in rules
    assert (aten.exp.default, ("exp", "fp32")) in rules
    assert not any(enabled for _, enabled, _ in seen)  # why the trace cannot ask PyTorch
    assert amp.active_rule() is None
