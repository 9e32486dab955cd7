"""Automatic mixed precision on the device: `torch.autocast("mtia_sim", dtype=torch.bfloat16)`.

Autocast is a dispatch key that sits *above* autograd. While a region is active, PyTorch stops
excluding `AutocastPrivateUse1`, so every op on a device tensor visits it first. The key does
nothing by itself: a backend must say, op by op, what happens there. CUDA's answer (ATen's
autocast_mode.h, the `AT_FORALL_*` lists) is the policy copied below:

- lower precision: matmul-like ops (mm, linear, conv, ...) gain the most from bf16/fp16 and
  accumulate in fp32 inside the kernel anyway, so their floating inputs are cast down;
- fp32: ops whose range or precision suffers in 16 bits (exp, log, pow, norms, losses, ...) get
  fp32 inputs; `fp32_set_opt_dtype` ops (softmax, sum, cumsum, ...) get `dtype=torch.float32`
  unless the caller chose one; `fp32_append_dtype` ops (norm) move to the overload with a dtype;
- promote: ops with several floating inputs that must agree (addcmul, index_put, ...) run in the
  widest input type;
- banned: binary_cross_entropy is unsafe in 16 bits; the error names the safe replacement;
- everything else falls through untouched (add, relu, cat, ... promote natively).

Each kernel casts, then calls the op again with the autocast key excluded, so the op (and any ops
it decomposes into) runs below autocast -- the Python twin of ATen's `WrapFunction_`. Casts are
ordinary differentiable `.to()` calls recorded by autograd, so gradients flow back in the
parameters' own dtype. Only tensors on this device that are floating and not float64 are cast.

GradScaler needs two fused ops on the device; they are native kernels here (registered below).
`policy_of(op)` says which rule an op gets; `active_rule()` tells a trace, from inside
`__torch_dispatch__` (where PyTorch reports autocast as off), which rule produced the op.
"""

from __future__ import annotations

import collections.abc
import threading

import torch

from ... import _compat
from ..._compat import DEVICE_NAME, OpOverload, op_schema, overload_name
from .registry import register_kernel, run_on_device

aten = torch.ops.aten
AUTOCAST_KEY = "AutocastPrivateUse1"

# ATen AT_FORALL_LOWER_PRECISION_FP (the op lists CUDA uses; tests check them against the header).
LOWER_PRECISION_FP = [
    "_convolution.deprecated", "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc",
    "conv_transpose1d", "conv_transpose2d.input", "conv_transpose3d.input", "convolution",
    "prelu", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv", "linalg_vecdot", "linear",
    "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot", "_thnn_fused_lstm_cell",
    "_thnn_fused_gru_cell", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    "_scaled_dot_product_flash_attention", "scaled_dot_product_attention",
]
# AT_FORALL_FP32
FP32 = [
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar",
    "softplus", "layer_norm", "native_layer_norm", "rms_norm", "group_norm", "frobenius_norm.dim",
    "nuclear_norm", "nuclear_norm.dim", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div",
    "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
    "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "upsample_nearest1d", "_upsample_nearest_exact1d", "upsample_nearest2d",
    "_upsample_nearest_exact2d", "upsample_nearest3d", "_upsample_nearest_exact3d",
    "upsample_linear1d", "upsample_bilinear2d", "_upsample_bilinear2d_aa",
    "upsample_trilinear3d", "upsample_bicubic2d", "_upsample_bicubic2d_aa",
]
# AT_FORALL_FP32_SET_OPT_DTYPE
FP32_SET_OPT_DTYPE = [
    "prod", "prod.dim_int", "softmax.int", "log_softmax.int", "cumprod", "cumsum",
    "linalg_vector_norm", "linalg_matrix_norm", "linalg_matrix_norm.str_ord", "sum",
    "sum.dim_IntList",
]
# AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE: overload without a dtype -> overload with one.
FP32_APPEND_DTYPE = {
    "norm.Scalar": "norm.ScalarOpt_dtype",
    "norm.ScalarOpt_dim": "norm.ScalarOpt_dim_dtype",
}
# AT_FORALL_PROMOTE
PROMOTE = [
    "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler",
    "index_put", "tensordot", "scatter_add",
]
BANNED = {
    "binary_cross_entropy": (
        "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast: "
        "the sigmoid before them may have produced values that round to 0 or 1 in 16 bits. "
        "Use torch.nn.functional.binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss "
        "(they fuse the sigmoid and are safe), or compute the loss outside the autocast region."
    ),
}

