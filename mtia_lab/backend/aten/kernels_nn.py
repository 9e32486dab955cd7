"""Native kernels for the layers of vision and transformer models, and for optimizer steps.

These are the ops that real models (the zoo of mtia_lab/testing/zoo.py) used to send through the
CPU fallback: convolutions, BatchNorm, pooling, the softmax that scaled_dot_product_attention
uses, the backward ops of slicing, in-place activations, PyTorch's fused multi-head attention,
and the multi-tensor (`_foreach_*`) and fused optimizer ops that torch.optim calls. MTIA runs
all of them on the device; here, as for kernels.py's families, every overload (functional,
in-place and `out=`) runs the aten op on device memory, so an op that writes to its arguments
(BatchNorm's running statistics, the optimizer's parameters and moments) writes the device's
bytes directly.

The work is priced by the roofline (cost.py): convolutions and attention on the GEMM engine
(FLOP_RULES below), fused optimizer steps and in-place `_foreach_` ops by the bytes they write.
"""

from __future__ import annotations

import math

import torch

from ..._compat import OpOverloadPacket, all_op_schemas
from ..runtime import cost

aten = torch.ops.aten

CONVOLUTION = [
    "convolution", "convolution_backward", "_convolution", "convolution_overrideable",
    "convolution_backward_overrideable",
]
BATCH_NORM = [
    "native_batch_norm", "native_batch_norm_backward", "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional",
    "batch_norm_backward", "_batch_norm_with_update", "_batch_norm_with_update_functional",
    "_batch_norm_no_update", "native_group_norm", "native_group_norm_backward",
]
POOLING = [
    "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "max_pool3d_with_indices",
    "max_pool3d_with_indices_backward", "avg_pool2d", "avg_pool2d_backward", "avg_pool3d",
    "avg_pool3d_backward", "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward",
    "_adaptive_avg_pool3d", "_adaptive_avg_pool3d_backward", "adaptive_max_pool2d",
    "adaptive_max_pool2d_backward",
]
ATTENTION = ["_safe_softmax", "_masked_softmax", "_native_multi_head_attention",
             "_transform_bias_rescale_qkv"]
# Backward of views: the gradient of a slice is the slice's gradient put into zeros.
VIEW_BACKWARD = [
    "slice_backward", "select_backward", "unfold_backward", "diagonal_backward",
    "as_strided_scatter", "slice_scatter", "select_scatter", "diagonal_scatter",
]
IN_PLACE_ACTIVATIONS = ["hardswish_", "hardsigmoid_", "mish_", "celu_", "selu_", "rrelu_"]
FUSED_OPTIMIZERS = [
    "_fused_adamw_", "_fused_adam_", "_fused_sgd_", "_fused_adagrad_", "_fused_adamw",
    "_fused_adam", "_fused_sgd", "_fused_adagrad",
]
# Every multi-tensor op aten has: torch.optim's foreach path and clip_grad_norm_ use them.
FOREACH = sorted(
    {s.name.split("::")[1] for s in all_op_schemas()
     if s.name.startswith("aten::_foreach_")}
)

NN_FAMILIES = {
    "convolution": CONVOLUTION,
    "batch norm": BATCH_NORM,
    "pooling": POOLING,
    "attention": ATTENTION,
    "view backward": VIEW_BACKWARD,
    "in-place activations": IN_PLACE_ACTIVATIONS,
    "fused optimizers": FUSED_OPTIMIZERS,
    "foreach": FOREACH,
}


# --- prices: work that is not one vector op per output element -----------------------------


def _shape(value) -> tuple[int, ...]:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else ()


def _convolution_flops(args, out) -> tuple[float, float, int | None]:
    """2 multiply-adds per weight tap per output element (per input element if transposed)."""
    x, weight = args[0], args[1]
    transposed = len(args) > 6 and bool(args[6])
    taps = math.prod(_shape(weight)[1:])
    result = out if isinstance(out, torch.Tensor) else x
    elements = x.numel() if transposed else result.numel()
    return 2.0 * elements * taps, 0.0, None


def _convolution_backward_flops(args, out) -> tuple[float, float, int | None]:
    """As the forward, once for the input's gradient and once for the weight's (output_mask)."""
    grad_output, weight = args[0], args[2]
    mask = args[10] if len(args) > 10 else (True, True, True)
    taps = math.prod(_shape(weight)[1:])
    passes = int(bool(mask[0])) + int(bool(mask[1]))
    return 2.0 * grad_output.numel() * taps * passes, 0.0, None


def _multi_head_attention_flops(args, out) -> tuple[float, float, int | None]:
    """Input projection (3 matrices), scores and weighted sum, output projection."""
    query, key = args[0], args[1]
    batch, length, embed = _shape(query)
    source = _shape(key)[1]
    projections = 2.0 * batch * length * embed * embed * 4
    attention = 2.0 * 2 * batch * length * source * embed
    return projections + attention, float(batch * length * source), None


# Per parameter element: AdamW's update is about a dozen vector operations.
_OPTIMIZER_FLOPS = {"_fused_adamw_": 12, "_fused_adam_": 12, "_fused_sgd_": 4,
                    "_fused_adagrad_": 6}


def _fused_optimizer_rule(per_element: int):
    def rule(args, out) -> tuple[float, float, int | None]:
        # the parameters and the moments (positions 0, 2, 3); gradients are read only
        written = sum(cost.tensor_bytes(args[i]) for i in (0, 2, 3)
                      if i < len(args) and isinstance(args[i], (list, tuple)))
        elements = cost.tensor_bytes(args[0]) // max(_element_size(args[0]), 1)
        return 0.0, float(per_element * elements), written
    return rule


def _element_size(tensors) -> int:
    return tensors[0].element_size() if tensors else 4


def _foreach_in_place(args, out) -> tuple[float, float, int | None]:
    """An in-place `_foreach_` op returns nothing: what it writes is its first list."""
    written = cost.tensor_bytes(args[0])
    return 0.0, float(written // max(_element_size(args[0]), 1)), written


def register_prices() -> None:
    for packet in _packets(["convolution", "_convolution", "convolution_overrideable"]):
        for name in packet.overloads():
            cost.FLOP_RULES[getattr(packet, name)] = _convolution_flops
    for packet in _packets(["convolution_backward", "convolution_backward_overrideable"]):
        for name in packet.overloads():
            cost.FLOP_RULES[getattr(packet, name)] = _convolution_backward_flops
    for name in aten._native_multi_head_attention.overloads():
        cost.FLOP_RULES[getattr(aten._native_multi_head_attention, name)] = (
            _multi_head_attention_flops
        )
    for op, per_element in _OPTIMIZER_FLOPS.items():
        packet = getattr(aten, op)
        for name in packet.overloads():
            cost.FLOP_RULES[getattr(packet, name)] = _fused_optimizer_rule(per_element)
    for packet in _packets([n for n in FOREACH if n.endswith("_")]):
        for name in packet.overloads():
            cost.FLOP_RULES[getattr(packet, name)] = _foreach_in_place


def _packets(names: list[str]):
    for name in names:
        packet = getattr(aten, name, None)
        if isinstance(packet, OpOverloadPacket):
            yield packet
