"""The layouts the device promises: results shaped and strided as PyTorch's fake kernels say.

Compilers never run a device op to learn its result's layout: TorchInductor, `torch.export` and
graph capture ask the op's fake (meta) kernel, then trust it. Inductor even checks the results
of the ATen kernels it calls (`assert_size_stride` in its generated wrapper). So each op on
`mtia_sim` must return the sizes and strides that FakeTensorMode reports for a `mtia_sim`
tensor. A device kernel here is the CPU's kernel run on device memory, and the CPU's layout is
not always the one promised:

- **device-specific promises** -- PyTorch's fake kernels describe a PrivateUse1 device like
  CUDA, not like the CPU. A convolution is served by `ConvBackend::Overrideable`, whose outputs
  are contiguous (the CPU's follow a channels-last input or weight); BatchNorm in eval returns
  its saved statistics with one value per channel (the CPU's are empty); `pixel_shuffle` is
  contiguous (the CPU's keeps channels-last).
- **meta kernels that differ from eager on every device** -- decompositions used as fake
  kernels (BatchNorm, LayerNorm backward, loss backwards, `copysign`, `logaddexp`, the
  `*_scatter` ops, ...) derive strides by PyTorch's reference rules, which differ from the eager
  kernels' for some input layouts (transposed, channels-last, strided views).

These are deliberate departures from CPU eager behaviour, named here op by op. The rules run
after the kernel (or the CPU fallback), in dispatch.py, only for the ops listed in RULES: every
other op costs nothing. `mtia_lab/testing/meta_strides.py` is the oracle that checks them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..._compat import (
    DEVICE_NAME,
    OpOverload,
    fake_tensor_mode,
    no_fake_mode,
    op_schema,
    pytree,
    storage_identity,
)

aten = torch.ops.aten
Rule = Callable[[OpOverload, tuple, dict, object], object]


# --- device-specific promises: explicit and cheap ------------------------------------------


def _contiguous_at(*positions: int) -> Rule:
    """Results (all of them for one tensor, else those at `positions`) made contiguous."""
    def rule(func, args, kwargs, out):
        if isinstance(out, torch.Tensor):
            return out.contiguous()
        return type(out)(
            o.contiguous() if i in positions and isinstance(o, torch.Tensor) else o
            for i, o in enumerate(out)
        )
    return rule


# A convolution (and its backward's input and weight gradients) is contiguous: fake_impls.conv
# asks _conv_determine_backend_memory_format, contiguous for ConvBackend::Overrideable.
_CONVOLUTION = _contiguous_at(0, 1)


def _eval_statistics(running_mean, running_var, eps: float, like: torch.Tensor):
    """BatchNorm's saved statistics in eval as CUDA returns them (and the fake kernel says for
    any device but the CPU): the running mean and 1/sqrt(running_var + eps), in the
    computation dtype (float32 for half inputs)."""
    dtype = torch.float32 if like.dtype in (torch.float16, torch.bfloat16) else like.dtype
    mean = running_mean.to(dtype=dtype, copy=True)
    invstd = torch.rsqrt(running_var.to(dtype=dtype) + eps)
    return mean, invstd


def _batch_norm_eval(training_at: int | None, eps_at: int):
    """In eval the CPU returns empty saved statistics: give them per channel, then lay the
    results out as the fake kernel does (follow_fake). `training_at`: where the op's
    `training` argument is; None for the ops that only evaluate."""
    def rule(func, args, kwargs, out):
        training = training_at is not None and bool(_arg(args, kwargs, func, training_at))
        if not training and out[1].numel() == 0 and args[3] is not None and args[4] is not None:
            mean, invstd = _eval_statistics(args[3], args[4], _arg(args, kwargs, func, eps_at),
                                            args[0])
            out = type(out)((out[0], mean, invstd, *out[3:]))
        return follow_fake(func, args, kwargs, out)
    return rule


def _batch_norm_eval_out(func, args, kwargs, out):
    """`out=` BatchNorm in eval: the CPU leaves `save_mean` / `save_invstd` as they were; the
    fake kernel's (CUDA's) results are the per-channel statistics, written into them."""
    if bool(_arg(args, kwargs, func, 5)) or args[3] is None or args[4] is None:
        return out
    stats = _eval_statistics(args[3], args[4], _arg(args, kwargs, func, 7), args[0])
    for written, value in zip(out[1:], stats, strict=True):
        written.resize_(value.shape).copy_(value)
    return out


def _embedding_bag_like_cuda(func, args, kwargs, out):
    """EmbeddingBag's bookkeeping results as CUDA returns them (the fake kernel's for any
    device but the CPU): `offset2bag` gives every index its bag (the CPU's fast sum path leaves
    it empty), `bag_size` has one entry per offset, `max_indices` is empty unless the mode is
    max; all of the indices' dtype. The backward accepts both forms."""
    output, offset2bag, bag_size, max_indices = out
    indices, offsets = args[1], args[2]
    mode = _arg(args, kwargs, func, 4, 0)
    if offset2bag.numel() != indices.numel():
        positions = torch.ones_like(indices).cumsum(0) - 1
        offset2bag = torch.searchsorted(offsets, positions, right=True) - 1
    sizes = bag_size.new_zeros(offsets.shape[0])
    sizes[: bag_size.shape[0]] = bag_size[: offsets.shape[0]]
    if mode != 2:  # max_indices only means something for mode="max"
        max_indices = indices.new_empty(0)
    dtype = indices.dtype
    return (output, offset2bag.to(dtype), sizes.to(dtype), max_indices.to(dtype))