_EXCLUDE = _compat.dispatch_key_set(AUTOCAST_KEY)


class _ActiveRule(threading.local):
    """The rule whose kernel is running on this thread, for traces (None: no rule)."""

    rule: tuple[str, str] | None = None  # a class default: reading it never raises


_ACTIVE = _ActiveRule()
_LIBRARIES: list[torch.library.Library] = []


def overload(name: str) -> OpOverload:
    """'pow.Scalar' -> aten.pow.Scalar; 'mm' -> aten.mm.default (ATen's `KERNEL(op)` form)."""
    packet, _, which = name.partition(".")
    return getattr(getattr(aten, packet), which or "default")


def policy_of(op: OpOverload | str) -> str:
    """The cast policy of an op under mtia_sim autocast ("fallthrough" if it has none)."""
    name = op if isinstance(op, str) else _short_name(op)
    return POLICIES.get(name, "fallthrough")


def active_rule() -> tuple[str, str] | None:
    """(op, policy) of the autocast kernel whose cast op or redispatch is running, else None.

    Inside `__torch_dispatch__` every key above Python is excluded, so
    `torch.is_autocast_enabled()` reads False there even in an autocast region: a trace asks
    this instead to tell which device ops autocast produced."""
    return _ACTIVE.rule


def _short_name(op: OpOverload) -> str:
    which = overload_name(op)
    return op_schema(op).name.split("::")[1] + ("" if which == "default" else f".{which}")


POLICIES: dict[str, str] = {
    **dict.fromkeys(LOWER_PRECISION_FP, "lower_precision_fp"),
    **dict.fromkeys(FP32, "fp32"),
    **dict.fromkeys(FP32_SET_OPT_DTYPE, "fp32_set_opt_dtype"),
    **dict.fromkeys(FP32_APPEND_DTYPE, "fp32_append_dtype"),
    **dict.fromkeys(PROMOTE, "promote"),
    **dict.fromkeys(BANNED, "banned"),
}


# -- casting -------------------------------------------------------------------------------------
def _eligible(value) -> bool:
    """ATen's is_eligible: a defined floating tensor on this device, and not float64."""
    return (
        isinstance(value, torch.Tensor)
        and value.device.type == DEVICE_NAME
        and value.is_floating_point()
        and value.dtype is not torch.float64
    )


def cast(value, dtype: torch.dtype):
    """Cast every eligible tensor in `value` (also inside lists and tuples) to `dtype`."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if _eligible(value) and value.dtype is not dtype else value
    if isinstance(value, (list, tuple)):
        return type(value)(cast(item, dtype) for item in value)
    return value


def _widest(dtype: torch.dtype, values) -> torch.dtype:
    """ATen's promote_type: start from the autocast dtype, widen by every device float input."""
    for value in values:
        if isinstance(value, torch.Tensor):
            if value.device.type == DEVICE_NAME and value.is_floating_point():
                dtype = torch.promote_types(dtype, value.dtype)
        elif isinstance(value, collections.abc.Sequence) and not isinstance(value, str):
            dtype = _widest(dtype, value)
    return dtype


def _first_is_eligible(args: tuple) -> bool:
    first = args[0] if args else None
    return isinstance(first, torch.Tensor) and first.device.type == DEVICE_NAME and (
        first.is_floating_point()
    )


