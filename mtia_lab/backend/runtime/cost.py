"""The roofline cost model: how long a kernel would take on the simulated chip.

A kernel is limited either by arithmetic or by memory traffic, whichever is slower (the
"roofline"), plus a fixed launch overhead:

    duration = launch + max(gemm_flops / gemm_peak, vector_flops / vector_peak,
                            dram_bytes / dram_bandwidth + sram_bytes / sram_bandwidth)

`launch` is the shortest kernel of its class (pointwise, reduction, matmul), and a kernel whose
whole working set fits a hardware cache moves it at the cache's bandwidth: figures the GPU
profiles measure (mtia_lab/calibration/); on the MTIA profiles the three floors are one
assumed figure and there is no such cache.

GEMM-like ops (mm, addmm, bmm, baddbmm) run on the chip's GEMM engine; everything else on its
vector units. The peak follows the data type: INT8, FP16/BF16, or FP32 (the FP32 GEMM rate is
not published: half the BF16 rate, an assumption -- see docs/chip-profile.md). A kernel's
inputs and outputs move at LPDDR5 bandwidth; the intermediates a fused kernel keeps on chip
move at SRAM bandwidth (13x faster on MTIA v2), which is why fusion pays on this chip. Data
that moves between host and device (copies, the CPU fallback) goes over the host link.
The same function prices an eager op and a fused kernel of the scheduler, so their simulated
times are comparable.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .profile import ChipProfile

aten = torch.ops.aten
_LOW_PRECISION = (torch.bfloat16, torch.float16)
_INT8 = (torch.int8, torch.uint8)


@dataclass(frozen=True)
class KernelCost:
    gemm_flops: float = 0.0
    vector_flops: float = 0.0
    bytes_read: int = 0
    bytes_written: int = 0
    host_link_bytes: int = 0  # bytes that cross PCIe (copies, fallbacks)
    low_precision: bool = False  # FP16/BF16 peaks
    sram_bytes: int = 0  # intermediates written and read inside a fused kernel, on chip
    spill_bytes: int = 0  # intermediates that did not fit the SRAM: they go through DRAM
    int8: bool = False  # INT8 peaks
    reduction: bool = False  # a reduction kernel: its own launch floor (profile)

    def duration_us(self, profile: ChipProfile) -> float:
        return roofline_us(
            profile, self.gemm_flops, self.vector_flops,
            self.bytes_read + self.bytes_written + self.spill_bytes, self.host_link_bytes,
            self.low_precision, self.sram_bytes, self.int8, self.reduction,
        )

    def __add__(self, other: KernelCost) -> KernelCost:
        return KernelCost(
            self.gemm_flops + other.gemm_flops,
            self.vector_flops + other.vector_flops,
            self.bytes_read + other.bytes_read,
            self.bytes_written + other.bytes_written,
            self.host_link_bytes + other.host_link_bytes,
            self.low_precision or other.low_precision,
            self.sram_bytes + other.sram_bytes,
            self.spill_bytes + other.spill_bytes,
            self.int8 or other.int8,
            self.reduction or other.reduction,
        )


def roofline_us(
    profile: ChipProfile,
    gemm_flops: float,
    vector_flops: float,
    bytes_moved: int,
    host_link_bytes: int = 0,
    low_precision: bool = False,
    sram_bytes: int = 0,
    int8: bool = False,
    reduction: bool = False,
) -> float:
    """The formula of the module docstring, in microseconds (`bytes_moved`: DRAM bytes)."""
    if int8:
        gemm_peak, vector_peak = profile.gemm_ops_int8, profile.vector_ops_int8
    elif low_precision:
        gemm_peak, vector_peak = profile.gemm_flops_bf16, profile.vector_flops_bf16
    else:
        gemm_peak, vector_peak = profile.gemm_flops_fp32, profile.vector_flops_fp32
    bandwidth = profile.dram_bandwidth
    if profile.cache_bytes and bytes_moved <= profile.cache_bytes:  # it fits the cache (L2)
        bandwidth = profile.cache_bandwidth
    memory = bytes_moved / bandwidth + sram_bytes / profile.sram_bandwidth
    seconds = max(gemm_flops / gemm_peak, vector_flops / vector_peak, memory)
    seconds += host_link_bytes / profile.host_link_bandwidth
    floor = 0.0  # the class's own floor where the profile has one (0: kernel_launch_us)
    if gemm_flops:
        floor = profile.gemm_launch_us
    elif reduction:
        floor = profile.reduction_launch_us
    return (floor or profile.kernel_launch_us) + seconds * 1e6


# Reductions (and normalizations, scans, softmax: a reduction along a row inside): their
# kernels have their own launch floor on the GPU profiles.
_REDUCTION_NAMES = frozenset({
    "sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "std_mean",
    "norm", "linalg_vector_norm", "argmax", "argmin", "logsumexp", "cumsum", "cumprod", "any",
    "all", "_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data",
    "native_layer_norm", "native_layer_norm_backward", "native_group_norm",
    "native_group_norm_backward", "native_batch_norm", "native_batch_norm_backward",
    "_native_batch_norm_legit", "_native_batch_norm_legit_no_training", "nll_loss_forward",
    "nll_loss2d_forward", "_fused_rms_norm",
})
_REDUCTION: dict = {}
# Inductor names its reduction kernels triton_per_* (persistent) and triton_red_* (looped)
REDUCTION_PREFIXES = ("triton_per_", "triton_red_")


def is_reduction(func) -> bool:
    """Whether an aten overload reduces along an axis (cached per overload)."""
    known = _REDUCTION.get(func)
    if known is None:
        packet = getattr(func, "_overloadpacket", None)
        known = _REDUCTION[func] = getattr(packet, "__name__", "") in _REDUCTION_NAMES
    return known


def tensor_bytes(value) -> int:
    """Bytes of the tensors in `value` (a tensor, or lists/tuples of them); 0 for the rest."""
    if isinstance(value, torch.Tensor):
        return value.nbytes  # numel * element_size
    if isinstance(value, (list, tuple)):
        total = 0
        for item in value:
            total += tensor_bytes(item)
        return total
    return 0


# GEMM-like overloads -> (position of the first matrix operand, batched?)
_GEMM_OPERANDS = {
    aten.mm.default: (0, False),
    aten.mm.out: (0, False),
    aten.addmm.default: (1, False),
    aten.addmm.out: (1, False),
    aten.addmm_.default: (1, False),
    aten.bmm.default: (0, True),
    aten.bmm.out: (0, True),
    aten.baddbmm.default: (1, True),
    aten.baddbmm.out: (1, True),
    aten.baddbmm_.default: (1, True),
}


# overload -> rule(inner_args, out) -> (gemm_flops, vector_flops, bytes_written or None): ops
# whose work is not one vector op per output element (convolutions on the GEMM engine, fused
# optimizer steps that write their arguments); filled by kernels_nn.py.
FLOP_RULES: dict = {}


def gemm_flops(func, args) -> float:
    """2*M*N*K multiply-adds of the matmul-like ops (times the batch); 0 for anything else."""
    operands = _GEMM_OPERANDS.get(func)
    if operands is None:
        return 0.0
    first, batched = operands
    a, b = args[first].shape, args[first + 1].shape
    if batched:
        return 2.0 * a[0] * a[1] * a[2] * b[2]
    return 2.0 * a[0] * a[1] * b[1]


def estimate_terms(func, inner_args, out) -> tuple[float, float, int, int, bool, bool]:
    """(gemm_flops, vector_flops, bytes_read, bytes_written, low_precision, int8) of one eager
    kernel: bytes of its tensor inputs and outputs, flops by class (one vector op per output
    element), the precision from the output's dtype (INT8 also from an int8 GEMM operand)."""
    read = 0
    for arg in inner_args:  # tensor_bytes(inner_args), unrolled one level: this runs once per op
        if isinstance(arg, torch.Tensor):
            read += arg.nbytes
        elif isinstance(arg, (list, tuple)):
            read += tensor_bytes(arg)
    if isinstance(out, torch.Tensor):
        written = out.nbytes
        low, int8 = out.dtype in _LOW_PRECISION, out.dtype in _INT8
    else:
        written, low, int8 = tensor_bytes(out), False, False
    rule = FLOP_RULES.get(func)
    if rule is not None:
        gemm, vector, rule_written = rule(inner_args, out)
        return (gemm, vector, read, written if rule_written is None else rule_written, low,
                int8)
    flops = gemm_flops(func, inner_args) if func in _GEMM_OPERANDS else 0.0
    if flops:
        first = inner_args[_GEMM_OPERANDS[func][0]]
        int8 = int8 or getattr(first, "dtype", None) in _INT8
        return flops, 0.0, read, written, low, int8
    elements = written // 4 if written else read // 4
    return 0.0, float(elements), read, written, low, int8


def estimate(func, inner_args, out) -> KernelCost:
    """Cost of one eager kernel (see `estimate_terms`)."""
    gemm, vector, read, written, low, int8 = estimate_terms(func, inner_args, out)
    return KernelCost(gemm, vector, read, written, 0, low, int8=int8,
                      reduction=is_reduction(func))


def estimate_us(func, inner_args, out, profile: ChipProfile) -> float:
    """`estimate(...).duration_us(profile)` without building the KernelCost: the dispatcher's
    path when nobody is watching (no observer to hand the KernelCost to)."""
    gemm, vector, read, written, low, int8 = estimate_terms(func, inner_args, out)
    return roofline_us(profile, gemm, vector, read + written, 0, low, 0, int8,
                       is_reduction(func))


def transfer(nbytes: int) -> KernelCost:
    """A copy across the host link (host->device or device->host)."""
    return KernelCost(host_link_bytes=nbytes, bytes_written=nbytes)