def _arg(args, kwargs, func, position: int, default=None):
    if position < len(args):
        return args[position]
    return kwargs.get(op_schema(func).arguments[position].name, default)


# --- meta kernels that differ from eager: restride to what the fake kernel computes --------

_RESTRIDES: dict = {}  # (op, metadata of the arguments) -> what to restride, see follow_fake
_MAX_CACHED = 4096


def follow_fake(func, args, kwargs, out):
    """`out` restrided to the fake kernel's layout for these arguments.

    With contiguous inputs every op listed here already matches (the oracle checks it), so the
    fake kernel runs only for other layouts, once per op and argument metadata: which results
    then need another layout is cached (the CPU kernel's layout depends on that metadata only).
    """
    tensors = _tensors(args, kwargs)
    if all(t.is_contiguous() for t in tensors):
        return out
    if "generator" in kwargs:  # the device's generator: no part of the layout
        kwargs = {k: v for k, v in kwargs.items() if k != "generator"}
    key = _key(func, args, kwargs)
    restrides = _RESTRIDES.get(key) if key is not None else None
    if restrides is None:
        restrides = _restrides(func, args, kwargs, tensors, out)
        if key is not None:
            if len(_RESTRIDES) >= _MAX_CACHED:
                _RESTRIDES.clear()
            _RESTRIDES[key] = restrides
    if not restrides:
        return out
    if isinstance(out, torch.Tensor):
        return _restrided(out, restrides[0][1:])
    results = list(out)
    for i, shape, stride in restrides:
        results[i] = _restrided(results[i], (shape, stride))
    return type(out)(results)


def _tensors(args, kwargs) -> list:
    """The tensor arguments (in lists too: one level, as aten schemas have)."""
    found = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, torch.Tensor))
    return found


def _restrides(func, args, kwargs, tensors, out) -> tuple:
    """((result index, shape, stride), ...): the fresh results whose layout is not the fake
    kernel's, and the layout to give them; () when all match or the fake kernel cannot say."""
    layouts = _run_fake(func, args, kwargs)
    if layouts is None:
        return ()
    results = [out] if isinstance(out, torch.Tensor) else list(out)
    inputs = {storage_identity(t) for t in tensors}
    return tuple(
        (i, layout[0], layout[1])
        for i, (result, layout) in enumerate(zip(results, layouts, strict=False))
        if isinstance(result, torch.Tensor) and layout is not None
        and storage_identity(result) not in inputs and _differs(result, layout)
    )


def _differs(result: torch.Tensor, layout: tuple) -> bool:
    """Inductor's assert_size_stride rule: strides of dimensions longer than 1, non-empty.
    (A fresh result's storage offset is not compared: see testing/meta_strides.py.)"""
    shape, stride, _ = layout
    if tuple(result.shape) != shape or result.numel() == 0:
        return False  # a size difference is not a layout one: left to the kernel's rule
    return any(n > 1 and s != t for n, s, t in zip(shape, stride, result.stride(), strict=True))


def _restrided(result: torch.Tensor, layout: tuple) -> torch.Tensor:
    shape, stride = layout[:2]
    return result.new_empty_strided(shape, stride).copy_(result)


