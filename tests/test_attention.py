"""Fused attention on the device (backend/aten/attention.py): SDPA's OVERRIDEABLE backend.

The device answers `torch._fused_sdp_choice` as a PrivateUse1 backend with a fused kernel does
(torch_openreg, MTIA): OVERRIDEABLE where its kernel takes the inputs, MATH elsewhere. The fused
op and its backward are checked against CPU autograd of PyTorch's math path, eager and
compiled with both compilers.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import mtia_lab
from mtia_lab.backend.runtime import cost

DEVICE = "mtia_sim"
aten = torch.ops.aten
FUSED = "aten::_scaled_dot_product_fused_attention_overrideable"
TOLERANCE = {torch.float32: {"atol": 2e-5, "rtol": 1e-4},
             torch.float16: {"atol": 2e-3, "rtol": 2e-3},
             torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2}}


def _qkv(batch=2, heads=3, length=5, source=7, dim=8, dtype=torch.float32, value_dim=None):
    torch.manual_seed(0)
    return (torch.randn(batch, heads, length, dim, dtype=dtype),
            torch.randn(batch, heads, source, dim, dtype=dtype),
            torch.randn(batch, heads, source, value_dim or dim, dtype=dtype))


def _choice(*tensors, **kwargs) -> int:
    return torch._fused_sdp_choice(*[t.to(DEVICE) for t in tensors], **kwargs)


# -- the choice ------------------------------------------------------------------------------
def test_choice_is_overrideable_for_what_the_fused_kernel_takes():
    q, k, v = _qkv(dtype=torch.float16)
    overrideable = SDPBackend.OVERRIDEABLE.value
    assert _choice(q, k, v) == overrideable
    assert _choice(q, k, v, torch.rand(2, 3, 5, 7, dtype=torch.float16)) == overrideable
    assert _choice(q, k, v, torch.rand(5, 7) > 0.5) == overrideable  # broadcast boolean mask
    assert _choice(q, k, v, is_causal=True) == overrideable


@pytest.mark.parametrize("case", ["dropout", "gqa", "3-D", "float64", "empty", "causal+mask"])
def test_choice_is_math_where_the_fused_kernel_cannot_take_the_inputs(case):
    q, k, v = _qkv()
    kwargs = {}
    if case == "dropout":
        kwargs["dropout_p"] = 0.1
    elif case == "gqa":
        k, v, kwargs["enable_gqa"] = k[:, :1], v[:, :1], True
    elif case == "3-D":
        q, k, v = q[0], k[0], v[0]
    elif case == "float64":
        q, k, v = q.double(), k.double(), v.double()
    elif case == "empty":
        q = q[:, :, :0]
    else:
        kwargs.update(attn_mask=torch.ones(5, 7, dtype=torch.bool), is_causal=True)
    if "attn_mask" in kwargs:
        kwargs["attn_mask"] = kwargs["attn_mask"].to(DEVICE)
    assert _choice(q, k, v, **kwargs) == SDPBackend.MATH.value


def test_choice_follows_sdpa_kernel():
    q, k, v = _qkv()
    with sdpa_kernel(SDPBackend.MATH):
        assert _choice(q, k, v) == SDPBackend.MATH.value
    with sdpa_kernel(SDPBackend.OVERRIDEABLE):
        assert _choice(q, k, v) == SDPBackend.OVERRIDEABLE.value
        with pytest.raises(RuntimeError, match="No viable backend.*dropout.*SDPBackend.MATH"):
            F.scaled_dot_product_attention(*[t.to(DEVICE) for t in (q, k, v)], dropout_p=0.5)


# -- forward and backward against the CPU's math path ----------------------------------------
def _masks(case: str):
    if case == "bool mask":
        mask = torch.rand(5, 7) > 0.4
        mask[2] = False  # a row that attends to nothing: zeros, as the math path's safe softmax
        return {"attn_mask": mask}
    if case == "float mask":
        return {"attn_mask": torch.randn(2, 1, 5, 7, requires_grad=True)}
    if case == "causal":
        return {"is_causal": True}
    if case == "scale":
        return {"scale": 0.3}
    return {}


def _device_copy(value):
    if not isinstance(value, torch.Tensor):
        return value
    return value.detach().to(DEVICE).requires_grad_(value.requires_grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", ["plain", "bool mask", "float mask", "causal", "scale"])
def test_fused_attention_and_its_backward_match_cpu_math(case, dtype):
    q, k, v = (t.requires_grad_() for t in _qkv(dtype=dtype, value_dim=6))
    kwargs = _masks(case)
    mask = kwargs.get("attn_mask")
    if mask is not None and mask.is_floating_point():  # a float mask has the query's dtype
        kwargs["attn_mask"] = mask.detach().to(dtype).requires_grad_()
    dev = [_device_copy(t) for t in (q, k, v)]
    dev_kwargs = {name: _device_copy(value) for name, value in kwargs.items()}
    with mtia_lab.strict(), mtia_lab.trace() as trace:
        got = F.scaled_dot_product_attention(*dev, **dev_kwargs)
        got.backward(torch.ones_like(got))
    assert FUSED in [e.op for e in trace.events]
    assert f"{FUSED}_backward" in [e.op for e in trace.events]
    with sdpa_kernel(SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(q, k, v, **kwargs)
    expected.backward(torch.ones_like(expected))
    tolerance = TOLERANCE[dtype]
    torch.testing.assert_close(got.cpu(), expected.detach(), **tolerance)
    inputs = [(d, c) for d, c in zip(dev, (q, k, v), strict=True)]
    if "attn_mask" in kwargs and kwargs["attn_mask"].requires_grad:
        inputs.append((dev_kwargs["attn_mask"], kwargs["attn_mask"]))
    for d, c in inputs:
        torch.testing.assert_close(d.grad.cpu(), c.grad, **tolerance)


def test_logsumexp_is_the_fused_kernels():
    """float32, (batch, heads, L): the log of each row's softmax denominator of the scaled
    scores, which the backward recomputes the probabilities from."""
    q, k, v = _qkv(dtype=torch.float16)
    mask = torch.randn(2, 3, 5, 7, dtype=torch.float16)
    out = aten._scaled_dot_product_fused_attention_overrideable(
        *[t.to(DEVICE) for t in (q, k, v)], attn_bias=mask.to(DEVICE))
    output, logsumexp, _, _, max_q, max_k = out[:6]
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(8) + mask.float()
    assert logsumexp.device.type == DEVICE and logsumexp.dtype == torch.float32
    torch.testing.assert_close(logsumexp.cpu(), torch.logsumexp(scores, -1))
    torch.testing.assert_close(output.cpu(), (scores.softmax(-1) @ v.float()).half(),
                               **TOLERANCE[torch.float16])
    assert (max_q, max_k) == (5, 7)


def test_output_is_laid_out_as_the_fake_kernel_promises():
    """A transposed query gives a transposed output (Inductor plans with the fake kernel's)."""
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in _qkv())
    fake = aten._scaled_dot_product_fused_attention_overrideable(
        *[t.to("meta") for t in (q, k, v[..., :4])])[0]
    got = aten._scaled_dot_product_fused_attention_overrideable(
        *[t.to(DEVICE) for t in (q, k, v[..., :4])])[0]
    assert got.stride() == fake.stride()


