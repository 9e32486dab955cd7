"""The roofline cost model: how long a kernel would take on the simulated chip.

A kernel is limited either by arithmetic or by memory traffic, whichever is slower (the
"roofline"), plus a fixed launch overhead:

    duration = launch + max(gemm_flops / gemm_peak, vector_flops / vector_peak,
                            bytes_moved / memory_bandwidth)

GEMM-like ops (mm, addmm, bmm, baddbmm) run on the chip's GEMM engine; everything else on its
vector units. Peaks and bandwidths come from the chip profile (profile.py). Data that moves
between host and device (copies, the CPU fallback) goes over the host link instead.
The same function prices an eager op and a fused kernel of the scheduler, so their simulated
times are comparable.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .profile import ChipProfile

aten = torch.ops.aten
_LOW_PRECISION = (torch.bfloat16, torch.float16, torch.int8, torch.uint8)


@dataclass(frozen=True)
class KernelCost:
    gemm_flops: float = 0.0
    vector_flops: float = 0.0
    bytes_read: int = 0
    bytes_written: int = 0
    host_link_bytes: int = 0  # bytes that cross PCIe (copies, fallbacks)
    low_precision: bool = False

    def duration_us(self, profile: ChipProfile) -> float:
        return roofline_us(
            profile, self.gemm_flops, self.vector_flops, self.bytes_read + self.bytes_written,
            self.host_link_bytes, self.low_precision,
        )

    def __add__(self, other: KernelCost) -> KernelCost:
        return KernelCost(
            self.gemm_flops + other.gemm_flops,
            self.vector_flops + other.vector_flops,
            self.bytes_read + other.bytes_read,
            self.bytes_written + other.bytes_written,
            self.host_link_bytes + other.host_link_bytes,
            self.low_precision or other.low_precision,
        )


def roofline_us(
    profile: ChipProfile,
    gemm_flops: float,
    vector_flops: float,
    bytes_moved: int,
    host_link_bytes: int = 0,
    low_precision: bool = False,
) -> float:
    """The formula of the module docstring, in microseconds."""
    if low_precision:
        gemm_peak, vector_peak = profile.gemm_flops_bf16, profile.vector_flops_bf16
    else:
        gemm_peak, vector_peak = profile.gemm_flops_bf16 / 2, profile.vector_flops_fp32
    seconds = max(
        gemm_flops / gemm_peak, vector_flops / vector_peak, bytes_moved / profile.dram_bandwidth
    )
    seconds += host_link_bytes / profile.host_link_bandwidth
    return profile.kernel_launch_us + seconds * 1e6


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


def _gemm_rule(func):
    def rule(args, out) -> tuple[float, float, int | None]:
        flops = gemm_flops(func, args)  # an empty product (K = 0) still writes its output
        return flops, 0.0 if flops else float(tensor_bytes(out) // 4), None
    return rule


FLOP_RULES.update({func: _gemm_rule(func) for func in _GEMM_OPERANDS})


def estimate_terms(func, inner_args, out) -> tuple[float, float, int, int, bool]:
    """(gemm_flops, vector_flops, bytes_read, bytes_written, low_precision) of one eager kernel:
    bytes of its tensor inputs and outputs, flops by class (one vector op per output element)."""
    read = 0
    for arg in inner_args:  # tensor_bytes(inner_args), unrolled one level: this runs once per op
        if isinstance(arg, torch.Tensor):
            read += arg.nbytes
        elif isinstance(arg, (list, tuple)):
            read += tensor_bytes(arg)
    if isinstance(out, torch.Tensor):
        written = out.nbytes
        low = out.dtype in _LOW_PRECISION
    else:
        written, low = tensor_bytes(out), False
    rule = FLOP_RULES.get(func)  # one lookup per op: hashing an OpOverload runs Python code
    if rule is not None:
        gemm, vector, rule_written = rule(inner_args, out)
        return gemm, vector, read, written if rule_written is None else rule_written, low
    elements = written // 4 if written else read // 4
    return 0.0, float(elements), read, written, low


def estimate(func, inner_args, out) -> KernelCost:
    """Cost of one eager kernel (see `estimate_terms`)."""
    gemm, vector, read, written, low = estimate_terms(func, inner_args, out)
    return KernelCost(gemm, vector, read, written, 0, low)


def estimate_us(func, inner_args, out, profile: ChipProfile) -> float:
    """`estimate(...).duration_us(profile)` without building the KernelCost: the dispatcher's
    path when nobody is watching (no observer to hand the KernelCost to)."""
    gemm, vector, read, written, low = estimate_terms(func, inner_args, out)
    return roofline_us(profile, gemm, vector, read + written, 0, low)


def transfer(nbytes: int) -> KernelCost:
    """A copy across the host link (host->device or device->host)."""
    return KernelCost(host_link_bytes=nbytes, bytes_written=nbytes)
