"""Fused attention on the device: the OVERRIDEABLE backend of scaled_dot_product_attention.

PyTorch's `scaled_dot_product_attention` asks the device which backend to run
(`aten::_fused_sdp_choice`). A PrivateUse1 backend answers OVERRIDEABLE and implements
`aten::_scaled_dot_product_fused_attention_overrideable` and its `_backward`: one kernel that
returns the output and the logsumexp of each score row, and a backward that recomputes the
probabilities from that logsumexp (as flash attention's does) instead of keeping them. Real MTIA
answers the same way; torch_openreg registers the same three ops.

In C++ the choice is a DispatchStub (`_fused_sdp_choice_stub`), which only C++ can fill: so the
composite `scaled_dot_product_attention` is overridden for the device here (at its autograd key),
asks `choose_backend`, and calls the fused op or PyTorch's own composite (the math path, with
its input checks and their errors). The fused kernel takes 4-D float32 / float16 / bfloat16
inputs with the same number of heads, an additive or boolean mask, causal or not; dropout,
grouped-query attention, nested or empty inputs and anything unusual go to the math path, as
CUDA's fused kernels send them there. Both compute in float32 and round the output once.

Compiled code keeps SDPA's math path (both compilers trace it, as before): Inductor on a device
whose C++ stub answers OVERRIDEABLE would keep the fused op as one extern call, but the
comparison of the teaching plan with Inductor's (compare/) places Inductor's launches on our
nodes, and the teaching compiler, which traces the inner host tensors, has no such kernel. A
fused op called by name still compiles (an extern call for Inductor, its math for ours).
"""

from __future__ import annotations

import math

import torch
from torch.nn.attention import SDPBackend

from ... import _compat
from ..runtime import cost
from .registry import WHOLE_OPS, register_kernel, run_on_device

aten = torch.ops.aten
FUSED = aten._scaled_dot_product_fused_attention_overrideable.default
FUSED_BACKWARD = aten._scaled_dot_product_fused_attention_overrideable_backward.default
FUSED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_LIBRARIES: list[torch.library.Library] = []


# -- which backend ---------------------------------------------------------------------------
def fused_refusal(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                  is_causal: bool = False) -> str | None:
    """Why the fused kernel cannot take these inputs, or None when it can. `enable_gqa` needs
    no look: with as many key/value heads as query heads it changes nothing."""
    tensors = (query, key, value)
    if any(not isinstance(t, torch.Tensor) for t in tensors):
        return "query, key and value must be tensors"
    if any(t.is_nested for t in tensors):
        return "nested tensors"
    if any(t.dim() != 4 for t in tensors):
        return "inputs must be 4-D (batch, heads, sequence, head_dim)"
    if len({t.dtype for t in tensors}) != 1 or query.dtype not in FUSED_DTYPES:
        return "query, key and value must share one of float32, float16, bfloat16"
    if len({t.device for t in tensors}) != 1:
        return "query, key and value must be on one device"
    if dropout_p > 0.0:
        return "dropout (the math path draws the dropout mask)"
    if not query.size(1) == key.size(1) == value.size(1):
        return "grouped-query attention (query and key/value heads differ)"
    if not query.size(0) == key.size(0) == value.size(0) or key.size(2) != value.size(2):
        return "batch sizes or key/value sequence lengths differ"
    if query.size(3) != key.size(3) or any(t.numel() == 0 for t in tensors):
        return "query and key head sizes differ, or an input is empty"
    return _mask_refusal(query, key, attn_mask, is_causal)


def _mask_refusal(query, key, attn_mask, is_causal: bool) -> str | None:
    if attn_mask is None:
        return None
    if is_causal:
        return "attn_mask together with is_causal (PyTorch refuses it on the math path)"
    if attn_mask.dtype not in (torch.bool, query.dtype) or attn_mask.device != query.device:
        return "attn_mask must be boolean or of the query's dtype, on the query's device"
    scores = (query.size(0), query.size(1), query.size(2), key.size(2))
    try:
        torch.broadcast_shapes(tuple(attn_mask.shape), scores)
    except RuntimeError:
        return "attn_mask does not broadcast to (batch, heads, L, S)"
    return None


def choose_backend(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                   is_causal: bool = False) -> int:
    """The device's answer to `torch._fused_sdp_choice`: OVERRIDEABLE when the fused kernel
    takes the inputs and `sdpa_kernel` allows it, else MATH (ERROR when both are disabled).
    The scale and `enable_gqa` do not matter to it (fused_refusal)."""
    overrideable, math_enabled = _compat.sdp_backends_enabled()
    refusal = fused_refusal(query, key, value, attn_mask, dropout_p, is_causal)
    if refusal is None and overrideable:
        return SDPBackend.OVERRIDEABLE.value
    if math_enabled:
        return SDPBackend.MATH.value
    return SDPBackend.ERROR.value