def _key(func, args, kwargs):
    """The op and its arguments' metadata (values of non-tensors); None if unhashable (symbolic
    sizes while tracing)."""
    def meta(v):
        if isinstance(v, torch.Tensor):
            return (v.shape, v.stride(), v.storage_offset(), v.dtype)
        if isinstance(v, (list, tuple)):
            return tuple(meta(item) for item in v)
        return v
    key = (func, tuple(meta(a) for a in args), tuple((k, meta(v)) for k, v in kwargs.items()))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _run_fake(func, args, kwargs) -> list | None:
    with no_fake_mode():  # while torch.compile traces, away from its fake mode
        mode = fake_tensor_mode()
        try:
            with mode:
                fake_args, fake_kwargs = pytree.tree_map(_fake_on_device, (args, kwargs))
                result = func(*fake_args, **fake_kwargs)
        except Exception:  # noqa: BLE001 -- data-dependent or refused: keep the kernel's layout
            return None
    results = [result] if isinstance(result, torch.Tensor) else list(result)
    return [(tuple(r.shape), r.stride(), r.storage_offset())
            if isinstance(r, torch.Tensor) else None for r in results]


def _fake_on_device(v):
    """A fake tensor on the device with the metadata of `v` (an inner tensor)."""
    if not isinstance(v, torch.Tensor):
        return v
    extent = v.storage_offset() + sum((n - 1) * s for n, s in zip(v.shape, v.stride(),
                                                                  strict=True)) + 1
    base = torch.empty(extent if v.numel() else 0, dtype=v.dtype, device=DEVICE_NAME)
    return base.as_strided(v.shape, v.stride(), v.storage_offset() if v.numel() else 0)


# --- the table ------------------------------------------------------------------------------

# op packet -> rule, for the overloads whose results are new tensors
_PACKET_RULES: dict[str, Rule] = {
    **dict.fromkeys(["convolution", "_convolution", "convolution_overrideable"],
                    _contiguous_at(0)),
    **dict.fromkeys(["convolution_backward", "convolution_backward_overrideable"], _CONVOLUTION),
    **dict.fromkeys(["_embedding_bag", "_embedding_bag_forward_only"], _embedding_bag_like_cuda),
    # meta kernels that differ from eager (fake and eager disagree on the CPU too)
    **dict.fromkeys([
        "copysign", "floor_divide", "ldexp", "logaddexp", "logaddexp2", "logical_and",
        "logical_or", "logical_xor", "heaviside", "log_sigmoid_forward", "mse_loss_backward",
        "huber_loss_backward", "smooth_l1_loss_backward", "_log_softmax_backward_data",
        "native_dropout_backward", "normal", "native_layer_norm_backward",
        "native_batch_norm_backward", "batch_norm_backward", "_batch_norm_with_update",
        "_native_batch_norm_legit_functional", "replication_pad1d_backward",
        "replication_pad2d_backward", "replication_pad3d_backward", "max_unpool2d",
        "max_unpool3d", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
        "native_channel_shuffle",
    ], follow_fake),
}
# single overloads -> rule
_OVERLOAD_RULES: dict[str, Rule] = {
    "div.Tensor_mode": follow_fake, "div.Scalar_mode": follow_fake,
    "pow.Scalar": follow_fake,
    # native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)
    "native_batch_norm.default": _batch_norm_eval(5, 7),
    "_native_batch_norm_legit.default": _batch_norm_eval(5, 7),
    "_native_batch_norm_legit.no_stats": follow_fake,
    "_native_batch_norm_legit_no_training.default": _batch_norm_eval(None, 6),
    "_batch_norm_no_update.default": _batch_norm_eval(None, 6),
    "native_batch_norm.out": _batch_norm_eval_out,
    "_native_batch_norm_legit.out": _batch_norm_eval_out,
}


def _fresh_results(overload) -> bool:
    """Whether the overload's results are new tensors (not `out=` or in-place arguments)."""
    return not any(r.alias_info is not None for r in op_schema(overload).returns)


def rules() -> dict:
    """aten overload -> the rule dispatch.py applies to its results."""
    table = {}
    for name, rule in _PACKET_RULES.items():
        packet = getattr(aten, name, None)
        if packet is None:
            continue
        for overload_name in packet.overloads():
            overload = getattr(packet, overload_name)
            if _fresh_results(overload):
                table[overload] = rule
    for name, rule in _OVERLOAD_RULES.items():
        packet_name, _, overload_name = name.partition(".")
        packet = getattr(aten, packet_name, None)
        if packet is not None and overload_name in packet.overloads():
            table[getattr(packet, overload_name)] = rule
    return table


RULES: dict = rules()