# -- the kernels: one factory per policy -----------------------------------------------------------
def _make_kernel(op: OpOverload, policy: str):
    dtype_slot = _dtype_slot(op) if policy == "fp32_set_opt_dtype" else None
    target = overload(FP32_APPEND_DTYPE[_short_name(op)]) if policy == "fp32_append_dtype" else op
    rule = (_short_name(op), policy)

    def kernel(*args, **kwargs):
        # Read the state first: "enabled" *is* "the autocast key is not excluded".
        enabled = torch.is_autocast_enabled(DEVICE_NAME)
        low = torch.get_autocast_dtype(DEVICE_NAME)
        with _compat.ExcludeDispatchKeys(_EXCLUDE):
            if not enabled:
                return op(*args, **kwargs)
            outer, _ACTIVE.rule = _ACTIVE.rule, rule
            try:
                return apply(args, kwargs, low)
            finally:
                _ACTIVE.rule = outer

    def apply(args, kwargs, low):
        """The cast policy itself: ATen's WrapFunction_, one branch per policy."""
        if policy == "lower_precision_fp":
            return op(*cast(args, low), **cast(kwargs, low))
        if policy == "fp32":
            return op(*cast(args, torch.float32), **cast(kwargs, torch.float32))
        if policy == "promote":
            wide = _widest(low, (*args, *kwargs.values()))
            return op(*cast(args, wide), **cast(kwargs, wide))
        if policy == "fp32_set_opt_dtype":
            # Only an eligible first argument gets fp32: forcing a dtype on, say, an integer
            # sum would change PyTorch's own type promotion.
            if _first_is_eligible(args):
                args, kwargs = _set_dtype_if_unset(args, kwargs, dtype_slot)
            return op(*args, **kwargs)
        if policy == "fp32_append_dtype":
            out_dtype = torch.float32 if _first_is_eligible(args) else args[0].dtype
            args = _with_defaults(op, args)  # the target overload has no defaults
            return target(*args, **kwargs, dtype=out_dtype)  # dtype is keyword-only
        raise RuntimeError(BANNED[op_schema(op).name.split("::")[1]])

    kernel.__name__ = f"autocast_{policy}_{_short_name(op).replace('.', '_')}"
    return kernel


def _dtype_slot(op: OpOverload) -> tuple[int, bool]:
    """(position, keyword-only?) of the op's `dtype` argument."""
    for position, argument in enumerate(op_schema(op).arguments):
        if argument.name == "dtype":
            return position, argument.kwarg_only
    raise AssertionError(f"{op} has no dtype argument")


def _with_defaults(op: OpOverload, args: tuple) -> tuple:
    """Positional args with the defaults the dispatcher left out written back in."""
    positional = [a for a in op_schema(op).arguments if not a.kwarg_only]
    return (*args, *(a.default_value for a in positional[len(args) :]))


def _set_dtype_if_unset(args: tuple, kwargs: dict, slot: tuple[int, bool]):
    position, kwarg_only = slot
    if kwarg_only or len(args) <= position:
        if kwargs.get("dtype") is None:
            kwargs = dict(kwargs, dtype=torch.float32)
    elif args[position] is None:
        args = (*args[:position], torch.float32, *args[position + 1 :])
    return args, kwargs


# -- registration ------------------------------------------------------------------------------
def register() -> None:
    """Install the fallthrough, the policy kernels and GradScaler's device kernels. Idempotent."""
    if _LIBRARIES:
        return
    _LIBRARIES.append(_compat.register_fallthrough(AUTOCAST_KEY))
    lib = torch.library.Library("aten", "IMPL")
    for name, policy in POLICIES.items():
        lib.impl(name, _make_kernel(overload(name), policy), AUTOCAST_KEY)
    _LIBRARIES.append(lib)
    # GradScaler: unscale the gradients and check them for inf/nan in one pass, then grow or
    # back off the scale. Both write to their arguments in place (lists of gradients included),
    # which the device memory handles directly.
    register_kernel(aten._amp_foreach_non_finite_check_and_unscale_.default)(run_on_device)
    register_kernel(aten._amp_update_scale_.default)(run_on_device)