def _fused_sdp_choice(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *,
                      scale=None, enable_gqa=False) -> int:
    return choose_backend(query, key, value, attn_mask, dropout_p, is_causal)


def _scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                  is_causal=False, *, scale=None, enable_gqa=False):
    """ATen's composite, with the device's choice: the fused op, or PyTorch's own math path.
    While torch.compile traces, the math path (see the module's docstring)."""
    if _compat.compile_session._is_compiling_flag:
        choice = SDPBackend.MATH.value
    else:
        choice = choose_backend(query, key, value, attn_mask, dropout_p, is_causal)
    if choice == SDPBackend.OVERRIDEABLE.value:
        bias = additive_mask(attn_mask, query.dtype)
        return FUSED(query, key, value, bias, dropout_p, is_causal, False, scale=scale)[0]
    if choice == SDPBackend.ERROR.value:
        why = fused_refusal(query, key, value, attn_mask, dropout_p, is_causal)
        raise RuntimeError(
            "No viable backend for scaled_dot_product_attention was found: the math backend is "
            "disabled (sdpa_kernel) and mtia_sim's fused kernel cannot take these inputs ("
            f"{why or 'the OVERRIDEABLE backend is disabled too'}); allow SDPBackend.MATH")
    return _compat.composite_implicit(
        aten.scaled_dot_product_attention.default, query, key, value, attn_mask, dropout_p,
        is_causal, scale=scale, enable_gqa=enable_gqa)


def additive_mask(attn_mask, dtype: torch.dtype):
    """A boolean mask (True: attend) as the additive bias the fused kernels take, as ATen's
    convert_boolean_attn_mask makes it; any other mask as it is."""
    if attn_mask is None or attn_mask.dtype != torch.bool:
        return attn_mask
    return torch.zeros_like(attn_mask, dtype=dtype).masked_fill(~attn_mask, -math.inf)


# -- the kernels (on the inner host tensors: the device's memory) ------------------------------
def _scores(query, key, bias, is_causal: bool, scale):
    """Scaled scores in float32, with the bias added and the causal mask applied (top-left
    aligned, as the math path's tril)."""
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = torch.matmul(query.float(), key.float().transpose(-2, -1)) * scale
    if bias is not None:  # a boolean bias (the op called by name) means what SDPA's mask does
        scores = scores + additive_mask(bias, torch.float32).float()
    if is_causal:
        keep = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~keep, -math.inf)
    return scores, scale


def _probabilities(scores, logsumexp):
    """exp(scores - logsumexp); a row with every key masked gets zeros, as `_safe_softmax`."""
    masked_row = torch.isinf(logsumexp).unsqueeze(-1)
    return torch.exp(scores - logsumexp.unsqueeze(-1)).masked_fill(masked_row, 0.0)


def fused_forward(func, args, kwargs, device):
    """(output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset,
    debug_attn_mask): the fused kernels' tuple. The variable-length and dropout fields are
    empty (no packed sequences, no dropout); the debug mask is the probabilities when asked."""
    query, key, value, bias, dropout_p, is_causal, return_debug_mask, scale = _forward_args(
        args, kwargs)
    if dropout_p > 0.0:
        raise NotImplementedError(
            "mtia_sim's fused attention kernel takes no dropout: call "
            "scaled_dot_product_attention, which sends dropout to the math path")
    scores, _ = _scores(query, key, bias, is_causal, scale)
    logsumexp = torch.logsumexp(scores, dim=-1)
    probabilities = _probabilities(scores, logsumexp)
    output = _laid_out_like(query, torch.matmul(probabilities, value.float()))
    seed = torch.zeros((), dtype=torch.long)
    debug = probabilities if return_debug_mask else None
    return (output, logsumexp, None, None, query.size(2), key.size(2), seed, seed.clone(), debug)


def _after_qkv(args, kwargs, defaults: dict) -> list:
    """The arguments after query, key and value, defaults filled in: the dispatcher may leave
    trailing ones out, or pass them by name."""
    return [args[3 + i] if 3 + i < len(args) else kwargs.get(name, default)
            for i, (name, default) in enumerate(defaults.items())]


