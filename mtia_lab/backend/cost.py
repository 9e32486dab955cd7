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
        gemm_peak = profile.gemm_flops_bf16 if self.low_precision else profile.gemm_flops_bf16 / 2
        vector_peak = profile.vector_flops_bf16 if self.low_precision else profile.vector_flops_fp32
        seconds = max(
            self.gemm_flops / gemm_peak,
            self.vector_flops / vector_peak,
            (self.bytes_read + self.bytes_written) / profile.dram_bandwidth,
        )
        seconds += self.host_link_bytes / profile.host_link_bandwidth
        return profile.kernel_launch_us + seconds * 1e6

    def __add__(self, other: KernelCost) -> KernelCost:
        return KernelCost(
            self.gemm_flops + other.gemm_flops,
            self.vector_flops + other.vector_flops,
            self.bytes_read + other.bytes_read,
            self.bytes_written + other.bytes_written,
            self.host_link_bytes + other.host_link_bytes,
            self.low_precision or other.low_precision,
        )


def _nbytes(value) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return 0


def gemm_flops(func, args) -> float:
    """2*M*N*K multiply-adds of the matmul-like ops; 0 for anything else."""
    if func in (aten.mm.default, aten.mm.out):
        a, b = args[0], args[1]
        return 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
    if func in (aten.addmm.default, aten.addmm.out, aten.addmm_.default):
        a, b = args[1], args[2]
        return 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
    if func in (aten.bmm.default, aten.bmm.out):
        a, b = args[0], args[1]
        return 2.0 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    if func in (aten.baddbmm.default, aten.baddbmm.out, aten.baddbmm_.default):
        a, b = args[1], args[2]
        return 2.0 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    return 0.0


def estimate(func, inner_args, out) -> KernelCost:
    """Cost of one eager kernel: bytes of its tensor inputs and outputs, flops by class."""
    read = sum(_nbytes(a) for a in inner_args)
    written = _nbytes(out)
    flops = gemm_flops(func, inner_args)
    elements = written // 4 if written else read // 4
    low = isinstance(out, torch.Tensor) and out.dtype in _LOW_PRECISION
    if flops:
        return KernelCost(gemm_flops=flops, bytes_read=read, bytes_written=written, low_precision=low)
    return KernelCost(vector_flops=float(elements), bytes_read=read, bytes_written=written, low_precision=low)


def transfer(nbytes: int) -> KernelCost:
    """A copy across the host link (host->device or device->host)."""
    return KernelCost(host_link_bytes=nbytes, bytes_written=nbytes)
