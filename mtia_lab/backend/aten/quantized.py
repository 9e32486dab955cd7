"""Quantized tensors on the simulated device (qint8, quint8, qint32, quint4x2, quint2x4).

CUDA keeps a quantized tensor as one dense allocation of its integers, plus a quantizer: a host
object with the scale and zero point (per tensor), or device tensors of scales and zero points
(per channel). The simulator does the same with an ordinary `MTIATensor` whose inner tensor is a
CPU quantized tensor: its integer bytes are one `DeviceStorage` (one allocator block, shared by
its views, priced like any other bytes), and its quantizer is the inner tensor's own, PyTorch's
C++ one. The wrapper's key set is QuantizedPrivateUse1 with the Python key above it, so every op
reaches `__torch_dispatch__` (dispatch.py) and runs the CPU's quantized kernel on the device's
memory; an op the CPU refuses for quantized tensors fails with the CPU's words.

This module holds what a quantized tensor needs beyond a dense one: the ops CUDA runs natively,
the metadata queries its quantizer answers, the host view the CPU fallback computes on, the
factories that reach QuantizedPrivateUse1, and what torch.save writes.
"""

from __future__ import annotations

import collections

import torch

from ... import _compat
from ..._compat import DEVICE_NAME

# The quantized kernels CUDA has (QuantizedCUDA / CUDA entries), run on the device's memory.
QUANTIZED_OPS = [
    "quantize_per_tensor", "quantize_per_tensor_dynamic", "quantize_per_channel", "dequantize",
    "int_repr", "_make_per_tensor_quantized_tensor", "_make_per_channel_quantized_tensor",
    "q_per_channel_scales", "q_per_channel_zero_points", "empty_quantized",
    "_empty_affine_quantized", "_empty_per_channel_affine_quantized",
]
# Questions about the quantizer, answered by the inner tensor's: no data moves (on CUDA too,
# the per-tensor quantizer is a host object).
QUERIES = ["q_scale", "q_zero_point", "qscheme", "q_per_channel_axis"]

_QUANTIZED_DTYPES = (torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4)
_PER_TENSOR = (torch.per_tensor_affine, torch.per_tensor_symmetric)


def _qscheme(tensor: torch.Tensor) -> torch.qscheme | None:
    """The tensor's scheme; None for an "unknown" quantizer (`torch.empty(n, dtype=torch.qint8)`
    makes one, on the CPU and on CUDA: it holds integers but no scale yet)."""
    try:
        return tensor.qscheme()
    except RuntimeError:
        return None


def host_view(inner: torch.Tensor, host: torch.UntypedStorage) -> torch.Tensor:
    """A CPU quantized tensor over `host` (a host copy of a device storage) with the metadata and
    the quantizer of `inner`: what the CPU fallback computes on. `torch.empty(0, dtype=qint8)`
    would give it an unknown quantizer, which every quantized kernel refuses."""
    scheme = _qscheme(inner)
    if scheme in _PER_TENSOR:
        empty = _compat.empty_affine_quantized(
            [0], scale=inner.q_scale(), zero_point=inner.q_zero_point(), dtype=inner.dtype)
    elif scheme is not None:
        empty = _compat.empty_per_channel_affine_quantized(
            [0], scales=inner.q_per_channel_scales(), zero_points=inner.q_per_channel_zero_points(),
            axis=inner.q_per_channel_axis(), dtype=inner.dtype)
    else:
        empty = torch.empty(0, dtype=inner.dtype)
    return empty.set_(host, inner.storage_offset(), inner.size(), inner.stride())


def quantizer_params(tensor: torch.Tensor) -> tuple:
    """What torch.save writes for a quantized tensor's quantizer, as `Tensor._reduce_ex_internal`
    does for CPU and CUDA tensors (per-channel scales are device tensors, saved as such)."""
    scheme = _qscheme(tensor)
    if scheme == torch.per_tensor_affine:
        return (torch.per_tensor_affine, tensor.q_scale(), tensor.q_zero_point())
    if scheme in (torch.per_channel_affine, torch.per_channel_affine_float_qparams):
        return (torch.per_channel_affine, tensor.q_per_channel_scales(),
                tensor.q_per_channel_zero_points(), tensor.q_per_channel_axis())
    raise RuntimeError(f"Serialization is not supported for tensors of type {scheme}")


def reduce(tensor: torch.Tensor, typed: torch.storage.TypedStorage):
    """torch.save of a quantized device tensor: PyTorch's `_rebuild_qtensor` over its storage
    (`typed`, tagged with the device), as for a CUDA one; torch.load calls the device's
    `_empty_affine_quantized` and `set_` (serialization.py) to rebuild it."""
    args = (typed, tensor.storage_offset(), tuple(tensor.size()), tensor.stride(),
            quantizer_params(tensor), tensor.requires_grad, collections.OrderedDict())
    return (_compat.rebuild_qtensor, args)


def refuse_compile(name: str) -> NotImplementedError:
    """Raised while torch.compile traces an op that makes or reads a quantized tensor: Dynamo
    turns it into a graph break, so the op runs eagerly on the device (with fullgraph=True,
    it is the error)."""
    return NotImplementedError(
        f"{name}: torch.compile does not trace quantized {DEVICE_NAME} tensors (PyTorch's fake "
        "tensors carry no quantizer, and its fake quantize_per_tensor says float32), so this op "
        "runs eagerly, outside the compiled graph. With fullgraph=True, quantize outside the "
        "compiled function, or dequantize before it."
    )


# The ops that make a quantized tensor from unquantized ones.
_MAKERS = frozenset(f"aten::{name}" for name in (
    "quantize_per_tensor", "quantize_per_tensor_dynamic", "quantize_per_channel",
    "_make_per_tensor_quantized_tensor", "_make_per_channel_quantized_tensor",
    "_empty_affine_quantized", "_empty_per_channel_affine_quantized", "empty_quantized"))


def makes_quantized(name: str, args, kwargs: dict) -> bool:
    """Whether op `name` ("aten::quantize_per_tensor.tensor_qparams") reads or makes a quantized
    tensor. Asked while torch.compile traces, where PyTorch's fake `quantize_per_tensor` says
    float32: without this check a compiled graph would treat the integers as floats."""
    if name.partition(".")[0] in _MAKERS:
        return True
    dtype = kwargs.get("dtype")
    return dtype in _QUANTIZED_DTYPES or _has_quantized(args)


def _has_quantized(value) -> bool:
    if isinstance(value, torch.Tensor):
        return value.is_quantized
    if isinstance(value, (list, tuple)):
        return any(_has_quantized(item) for item in value)
    return False