def _simulated_us(events) -> float:
    return sum(e.sim_end_us - e.sim_start_us for e in events if e.sim_end_us is not None)


def test_the_fused_kernel_is_priced_as_its_gemms_with_the_scores_kept_on_chip():
    """Its GEMMs (scores, weighted sum; five in the backward) on the GEMM engine, and less
    time than the math path, which writes the L x S scores to device memory and reads them
    back."""
    batch, heads, length, dim = 2, 4, 256, 64
    q = torch.randn(batch, heads, length, dim, device=DEVICE)
    with mtia_lab.trace() as fused:
        F.scaled_dot_product_attention(q, q, q)
    with mtia_lab.trace() as unfused, sdpa_kernel(SDPBackend.MATH):
        F.scaled_dot_product_attention(q, q, q)
    assert [e.op for e in fused.events] == [FUSED]
    assert _simulated_us(fused.events) < _simulated_us(unfused.events)
    host = torch.randn(batch, heads, length, dim)
    scores_gemm = 2.0 * batch * heads * length * length * dim
    assert cost.estimate(aten._scaled_dot_product_fused_attention_overrideable.default,
                         (host, host, host), None).gemm_flops == 2 * scores_gemm
    backward = (host, host, host, host, None, [True] * 4, host)
    assert cost.estimate(aten._scaled_dot_product_fused_attention_overrideable_backward.default,
                         backward, None).gemm_flops == 5 * scores_gemm