def _forward_args(args, kwargs):
    """The forward's arguments; `scale` is keyword-only."""
    rest = _after_qkv(args, kwargs, {"attn_bias": None, "dropout_p": 0.0, "is_causal": False,
                                     "return_debug_mask": False})
    return (*args[:3], *rest, kwargs.get("scale"))


def fused_backward(func, args, kwargs, device):
    """Gradients of query, key, value and the bias, from the probabilities recomputed with the
    forward's logsumexp: dV = P^T dO, dS = P * (dO V^T - rowsum(dO * O)), dQ = dS K * scale,
    dK = dS^T Q * scale, d(bias) = dS summed to the bias's shape."""
    grad_out, query, key, value, bias, mask, out, logsumexp = args[:8]
    dropout_p, is_causal, scale = args[12], args[13], kwargs.get("scale")
    if dropout_p > 0.0:
        raise NotImplementedError("mtia_sim's fused attention kernel takes no dropout")
    scores, scale = _scores(query, key, bias, is_causal, scale)
    probabilities = _probabilities(scores, logsumexp.float())
    grad_out32 = grad_out.float()
    grad_value = torch.matmul(probabilities.transpose(-2, -1), grad_out32)
    grad_probabilities = torch.matmul(grad_out32, value.float().transpose(-2, -1))
    row = (grad_out32 * out.float()).sum(dim=-1, keepdim=True)
    grad_scores = probabilities * (grad_probabilities - row)
    grad_query = torch.matmul(grad_scores, key.float()) * scale
    grad_key = torch.matmul(grad_scores.transpose(-2, -1), query.float()) * scale
    grad_bias = None
    if bias is not None and mask[3]:
        grad_bias = _laid_out_like(bias, grad_scores.sum_to_size(bias.shape))
    return (_laid_out_like(query, grad_query) if mask[0] else None,
            _laid_out_like(key, grad_key) if mask[1] else None,
            _laid_out_like(value, grad_value) if mask[2] else None,
            grad_bias)


def _laid_out_like(like, result):
    """`result` in `like`'s dtype, strided as the ops' fake kernels promise (Inductor plans
    with them): `like`'s own strides when the shapes agree, else the same order of dimensions
    (the output of a transposed query is transposed too)."""
    if result.shape == like.shape:
        out = torch.empty_like(like)
    else:
        order = sorted(range(like.dim()), key=lambda i: like.stride(i), reverse=True)
        strides, step = [0] * like.dim(), 1
        for i in reversed(order):
            strides[i], step = step, step * result.shape[i]
        out = torch.empty_strided(result.shape, strides, dtype=like.dtype)
    return out.copy_(result)


# -- prices ------------------------------------------------------------------------------------
def _forward_flops(args, out) -> tuple[float, float, int | None]:
    """Two GEMMs (scores, weighted sum) and the softmax's exponentials; the L x S scores stay
    in on-chip memory, so only the output and the logsumexp are written."""
    query, key, value = args[:3]
    batch_heads = query.size(0) * query.size(1)
    length, source = query.size(2), key.size(2)
    gemm = 2.0 * batch_heads * length * source * (query.size(3) + value.size(3))
    return gemm, 4.0 * batch_heads * length * source, None


def _backward_flops(args, out) -> tuple[float, float, int | None]:
    """The forward's scores recomputed, then dV, dP, dQ and dK: five GEMMs."""
    query, key, value = args[1:4]
    batch_heads = query.size(0) * query.size(1)
    length, source = query.size(2), key.size(2)
    gemm = 2.0 * batch_heads * length * source * (3 * query.size(3) + 2 * value.size(3))
    return gemm, 6.0 * batch_heads * length * source, None


# -- registration ------------------------------------------------------------------------------
def register() -> None:
    """The device's choice, the fused op and its backward, and SDPA asking for the choice."""
    if _LIBRARIES:
        return
    register_kernel(FUSED)(fused_forward)
    register_kernel(FUSED_BACKWARD)(fused_backward)
    WHOLE_OPS[aten.scaled_dot_product_attention.default] = _scaled_dot_product_attention
    # A question about the tensors, answered below the Python key by the PrivateUse1 kernel.
    register_kernel(aten._fused_sdp_choice.default, kind="query")(run_on_device)
    cost.FLOP_RULES[FUSED] = _forward_flops
    cost.FLOP_RULES[FUSED_BACKWARD] = _backward_flops
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("_fused_sdp_choice", _fused_sdp_choice, "PrivateUse1")
    lib.impl("scaled_dot_product_attention", _scaled_dot_product_attention,
             "AutogradPrivateUse1")
    _LIBRARIES.append(lib)