def test_dropout_and_gqa_take_the_math_path_on_the_device():
    q, k, v = _qkv()
    k, v = k[:, :1], v[:, :1]
    dev = [t.to(DEVICE) for t in (q, k, v)]
    with mtia_lab.strict(), mtia_lab.trace() as trace:
        got = F.scaled_dot_product_attention(*dev, enable_gqa=True)
    assert FUSED not in [e.op for e in trace.events]
    expected = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    torch.testing.assert_close(got.cpu(), expected, **TOLERANCE[torch.float32])


def test_double_backward_needs_the_math_path_as_with_cudas_fused_kernels():
    """The fused backward has no derivative (CUDA's flash and efficient kernels neither):
    a Hessian through attention asks sdpa_kernel(SDPBackend.MATH)."""
    q = _qkv()[0]
    x = q.to(DEVICE).requires_grad_()
    (grad,) = torch.autograd.grad(F.scaled_dot_product_attention(x, x, x).sum(), x,
                                  create_graph=True)
    with pytest.raises(RuntimeError, match="derivative for .*overrideable_backward is not impl"):
        grad.sum().backward()
    x, c = q.to(DEVICE).requires_grad_(), q.clone().requires_grad_()
    for t in (x, c):
        with sdpa_kernel(SDPBackend.MATH):
            (grad,) = torch.autograd.grad(F.scaled_dot_product_attention(t, t, t).sum(), t,
                                          create_graph=True)
        grad.square().sum().backward()
    torch.testing.assert_close(x.grad.cpu(), c.grad, **TOLERANCE[torch.float32])


def test_inference_mode_reaches_the_fused_kernel_whole():
    """With autograd keys excluded the composite reaches the device undecomposed: it still runs
    on the device (not the CPU fallback) and matches the CPU."""
    q, k, v = _qkv()
    with torch.inference_mode(), mtia_lab.strict():
        got = F.scaled_dot_product_attention(*[t.to(DEVICE) for t in (q, k, v)], is_causal=True)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(got.cpu(), expected, **TOLERANCE[torch.float32])


def test_inference_mode_takes_the_math_path_where_the_fused_kernel_cannot():
    """3-D inputs under inference mode: the math path's pieces run on the device (as outside
    the mode) and match the CPU; the fused kernel's 4-D pricing is never asked."""
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    with torch.inference_mode(), mtia_lab.trace() as recorded:
        got = F.scaled_dot_product_attention(*[t.to(DEVICE) for t in (q, k, v)])
    torch.testing.assert_close(got.cpu(), F.scaled_dot_product_attention(q, k, v))
    ops = {event.op for event in recorded.events}
    assert "aten::bmm" in ops and not any(event.kind == "fallback" for event in recorded.events)


# -- compiled ---------------------------------------------------------------------------------
def _attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2


def _fused_by_name(q, k, v):
    return aten._scaled_dot_product_fused_attention_overrideable(q, k, v, is_causal=True)[0] * 2


@pytest.mark.parametrize("backend", ["mtia_lab", "inductor"])
@pytest.mark.parametrize("fn", [_attention, _fused_by_name])
def test_compiled_attention_matches_eager(fn, backend, fresh_dynamo):
    q, k, v = _qkv()
    eager = [t.to(DEVICE).requires_grad_() for t in (q, k, v)]
    compiled = [t.to(DEVICE).requires_grad_() for t in (q, k, v)]
    expected = fn(*eager)
    expected.sum().backward()
    got = torch.compile(fn, backend=backend)(*compiled)
    got.sum().backward()
    torch.testing.assert_close(got.cpu(), expected.cpu(), **TOLERANCE[torch.float32])
    for c, e in zip(compiled, eager, strict=True):
        torch.testing.assert_close(c.grad.cpu(), e.grad.cpu(), **TOLERANCE[torch.float32])
